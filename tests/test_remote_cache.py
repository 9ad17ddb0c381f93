"""A shared compile cache over fsspec (here file://, a shared folder): a new machine's build
takes every entry from it; a damaged or unreachable one costs a warning and a local
compile, never a failed or wrong build."""
import subprocess
import sys
from pathlib import Path

import pytest

import aotk
from tests.projects import ADD_KERNEL, add_manifest

pytest.importorskip("fsspec")


@pytest.fixture
def project(tmp_path):
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "aotk.toml").write_text(add_manifest(blocks=(256, 1024)))
    (tmp_path / "p" / "add.py").write_text(ADD_KERNEL)
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


@pytest.fixture
def s3(monkeypatch):
    """A real S3 server on localhost (moto's server mode) with a bucket, and fsspec's s3
    backend pointed at it."""
    pytest.importorskip("s3fs")
    server_module = pytest.importorskip("moto.server")
    import boto3
    import fsspec.config
    server = server_module.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(name, "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1").create_bucket(
        Bucket="kernels")
    monkeypatch.setitem(fsspec.config.conf, "s3", {"endpoint_url": endpoint,
                                                   "key": "testing", "secret": "testing"})
    import s3fs
    s3fs.S3FileSystem.clear_instance_cache()
    yield endpoint
    s3fs.S3FileSystem.clear_instance_cache()
    server.stop()


def test_an_s3_bucket_shares_the_entries_and_an_outage_costs_a_warning(project, tmp_path,
                                                                       monkeypatch, capfd, s3):
    _on(monkeypatch, tmp_path, "a", "s3://kernels/aotk")
    first = aotk.build(project, out_dir=tmp_path / "out-a")
    assert first.compiled == 4
    _on(monkeypatch, tmp_path, "b", "s3://kernels/aotk")
    second = aotk.build(project, out_dir=tmp_path / "out-b")
    assert second.compiled == 0 and second.library.read_bytes() == first.library.read_bytes()
    import fsspec.config
    import s3fs
    monkeypatch.setitem(fsspec.config.conf, "s3", {"endpoint_url": "http://127.0.0.1:9",
                                                   "key": "testing", "secret": "testing",
                                                   "config_kwargs": {"connect_timeout": 1,
                                                                     "retries": {"max_attempts": 1}}})
    s3fs.S3FileSystem.clear_instance_cache()
    _on(monkeypatch, tmp_path, "c", "s3://kernels/aotk")
    capfd.readouterr()
    down = aotk.build(project, out_dir=tmp_path / "out-c")
    warnings = [line for line in capfd.readouterr().err.splitlines() if "warning" in line]
    assert down.compiled == 4 and down.library.read_bytes() == first.library.read_bytes()
    assert len(warnings) == 1 and "s3://kernels/aotk" in warnings[0]
