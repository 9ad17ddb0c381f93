"""Tests marked ``gpu`` run only where a CUDA driver and a GPU are present.

The ``gpu`` marker itself is registered in pyproject.toml.
"""
import atexit
import ctypes
import functools
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from aotk.cli_entry import import_cli

import_cli()   # makes `aotk_cli` importable from a bare source tree too

ROOT = Path(__file__).resolve().parent.parent

# Compiles in tests go to a fresh cache, never the user's ~/.cache/aotk; it goes away after.
if "AOTK_CACHE_DIR" not in os.environ:
    os.environ["AOTK_CACHE_DIR"] = tempfile.mkdtemp(prefix="aotk-test-cache-")
    atexit.register(shutil.rmtree, os.environ["AOTK_CACHE_DIR"], ignore_errors=True)


@functools.lru_cache(maxsize=1)
def tree_pythonpath() -> str:
    """PYTHONPATH for a subprocess that runs this tree's aotk: the tree first, then the
    test process's own PYTHONPATH (where packages come from one, as on a machine whose
    wheels are unpacked beside the interpreter, the tree's builds still find them)."""
    inherited = os.environ.get("PYTHONPATH")
    return str(ROOT) + (os.pathsep + inherited if inherited else "")


def cuda_device_count() -> int:
    """The GPUs the driver shows; 0 where libcuda.so.1 does not load or cuInit fails."""
    try:
        libcuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return 0
    if libcuda.cuInit(0) != 0:
        return 0
    count = ctypes.c_int(0)
    return count.value if libcuda.cuDeviceGetCount(ctypes.byref(count)) == 0 else 0


def cuda_available() -> bool:
    """libcuda.so.1 loads, cuInit succeeds and at least one device is visible."""
    return cuda_device_count() > 0


def pytest_collection_modifyitems(config, items):
    no_gpu = pytest.mark.skip(reason="no CUDA driver or GPU on this machine")
    one_gpu = pytest.mark.skip(reason=f"needs two GPUs; this machine has {cuda_device_count()}")
    for item in items:
        if "gpu" in item.keywords and not cuda_available():
            item.add_marker(no_gpu)
        elif "two_gpus" in item.keywords and cuda_device_count() < 2:
            item.add_marker(one_gpu)


def pytest_addoption(parser):
    parser.addoption("--update-golden", action="store_true",
                     help="rewrite tests/golden/ from the code generated now (test_golden.py)")


def run_c_program(source: str, library, tmp_path) -> subprocess.CompletedProcess:
    """Compiles the C99 ``source`` against a built ``lib<name>.so`` (its header beside it),
    strictly, and runs it; returns the finished process (stdout as text)."""
    program = tmp_path / "program.c"
    program.write_text(source)
    out_dir = library.parent
    name = library.name[3:-3]
    subprocess.run(["cc", "-std=c99", "-Wall", "-Werror", str(program), "-I", str(out_dir),
                    "-L", str(out_dir), f"-l{name}", f"-Wl,-rpath,{out_dir}",
                    "-o", str(tmp_path / "program")], check=True)
    return subprocess.run([str(tmp_path / "program")], capture_output=True, text=True)

