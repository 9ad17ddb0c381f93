"""A shared compile cache over fsspec (here file://, a shared folder): a new machine's build
takes every entry from it; a damaged or unreachable one costs a warning and a local
compile, never a failed or wrong build."""
import subprocess
import sys
from pathlib import Path

import pytest

import aotk
from tests.test_build_output import KERNEL, MANIFEST

pytest.importorskip("fsspec")


@pytest.fixture
def project(tmp_path):
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "aotk.toml").write_text(MANIFEST)
    (tmp_path / "p" / "add.py").write_text(KERNEL)
    return tmp_path / "p" / "aotk.toml"


def _on(monkeypatch, tmp_path, machine: str, url: str):
    monkeypatch.setenv("AOTK_CACHE_DIR", str(tmp_path / f"local-{machine}"))
    monkeypatch.setenv("AOTK_CACHE_URL", url)


def _remote_entries(folder: Path) -> list:
    return sorted(folder.glob("*/*.fatbin"))


def test_a_new_machine_takes_every_entry_from_the_shared_cache(project, tmp_path, monkeypatch):
    shared = tmp_path / "shared"
    _on(monkeypatch, tmp_path, "a", f"file://{shared}")
    first = aotk.build(project, out_dir=tmp_path / "out-a")
    assert first.compiled == 4 and len(_remote_entries(shared)) == 4
    _on(monkeypatch, tmp_path, "b", f"file://{shared}")
    second = aotk.build(project, out_dir=tmp_path / "out-b")
    assert second.compiled == 0
    assert second.library.read_bytes() == first.library.read_bytes()
    assert len(list((tmp_path / "local-b").glob("*/*.fatbin"))) == 4   # kept locally now


def test_a_damaged_shared_entry_is_compiled_here_with_one_warning(project, tmp_path, monkeypatch,
                                                                  capfd):
    shared = tmp_path / "shared"
    _on(monkeypatch, tmp_path, "a", f"file://{shared}")
    first = aotk.build(project, out_dir=tmp_path / "out-a")
    _remote_entries(shared)[0].write_bytes(b"garbage\n")
    _on(monkeypatch, tmp_path, "c", f"file://{shared}")
    capfd.readouterr()
    again = aotk.build(project, out_dir=tmp_path / "out-c")
    warnings = [line for line in capfd.readouterr().err.splitlines() if "warning" in line]
    assert len(warnings) == 1 and "does not match its recorded size and sha256" in warnings[0]
    assert again.compiled == 1 and again.library.read_bytes() == first.library.read_bytes()


@pytest.mark.parametrize("url, message", [
    ("nosuchprotocol://bucket/aotk", "cannot be opened"),
    ("file://{tmp}/a-file/below", "cannot be written"),
])
def test_an_unusable_shared_cache_costs_one_warning(project, tmp_path, monkeypatch, capfd,
                                                    url, message):
    (tmp_path / "a-file").write_text("not a folder")
    _on(monkeypatch, tmp_path, "d", url.format(tmp=tmp_path))
    result = aotk.build(project, out_dir=tmp_path / "out-d")
    warnings = [line for line in capfd.readouterr().err.splitlines() if "warning" in line]
    assert result.compiled == 4 and len(warnings) == 1 and message in warnings[0]


def test_the_command_line_option(project, tmp_path):
    shared = tmp_path / "shared"
    run = subprocess.run([sys.executable, "-c", "from aotk_cli.main import main; main()",
                          "build", str(project), "--cache-url", f"file://{shared}"],
                         capture_output=True, text=True,
                         env={"PATH": "/usr/bin:/bin", "AOTK_CACHE_DIR": str(tmp_path / "l"),
                              "HOME": str(tmp_path)})
    assert run.returncode == 0, run.stderr
    assert len(_remote_entries(shared)) == 4
