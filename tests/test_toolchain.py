"""Finding and running NVIDIA's tools (ptxas, libdevice) and the doctor, without a GPU."""
import os
import stat

import pytest

import aotk
from aotk.buildsys.manifest import ManifestError
from aotk.toolchain import ToolchainError, doctor, find_libdevice, locate, ptxas
from tests.projects import ADD_KERNEL, add_manifest

# Stores 7 through the pointer parameter: the smallest kernel that exercises ld.param,
# a global store and register allocation.
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
    """Lookups are cached per process; tests that change AOTK_* start and end clean."""
    ptxas.reset_caches()
    yield
    ptxas.reset_caches()


def _fake_tool(directory, name, script):
    path = directory / name
    path.write_text(script)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


def test_find_ptxas_default(fresh_tools):
    info = ptxas.find_ptxas()
    assert os.access(info.path, os.X_OK)
    assert info.origin in ("nvidia-cuda-nvcc wheel", "PATH", "/usr/local/cuda")
    assert len(ptxas.ptxas_version()) == 3


def test_aotk_ptxas_override(tmp_path, monkeypatch, fresh_tools):
    fake = _fake_tool(tmp_path, "ptxas",
                      "#!/bin/sh\necho 'Cuda compilation tools, release 99.1, V99.1.7'\n")
    monkeypatch.setenv("AOTK_PTXAS", str(fake))
    info = ptxas.find_ptxas()
    assert (info.path, info.origin, info.version) == (str(fake), "AOTK_PTXAS", "99.1.7")
    assert ptxas.ptxas_version() == (99, 1, 7)


def test_aotk_ptxas_missing_is_clear(monkeypatch, fresh_tools):
    monkeypatch.setenv("AOTK_PTXAS", "/nonexistent/ptxas")
    with pytest.raises(ToolchainError, match="AOTK_PTXAS=/nonexistent/ptxas"):
        ptxas.find_ptxas()


def test_wheel_comes_before_path(tmp_path, monkeypatch, fresh_tools):
    if not locate.wheel_directories():
        pytest.skip("the nvidia-cuda-nvcc wheel is not installed")
    _fake_tool(tmp_path, "ptxas", "#!/bin/sh\nexit 1\n")
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    assert ptxas.find_ptxas().origin == "nvidia-cuda-nvcc wheel"


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_assemble_tiny_ptx(arch):
    cubin, info = ptxas.assemble(TINY_PTX, arch)
    assert cubin[:4] == b"\x7fELF"
    assert isinstance(info["registers"], int) and info["registers"] > 0
    assert info["spills"] == 0 and info["shared"] == 0 and info["stack"] == 0


def test_rejected_ptx_carries_ptxas_message():
    with pytest.raises(ToolchainError, match=r"sm_90[\s\S]*error") as caught:
        ptxas.assemble(TINY_PTX.replace("st.global.u32", "st.global.bogus"), "sm_90")
    assert "bogus" in str(caught.value)


def test_parse_verbose_sums_spills():
    text = ("ptxas info    : Used 40 registers, 384 bytes smem, 380 bytes cmem[0]\n"
            "    16 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads\n")
    assert ptxas.parse_verbose(text) == {"registers": 40, "shared": 384, "stack": 16,
                                         "spills": 20, "wgmma_serialized": False}


def test_parse_verbose_notices_serialized_wgmma():
    text = ("ptxas info    : (C7514) Potential Performance Loss: wgmma.mma_async instructions "
            "are serialized due to non wgmma instructions reading accumulator registers of  a "
            "wgmma between start and end of the pipeline stage in the function 'k' in line 0\n"
            "ptxas info    : Used 220 registers\n")
    assert ptxas.parse_verbose(text)["wgmma_serialized"] is True


PTX_64_THREADS = ".version 8.0\n.target sm_80\n.visible .entry k()\n.reqntid 64\n{\n\tret;\n}\n"


@pytest.mark.parametrize("first, second, retried, kept", [
    # 32 registers with spills, of 255 a thread of 64 may have: once more, capped; kept
    # when it spills less.
    ({"registers": 32, "spills": 48780}, {"registers": 255, "spills": 3264}, True, "stated"),
    ({"registers": 32, "spills": 4096}, {"registers": 255, "spills": 8192}, True, "first"),
    # Spills under a kilobyte (ptxas may trade them for occupancy), none, or more than half
    # the registers used: ptxas's choice stands.
    ({"registers": 32, "spills": 500}, None, False, "first"),
    ({"registers": 32, "spills": 0}, None, False, "first"),
    ({"registers": 200, "spills": 4096}, None, False, "first"),
])
def test_spills_with_registers_to_spare_are_assembled_again_with_maxnreg(
        monkeypatch, first, second, retried, kept):
    seen = []

    def assemble(ptx, arch):
        seen.append(ptx)
        return b"cubin%d" % len(seen), dict(first if len(seen) == 1 else second)
    monkeypatch.setattr(ptxas, "assemble", assemble)
    ptx, cubin, info = ptxas.assemble_with_register_room(PTX_64_THREADS, "sm_80")
    assert len(seen) == (2 if retried else 1)
    if retried:
        assert ".reqntid 64\n.maxnreg 255\n{" in seen[1]
    assert (ptx, info) == ((seen[1], second) if kept == "stated" else (seen[0], first))
    assert cubin == (b"cubin2" if kept == "stated" else b"cubin1")


def test_a_stated_maxnreg_is_not_second_guessed(monkeypatch):
    calls = []
    monkeypatch.setattr(ptxas, "assemble",
                        lambda ptx, arch: calls.append(ptx) or (b"", {"registers": 32,
                                                                     "spills": 5000}))
    ptxas.assemble_with_register_room(PTX_64_THREADS.replace(".reqntid 64",
                                                             ".reqntid 64\n.maxnreg 32"), "sm_80")
    assert len(calls) == 1


def test_find_libdevice(fresh_tools):
    path = find_libdevice()
    assert path.endswith("libdevice.10.bc") and os.path.isfile(path)


def test_aotk_libdevice_missing_is_clear(monkeypatch, fresh_tools):
    monkeypatch.setenv("AOTK_LIBDEVICE", "/nonexistent/libdevice.10.bc")
    with pytest.raises(ToolchainError, match="AOTK_LIBDEVICE"):
        find_libdevice()


def test_doctor_reports_every_row():
    rows = dict(doctor.report())
    assert list(rows) == ["python", "llvmlite", "nvptx target", "targets", "ptxas",
                          "fatbinary", "libdevice", "cuda driver", "gpu", "fit together"]
    assert rows["nvptx target"].startswith("available")
    assert rows["targets"].startswith("sm_75, sm_80")
    assert all(isinstance(value, str) and value for value in rows.values())


def test_doctor_survives_missing_tools(monkeypatch, fresh_tools):
    monkeypatch.setenv("AOTK_PTXAS", "/nonexistent/ptxas")
    monkeypatch.setenv("AOTK_FATBINARY", "/nonexistent/fatbinary")
    rows = dict(doctor.report())
    assert rows["ptxas"].startswith("not found") and "AOTK_PTXAS" in rows["ptxas"]
    assert rows["fatbinary"].startswith("not found")


@pytest.mark.parametrize("ptxas_version, driver, verdict", [
    ((13, 5, 37), (13, 0), "yes"),
    ((13, 0, 88), (12, 8), "no: cubins from ptxas 13.0 need a CUDA 13 driver"),
    ((12, 4, 0), (11, 8), "no: the driver (CUDA 11.8) predates PTX ISA 8.0"),
    ((13, 5, 37), None, "no driver here"),
])
def test_doctor_judges_whether_tools_fit(ptxas_version, driver, verdict):
    assert doctor.fit(ptxas_version, driver).startswith(verdict)


OLD_PTXAS = """#!/bin/sh
case "$1" in
  --version) echo 'Cuda compilation tools, release 12.4, V12.4.131' ;;
  --help) cat <<'HELP'
--gpu-name <gpu name>                               (-arch)
        Specify name of NVIDIA GPU to generate code for.
        Allowed values for this option:  'compute_50','compute_90a','sm_50','sm_75',
        'sm_80','sm_86','sm_89','sm_90','sm_90a'.
        Default value:  'sm_52'.
HELP
  ;;
esac
"""


def test_a_target_this_ptxas_cannot_build_is_named_before_anything_compiles(
        tmp_path, monkeypatch, fresh_tools):
    monkeypatch.setenv("AOTK_PTXAS", str(_fake_tool(tmp_path, "ptxas", OLD_PTXAS)))
    assert ptxas.ptxas_gpu_names(ptxas.find_ptxas().path) >= {"sm_75", "sm_90", "sm_90a"}
    assert ptxas.unbuildable_targets(["sm_80", "sm_100", "sm_120"]) == ["sm_100", "sm_120"]
    assert dict(doctor.report())["targets"] == (
        "sm_75, sm_80, sm_86, sm_89, sm_90; not by this ptxas: sm_100, sm_120")
    (tmp_path / "add.py").write_text(ADD_KERNEL)
    (tmp_path / "aotk.toml").write_text(add_manifest().replace('["sm_80"]',
                                                                '["sm_80", "sm_120"]'))
    with pytest.raises(ManifestError, match=r"library.targets: the ptxas in use \(.*12.4.131\) "
                                            r"cannot build sm_120; .*PTX \(for sm_80\)"):
        aotk.build(tmp_path / "aotk.toml", out_dir=tmp_path / "out")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("major, minor, says", [
    (9, 0, "sm_90: cubins for sm_90, sm_90a; PTX of sm_75, sm_80, sm_86, sm_89, sm_90 "),
    (8, 9, "sm_89: cubins for sm_80, sm_86, sm_89; PTX of sm_75, sm_80, sm_86, sm_89 "),
    (12, 1, "sm_121: cubins for sm_120; PTX of sm_75, sm_80, sm_86, sm_89, sm_90, sm_100, "),
    (7, 0, "sm_70: none of the targets (the oldest, sm_75, is newer)")])
def test_doctor_says_what_the_gpu_runs(major, minor, says):
    targets = ["sm_75", "sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_120"]
    assert doctor.runnable(targets, major, minor).startswith(says)
