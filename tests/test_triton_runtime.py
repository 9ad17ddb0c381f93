"""``triton.runtime`` as kernel libraries use it, loaded with ``import triton`` giving aotk:
their own Autotuner subclass (Triton's constructor, a ``run`` override that finds saved
configurations first), ``kernel.run(..., grid=..., warmup=...)``, ``kernel.warmup``,
``triton.runtime.driver.active`` and ``tl.core.CONSTEXPR_0``."""
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from aotk.buildsys.sources import load_module

LIBRARY_FILE = textwrap.dedent('''
    import triton
    import triton.language as tl
    from triton.runtime import driver
    from triton.runtime.autotuner import Autotuner, Heuristics


    class SavedConfigAutotuner(Autotuner):
        """Looks a launch's key up in configurations saved beforehand, as a kernel library
        that ships tuned configurations does, then lets the Autotuner run."""
        saved = {}

        def __init__(self, fn, arg_names, configs, key, reset_to_zero, restore_value, **kw):
            super().__init__(fn, arg_names, configs, key, reset_to_zero, restore_value, **kw)
            self.looked_up = []

        def run(self, *args, **kwargs):
            named = {**dict(zip(self.arg_names, args)), **kwargs}
            key = tuple(named[k] for k in self.keys)
            self.looked_up.append(key)
            if key in self.saved:   # Triton's key: the key values, then the dtypes
                dtypes = tuple(str(v.dtype) for n, v in named.items()
                               if n in self.arg_names and hasattr(v, "dtype"))
                self.cache[key + dtypes] = self.saved[key]
            return super().run(*args, **kwargs)


    def saved_autotune(configs, key):
        def decorate(fn):
            return SavedConfigAutotuner(fn, fn.arg_names, configs, key, None, None)
        return decorate


    @saved_autotune(configs=[triton.Config({"BLOCK": 64}), triton.Config({"BLOCK": 128})],
                    key=["n"])
    @triton.jit
    def double_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offsets < n
        tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) * 2, mask=mask)


    @triton.jit
    def flag_kernel(out_ptr, FLAG: tl.constexpr = tl.core.CONSTEXPR_0):
        tl.store(out_ptr, 1 if FLAG else 2)


    def fill_kernel_with(block):
        return Heuristics(flag_kernel, flag_kernel.arg_names, {"FLAG": lambda args: block})
''')


@pytest.fixture
def library(tmp_path):
    path = tmp_path / "kernel_library.py"
    path.write_text(LIBRARY_FILE)
    return load_module(path)[0]


def _grid(n):
    return lambda meta: ((n + meta["BLOCK"] - 1) // meta["BLOCK"],)


def test_a_librarys_autotuner_subclass_runs_with_its_saved_configuration(library):
    kernel = library.double_kernel
    n = 300
    x = np.arange(n, dtype=np.float32)
    out = np.zeros(n, np.float32)
    kernel[_grid(n)](x, out, n)
    np.testing.assert_array_equal(out, 2 * x)
    # Nothing saved: the interpreter takes the first configuration.
    assert kernel.looked_up == [(n,)] and kernel.best_config.kwargs == {"BLOCK": 64}
    library.SavedConfigAutotuner.saved[(n,)] = library.triton.Config({"BLOCK": 128})
    out[:] = 0
    kernel[_grid(n)](x, out, n)
    np.testing.assert_array_equal(out, 2 * x)
    assert kernel.best_config.kwargs == {"BLOCK": 128}


def test_run_and_warmup_take_the_grid_as_triton_does(library):
    kernel = library.double_kernel.fn   # the JITFunction
    n = 100
    x = np.arange(n, dtype=np.float32)
    out = np.zeros(n, np.float32)
    assert kernel.warmup(x, out, n, grid=(1,), BLOCK=128) is None
    assert not out.any()   # compiled, not run
    kernel.run(x, out, n, grid=(1,), warmup=False, BLOCK=128)
    np.testing.assert_array_equal(out, 2 * x)
    # The autotuner's warmup compiles each configuration and runs none.
    out[:] = 0
    assert library.double_kernel.warmup(x, out, n, grid=(2,)) == [None, None]
    assert not out.any()


def test_constexpr_0_as_a_default_and_triton_heuristics_constructor(library):
    out = np.zeros(1, np.int32)
    library.flag_kernel[(1,)](out)
    assert out[0] == 2
    library.fill_kernel_with(True)[(1,)](out)
    assert out[0] == 1


def test_the_driver_without_a_gpu_is_a_runtime_error(library):
    from aotk.runtime import driver
    try:
        active = driver.active
    except RuntimeError as error:
        assert "aotk.runtime.driver.active" in str(error)
        assert library.driver is driver   # `from triton.runtime import driver`
        return
    pytest.skip(f"a GPU is present ({active.get_current_target()}): test_gpu covers it")


# A file that only says `import triton`, then asks for the platform as fla does: nothing
# before it has imported triton.runtime (a fresh interpreter), so `triton.runtime` must be
# an attribute of the package itself, as it is of Triton's.
PLATFORM_PROBE = textwrap.dedent('''
    import sys
    from aotk.buildsys.sources import load_module
    module = load_module(sys.argv[1])[0]
    print(module.platform())
''')

PLATFORM_FILE = textwrap.dedent('''
    import triton

    def platform():
        try:
            return triton.runtime.driver.active.get_current_target().backend
        except RuntimeError as error:
            return "no gpu: " + str(error)
''')


def _platform_seen_by_a_fresh_library(tmp_path):
    path = tmp_path / "probe_platform.py"
    path.write_text(PLATFORM_FILE)
    done = subprocess.run([sys.executable, "-c", PLATFORM_PROBE, str(path)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_plain_import_triton_reaches_the_runtime_driver(tmp_path):
    seen = _platform_seen_by_a_fresh_library(tmp_path)
    assert seen == "cuda" or seen.startswith("no gpu: aotk.runtime.driver.active"), seen


@pytest.mark.gpu
def test_a_library_probing_the_platform_sees_cuda_on_the_gpu(tmp_path):
    assert _platform_seen_by_a_fresh_library(tmp_path) == "cuda"


@pytest.mark.gpu
def test_the_driver_describes_the_current_gpu():
    torch = pytest.importorskip("torch")
    from aotk.runtime import driver
    target = driver.active.get_current_target()
    major, minor = torch.cuda.get_device_capability()
    assert (target.backend, target.arch, target.warp_size) == ("cuda", 10 * major + minor, 32)
    properties = driver.active.utils.get_device_properties(torch.cuda.current_device())
    assert properties["multiprocessor_count"] == \
        torch.cuda.get_device_properties(0).multi_processor_count
    assert properties["max_shared_mem"] >= 48 * 1024 and properties["warpSize"] == 32


@pytest.mark.gpu
def test_warmup_on_the_gpu_compiles_and_launches_nothing(library):
    torch = pytest.importorskip("torch")
    kernel = library.double_kernel.fn
    n = 1000
    x = torch.arange(n, dtype=torch.float32, device="cuda")
    out = torch.zeros_like(x)
    assert kernel.warmup(x, out, n, grid=(8,), BLOCK=128) is None
    torch.cuda.synchronize()
    assert not out.any()
    kernel.run(x, out, n, grid=(8,), warmup=False, BLOCK=128)
    torch.testing.assert_close(out, 2 * x)
