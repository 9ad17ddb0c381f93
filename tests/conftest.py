"""Tests marked ``gpu`` run only where a CUDA driver and a GPU are present.

The ``gpu`` marker itself is registered in pyproject.toml.
"""
import atexit
import ctypes
import functools
import os
import shutil
import tempfile

import pytest

from aotk.cli_entry import import_cli

import_cli()   # makes `aotk_cli` importable from a bare source tree too

# Compiles in tests go to a fresh cache, never the user's ~/.cache/aotk; it goes away after.
if "AOTK_CACHE_DIR" not in os.environ:
    os.environ["AOTK_CACHE_DIR"] = tempfile.mkdtemp(prefix="aotk-test-cache-")
    atexit.register(shutil.rmtree, os.environ["AOTK_CACHE_DIR"], ignore_errors=True)


@functools.lru_cache(maxsize=1)
def cuda_available() -> bool:
    """libcuda.so.1 loads, cuInit succeeds and at least one device is visible."""
    try:
        libcuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    if libcuda.cuInit(0) != 0:
        return False
    count = ctypes.c_int(0)
    return libcuda.cuDeviceGetCount(ctypes.byref(count)) == 0 and count.value > 0


def pytest_collection_modifyitems(config, items):
    if cuda_available():
        return
    skip = pytest.mark.skip(reason="no CUDA driver or GPU on this machine")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def pytest_addoption(parser):
    parser.addoption("--update-golden", action="store_true",
                     help="rewrite tests/golden/ from the code generated now (test_golden.py)")
