"""Kernel files written for Triton, used as they are: ``import triton``, ``@triton.autotune``,
``@triton.heuristics``, built by ``aotk build`` and run by the interpreter."""
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import aotk
from aotk.buildsys.sources import SourceError, load_kernel, load_module
from aotk.triton_imports import redirect_triton
from tests.conftest import tree_pythonpath

ROOT = Path(__file__).resolve().parent.parent

TRITON_FILE = textwrap.dedent('''
    import triton
    import triton.language as tl
    from triton.language.extra import libdevice


    def grid_of(meta):
        return (triton.cdiv(meta["n"], meta["BLOCK"]),)


    @triton.autotune(
        configs=[triton.Config({"BLOCK": 128}, num_warps=4),
                 triton.Config({"BLOCK": 64}, num_warps=2)],
        key=["n"],
        prune_configs_by={"early_config_prune":
                          lambda configs, args: [c for c in configs
                                                 if c.kwargs["BLOCK"] <= args["n"]]},
    )
    @triton.heuristics({"EVEN": lambda args: args["n"] % args["BLOCK"] == 0})
    @triton.jit
    def scaled_exp(x_ptr, out_ptr, n, scale, BLOCK: tl.constexpr, EVEN: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        if EVEN:
            x = tl.load(x_ptr + offsets)
            tl.store(out_ptr + offsets, libdevice.exp(x) * scale)
        else:
            mask = offsets < n
            x = tl.load(x_ptr + offsets, mask=mask)
            tl.store(out_ptr + offsets, libdevice.exp(x) * scale, mask=mask)
''')


def _write(tmp_path, text=TRITON_FILE, name="triton_kernels.py"):
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize("n, block", [(200, 128), (100, 64), (256, 128)])
def test_triton_file_runs_with_its_autotune_heuristics_and_libdevice(tmp_path, n, block):
    path = _write(tmp_path)
    kernel, _ = load_kernel(path, "scaled_exp")
    assert isinstance(kernel, aotk.JITFunction) and kernel.name == "scaled_exp"
    module, _ = load_module(path)
    wrapper = module.scaled_exp
    x = np.linspace(-2, 2, n).astype(np.float32)
    out = np.zeros(n, np.float32)
    wrapper[module.grid_of](x, out, n, 0.5)
    np.testing.assert_allclose(out, np.exp(x) * 0.5, rtol=1e-6)
    # The first configuration the pruning hook keeps is the one launched.
    assert wrapper.chosen_config({"n": n}).kwargs["BLOCK"] == block


def test_triton_names_are_gone_after_the_file_loads(tmp_path):
    before = {name for name in sys.modules if name.split(".")[0] == "triton"}
    load_kernel(_write(tmp_path), "scaled_exp")
    after = {name for name in sys.modules if name.split(".")[0] == "triton"}
    assert after == before


def test_triton_module_without_counterpart_is_an_error_naming_it(tmp_path):
    # aotk has no `experimental` package at all: the error still names the Triton module.
    path = _write(tmp_path, "import triton\nfrom triton.experimental.gluon import language\n")
    with pytest.raises(SourceError) as info:
        load_kernel(path, "anything")
    assert str(path) in str(info.value) and "triton.experimental.gluon" in str(info.value)
    assert "aotk, which has no aotk.experimental.gluon" in str(info.value)


def test_probing_for_an_optional_triton_module_finds_none(tmp_path):
    # fla asks `find_spec("triton.experimental.gluon")` and takes ModuleNotFoundError naming
    # the missing package as "not installed"; a plain ImportError would stop its import.
    path = _write(tmp_path, textwrap.dedent("""
        from importlib.util import find_spec
        import triton

        def gluon_spec():
            try:
                return find_spec("triton.experimental.gluon")
            except ModuleNotFoundError as error:
                return error.name

        GLUON = gluon_spec()   # at import, as fla's backend registry asks
    """))
    assert load_module(path)[0].GLUON == "triton.experimental"
    # The same where the real triton's gluon is loaded in this process (find_spec answers
    # from sys.modules first): a library must not see it and then fail to import it.
    real = pytest.importorskip("triton.experimental.gluon")
    assert real is not None and load_module(path)[0].GLUON == "triton.experimental"
    import importlib.util
    assert importlib.util.find_spec("triton.experimental.gluon") is not None   # unredirected


def test_redirect_is_a_context_and_maps_submodules():
    with redirect_triton():
        import triton
        import triton.language as tl
        from triton.language.extra.cuda import libdevice
        assert triton is aotk and tl is aotk.language
        assert libdevice is aotk.language.extra.cuda.libdevice
    assert "triton.language" not in sys.modules or sys.modules["triton.language"] is not tl


def _stand_in_triton(tmp_path):
    """A package named triton beside the kernel file: what ``import triton`` finds when it is
    not redirected (the kernel file's folder comes first on sys.path while it loads)."""
    (tmp_path / "triton").mkdir()
    (tmp_path / "triton" / "__init__.py").write_text("STAND_IN = True\n")


@pytest.fixture
def forget_stand_in():
    """A real triton imported earlier in the process is set aside while the stand-in is
    used, and put back after."""
    saved = {n: m for n, m in sys.modules.items() if n.split(".")[0] == "triton"}
    for name in saved:
        del sys.modules[name]
    yield
    for name in [n for n in sys.modules if n.split(".")[0] == "triton"]:
        del sys.modules[name]
    sys.modules.update(saved)


def test_file_loaded_without_redirection_imports_the_real_triton(tmp_path, forget_stand_in):
    _stand_in_triton(tmp_path)
    path = _write(tmp_path, "import triton\nSTAND_IN = triton.STAND_IN\n")
    module, _ = load_module(path, triton_as_aotk=False)
    assert module.STAND_IN is True
    path = _write(tmp_path, "import triton\nIS_AOTK = triton.__name__ == 'aotk'\n",
                  name="redirected.py")
    assert load_module(path)[0].IS_AOTK


def test_torch_modules_imported_during_a_redirection_keep_the_real_triton(tmp_path,
                                                                           forget_stand_in):
    """A kernel library's ``import torch`` runs torch's compiler modules, which import the
    real triton's internals: only the kernel code's own imports are redirected."""
    _stand_in_triton(tmp_path)
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text(
        "import triton\nSEES_STAND_IN = getattr(triton, 'STAND_IN', False)\n")
    path = _write(tmp_path, "import torch\nimport triton\n"
                            "TORCH_SAW_STAND_IN = torch.SEES_STAND_IN\nMINE = triton.__name__\n")
    saved_torch = sys.modules.pop("torch", None)
    try:
        module, _ = load_module(path)
    finally:
        sys.modules.pop("torch", None)
        if saved_torch is not None:
            sys.modules["torch"] = saved_torch
    assert module.TORCH_SAW_STAND_IN is True and module.MINE == "aotk"


def test_a_name_aotk_lacks_in_a_from_import_is_an_import_error_naming_it(tmp_path):
    path = _write(tmp_path, "from triton.language import no_such_builtin\n")
    with pytest.raises(SourceError, match="cannot import name 'no_such_builtin' from "
                                          "'triton.language'"):
        load_module(path)


def test_heuristics_run_at_every_launch_on_named_arguments():
    seen = []

    @aotk.heuristics({"BLOCK": lambda args: seen.append(dict(args)) or
                      aotk.next_power_of_2(args["n"])})
    @aotk.jit
    def fill(out_ptr, n, value, BLOCK: aotk.language.constexpr):
        offsets = aotk.language.arange(0, BLOCK)
        aotk.language.store(out_ptr + offsets, value, mask=offsets < n)

    for n in (3, 17):
        out = np.zeros(32, np.int32)
        fill[(1,)](out, n, value=7)
        assert out.tolist() == [7] * n + [0] * (32 - n)
    assert [s["n"] for s in seen] == [3, 17] and seen[0]["value"] == 7


def test_a_heuristic_sees_the_values_of_the_ones_before_it():
    """As in Triton: the rules run in order, each on the arguments and the values the
    earlier rules set (built once a launch, so the second launch's come from its own)."""
    @aotk.heuristics({"BLOCK": lambda args: aotk.next_power_of_2(args["n"]),
                      "HALF": lambda args: args["BLOCK"] // 2})
    @aotk.jit
    def halves(out_ptr, n, BLOCK: aotk.language.constexpr, HALF: aotk.language.constexpr):
        offsets = aotk.language.arange(0, BLOCK)
        aotk.language.store(out_ptr + offsets, offsets // HALF, mask=offsets < n)

    for n, block in ((5, 8), (20, 32)):
        out = np.full(32, -1, np.int32)
        halves[(1,)](out, n)
        assert out[:n].tolist() == [i // (block // 2) for i in range(n)]


def test_autotune_rejects_a_launch_argument_its_configs_set():
    @aotk.autotune(configs=[aotk.Config({"BLOCK": 16})], key=[])
    @aotk.jit
    def fill(out_ptr, BLOCK: aotk.language.constexpr):
        aotk.language.store(out_ptr + aotk.language.arange(0, BLOCK), 1)

    with pytest.raises(TypeError, match="'BLOCK' is both given at the launch and set by"):
        fill[(1,)](np.zeros(16, np.int32), BLOCK=16)


def test_config_pre_hook_sees_the_named_arguments():
    calls = []

    @aotk.autotune(configs=[aotk.Config({"BLOCK": 8}, num_warps=2,
                                        pre_hook=lambda args: args["out_ptr"].fill(5) or
                                        calls.append(args["BLOCK"]))], key=["n"])
    @aotk.jit
    def add_one(out_ptr, n, BLOCK: aotk.language.constexpr):
        offsets = aotk.language.arange(0, BLOCK)
        mask = offsets < n
        value = aotk.language.load(out_ptr + offsets, mask=mask)
        aotk.language.store(out_ptr + offsets, value + 1, mask=mask)

    out = np.zeros(8, np.int32)
    add_one[lambda meta: (aotk.cdiv(meta["n"], meta["BLOCK"]),)](out, 8)
    assert out.tolist() == [6] * 8 and calls == [8]
    assert repr(add_one.configs[0]) == "Config(BLOCK: 8, num_warps: 2, num_stages: 3)"


MANIFEST = """
[library]
name = "tritonlib"
targets = ["sm_90"]

[[kernel]]
name = "scaled_exp"
source = "triton_kernels.py"
function = "scaled_exp"
signature = "*fp32, *fp32, i32, fp32"
grid = ["cdiv(n, BLOCK)"]

[[kernel.variant]]
when = "n % 128 == 0"
constants = { BLOCK = 128, EVEN = true }

[[kernel.variant]]
constants = { BLOCK = 128, EVEN = false }
"""


def test_aotk_build_takes_a_triton_file_as_it_is(tmp_path):
    _write(tmp_path)
    (tmp_path / "aotk.toml").write_text(MANIFEST)
    result = subprocess.run([sys.executable, "-m", "aotk", "build"], capture_output=True,
                            text=True, cwd=tmp_path, env={**os.environ, "PYTHONPATH": tree_pythonpath()})
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "build" / "libtritonlib.so").is_file()
    header = (tmp_path / "build" / "tritonlib.h").read_text()
    assert "tritonlib_scaled_exp(" in header


def test_aotk_compile_takes_a_triton_file_as_it_is(tmp_path):
    path = _write(tmp_path)
    result = subprocess.run([sys.executable, "-m", "aotk", "compile", f"{path}:scaled_exp",
                             "--signature", "*fp32, *fp32, i32, fp32", "-D", "BLOCK=64",
                             "-D", "EVEN=True", "-o", str(tmp_path / "out")],
                            capture_output=True, text=True, cwd=tmp_path,
                            env={**os.environ, "PYTHONPATH": tree_pythonpath()})
    assert result.returncode == 0, result.stderr
    ptx = next((tmp_path / "out").glob("*.ptx")).read_text()
    assert "ex2.approx" in ptx  # libdevice.exp, inlined


@pytest.mark.gpu
def test_triton_file_on_the_gpu_and_do_bench(tmp_path):
    torch = pytest.importorskip("torch")
    module, _ = load_module(_write(tmp_path))
    for n in (200, 256):
        x = torch.linspace(-2, 2, n, device="cuda")
        out = torch.zeros(n, device="cuda")
        module.scaled_exp[module.grid_of](x, out, n, 0.5)
        torch.testing.assert_close(out, torch.exp(x) * 0.5, rtol=1e-6, atol=1e-6)
    x = torch.randn(1 << 20, device="cuda")
    out = torch.empty_like(x)
    median = aotk.testing.do_bench(lambda: module.scaled_exp[module.grid_of](x, out, x.numel(), 2.0),
                                   return_mode="median")
    low, high = aotk.testing.do_bench(lambda: torch.exp(x, out=out), quantiles=[0.2, 0.8])
    assert 0 < median < 100 and 0 < low <= high < 100
