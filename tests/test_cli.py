"""The ``aotk`` command line and the packaging it relies on, without a GPU."""
import os
import sys

import pytest
from click.testing import CliRunner

from aotk_cli.main import load_kernel, main, parse_define, UserError

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_help_and_version():
    runner = CliRunner()
    assert "compile" in runner.invoke(main, ["--help"]).output
    assert "0.1.0" in runner.invoke(main, ["--version"]).output


def test_doctor():
    result = CliRunner().invoke(main, ["doctor"])
    assert result.exit_code == 0
    assert "ptxas" in result.output and "libdevice" in result.output and "gpu" in result.output


@pytest.mark.parametrize("text, expected", [
    ("BLOCK=1024", ("BLOCK", 1024)), ("EPS=1e-5", ("EPS", 1e-5)),
    ("EVEN=True", ("EVEN", True)), ("EVEN=False", ("EVEN", False)),
    ("ACT=relu", ("ACT", "relu")),
])
def test_parse_define(text, expected):
    assert parse_define(text) == expected


@pytest.mark.parametrize("text", ["BLOCK", "=3", "2X=1"])
def test_parse_define_rejects(text):
    with pytest.raises(UserError, match="NAME=VALUE"):
        parse_define(text)


def test_load_kernel_resolves_local_imports(tmp_path):
    (tmp_path / "aotk_test_helpers.py").write_text("WIDTH = 128\n")
    (tmp_path / "k.py").write_text(
        "import aotk\nimport aotk.language as tl\nfrom aotk_test_helpers import WIDTH\n\n"
        "@aotk.jit\ndef k(p, BLOCK: tl.constexpr):\n    tl.store(p + tl.arange(0, BLOCK), 0)\n")
    before = list(sys.path)
    try:
        assert load_kernel(f"{tmp_path / 'k.py'}:k").name == "k"
    finally:
        sys.modules.pop("aotk_test_helpers", None)
    assert sys.path == before


@pytest.mark.parametrize("args, message", [
    (["compile", "missing.py:k", "-s", "i32"], "missing.py: no such file"),
    (["compile", "examples/kernels/add.py", "-s", "i32"], "expected FILE.py:FUNCTION"),
    (["compile", "examples/kernels/add.py:add_kernel", "-s", "i32", "-D", "oops"],
     "-D expects NAME=VALUE"),
    (["compile", "examples/kernels/add.py:nope", "-s", "i32"], "not an @aotk.jit function"),
    (["compile", "examples/kernels/add.py:add_kernel", "-s", "*fp32, i32", "-D", "BLOCK=64"],
     "2 entries but add_kernel has 4"),
])
def test_compile_errors_are_one_line(args, message, monkeypatch):
    monkeypatch.chdir(ROOT)
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1
    assert message in result.output
    assert "Traceback" not in result.output


def test_compile_writes_every_stage(tmp_path):
    result = CliRunner().invoke(main, [
        "compile", os.path.join(ROOT, "examples/kernels/add.py") + ":add_kernel",
        "--signature", "*fp32:16, *fp32:16, *fp32:16, i32:16", "-D", "BLOCK=1024",
        "-o", str(tmp_path)])
    assert result.exit_code == 0, result.output
    for ext in ("kir", "llir", "ptx", "cubin", "json"):
        assert (tmp_path / f"add_kernel.{ext}").exists()
        assert str(tmp_path / f"add_kernel.{ext}") in result.output
    assert (tmp_path / "add_kernel.cubin").read_bytes()[:4] == b"\x7fELF"
    assert "ld.global.v4.b32" in (tmp_path / "add_kernel.ptx").read_text()


def test_pyproject_lists_every_package():
    """setuptools is given the packages by hand (cli/ installs renamed); none may be missed."""
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        listed = set(tomllib.load(f)["tool"]["setuptools"]["packages"])
    on_disk = {os.path.relpath(folder, ROOT).replace(os.sep, ".")
               for folder, _, files in os.walk(os.path.join(ROOT, "aotk"))
               if "__init__.py" in files}
    assert on_disk <= listed, f"add {sorted(on_disk - listed)} to pyproject.toml"
