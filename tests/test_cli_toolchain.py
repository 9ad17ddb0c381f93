"""The command line and the toolchain lookup, without a GPU."""
import os
import stat

import pytest
from click.testing import CliRunner

from aotk.toolchain import ToolchainError
from aotk.toolchain import locate, ptxas
from aotk_cli.main import main

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY_PTX = """.version 8.0
.target sm_80
.address_size 64
.visible .entry k(.param .u64 p)
{
  .reg .b64 %rd<2>;
  .reg .b32 %r<2>;
  ld.param.u64 %rd1, [p];
  cvta.to.global.u64 %rd1, %rd1;
  mov.u32 %r1, 7;
  st.global.u32 [%rd1], %r1;
  ret;
}
"""


@pytest.fixture
def fresh_tools():
    ptxas._reset_cache()
    yield
    ptxas._reset_cache()


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_assemble_tiny_ptx(arch):
    cubin, info = ptxas.assemble(TINY_PTX, arch)
    assert cubin[:4] == b"\x7fELF" and info["registers"] > 0 and info["spills"] == 0


def test_rejected_ptx_carries_ptxas_message():
    with pytest.raises(ToolchainError, match=r"sm_90[\s\S]*error"):
        ptxas.assemble(TINY_PTX.replace("st.global.u32", "st.global.bogus"), "sm_90")


def test_aotk_ptxas_override(tmp_path, monkeypatch, fresh_tools):
    fake = tmp_path / "ptxas"
    fake.write_text("#!/bin/sh\necho 'Cuda compilation tools, release 99.1, V99.1.7'\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("AOTK_PTXAS", str(fake))
    info = ptxas.find_ptxas()
    assert (info.path, info.origin, info.version) == (str(fake), "AOTK_PTXAS", "99.1.7")


def test_aotk_ptxas_missing_is_clear(monkeypatch, fresh_tools):
    monkeypatch.setenv("AOTK_PTXAS", "/nonexistent/ptxas")
    with pytest.raises(ToolchainError, match="AOTK_PTXAS=/nonexistent/ptxas"):
        locate.find_tool("ptxas")


def test_cli_help_version_doctor():
    runner = CliRunner()
    assert "compile" in runner.invoke(main, ["--help"]).output
    assert "0.1.0" in runner.invoke(main, ["--version"]).output
    result = runner.invoke(main, ["doctor"])
    assert result.exit_code == 0 and "ptxas" in result.output and "gpu" in result.output


def test_cli_compile_writes_every_stage(tmp_path):
    result = CliRunner().invoke(main, [
        "compile", os.path.join(ROOT, "examples/kernels/add.py") + ":add_kernel",
        "--signature", "*fp32:16, *fp32:16, *fp32:16, i32:16", "-D", "BLOCK=1024",
        "-o", str(tmp_path)])
    assert result.exit_code == 0, result.output
    for ext in ("kir", "gir", "llir", "ptx", "cubin", "json"):
        assert (tmp_path / f"add_kernel.{ext}").exists()
    assert "ld.global.v4.b32" in (tmp_path / "add_kernel.ptx").read_text()


@pytest.mark.parametrize("args, message", [
    (["compile", "missing.py:k", "-s", "i32"], "missing.py: no such file"),
    (["compile", "examples/kernels/add.py:add_kernel", "-s", "i32", "-D", "oops"],
     "-D expects NAME=VALUE"),
    (["compile", "examples/kernels/add.py:nope", "-s", "i32"], "not an @aotk.jit function"),
    (["compile", "examples/kernels/add.py:add_kernel", "-s", "*fp32, i32", "-D", "BLOCK=64"],
     "2 entries but add_kernel has 4"),
])
def test_cli_errors_are_one_line(args, message, monkeypatch):
    monkeypatch.chdir(ROOT)
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1
    assert message in result.output
    assert "Traceback" not in result.output
