"""Tests marked ``gpu`` run only where a CUDA driver and a GPU are present."""
import ctypes
import functools
import importlib.util
import pathlib
import sys

import pytest

# The CLI folder `cli/` installs as the package `aotk_cli`; from a bare source tree
# (PYTHONPATH=., as on the GPU machine) map it here so the CLI tests still import it.
if importlib.util.find_spec("aotk_cli") is None:
    _cli = pathlib.Path(__file__).resolve().parent.parent / "cli" / "__init__.py"
    _spec = importlib.util.spec_from_file_location("aotk_cli", _cli,
                                                   submodule_search_locations=[str(_cli.parent)])
    sys.modules["aotk_cli"] = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(sys.modules["aotk_cli"])


@functools.lru_cache(maxsize=1)
def cuda_available() -> bool:
    try:
        libcuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    if libcuda.cuInit(0) != 0:
        return False
    count = ctypes.c_int(0)
    return libcuda.cuDeviceGetCount(ctypes.byref(count)) == 0 and count.value > 0


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA GPU and driver")


def pytest_collection_modifyitems(config, items):
    if cuda_available():
        return
    skip = pytest.mark.skip(reason="no CUDA driver or GPU on this machine")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
