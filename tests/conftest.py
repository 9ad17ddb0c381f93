"""Tests marked ``gpu`` run only where a CUDA driver and a GPU are present."""
import ctypes
import functools

import pytest


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
