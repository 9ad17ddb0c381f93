"""What toolchain aotk would use here, and where each piece comes from.

Out: ``report()``, rows of (what, finding) for ``aotk doctor``. It never raises: a missing
piece is a row saying "not found (why)", so the doctor works on machines without a GPU,
a CUDA toolkit or a working backend.
"""
from __future__ import annotations

import ctypes
import platform


def _try(fn) -> str:
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001 - the doctor reports, it never fails
        return f"not found ({exc})"


def _llvmlite() -> str:
    import llvmlite
    import llvmlite.binding as llvm
    return f"{llvmlite.__version__} (LLVM {'.'.join(map(str, llvm.llvm_version_info))})"


def _nvptx_target() -> str:
    # Asks the backend, so the row shows what compiles will actually get.
    from ..backend.ptx import TRIPLE, target_machine
    target_machine("sm_90")
    return f"available ({TRIPLE})"


def _ptxas() -> str:
    from .ptxas import find_ptxas
    info = find_ptxas()
    return f"{info.path} ({info.origin}, {info.version})"


def _fatbinary() -> str:
    from .locate import find_tool
    tool = find_tool("fatbinary")
    return f"{tool.path} ({tool.origin})"


def _libdevice() -> str:
    from .libdevice import find_libdevice
    return find_libdevice()


def _driver_and_gpu() -> tuple[str, str]:
    try:
        libcuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return "not found (libcuda.so.1 cannot be loaded)", "none"
    status = libcuda.cuInit(0)
    if status != 0:
        return f"present, but cuInit failed (CUresult {status})", "none"
    version = ctypes.c_int(0)
    libcuda.cuDriverGetVersion(ctypes.byref(version))
    driver = f"CUDA {version.value // 1000}.{version.value % 1000 // 10}"
    count = ctypes.c_int(0)
    if libcuda.cuDeviceGetCount(ctypes.byref(count)) != 0 or count.value == 0:
        return driver, "none"
    device = ctypes.c_int(0)
    libcuda.cuDeviceGet(ctypes.byref(device), 0)
    name = ctypes.create_string_buffer(256)
    libcuda.cuDeviceGetName(name, len(name), device)
    more = f" (+{count.value - 1} more)" if count.value > 1 else ""
    return driver, name.value.decode(errors="replace") + more


def report() -> list[tuple[str, str]]:
    try:
        driver, gpu = _driver_and_gpu()
    except Exception as exc:  # noqa: BLE001 - a broken driver install is a finding too
        driver, gpu = f"unusable ({exc})", "none"
    return [
        ("python", platform.python_version()),
        ("llvmlite", _try(_llvmlite)),
        ("nvptx target", _try(_nvptx_target)),
        ("ptxas", _try(_ptxas)),
        ("fatbinary", _try(_fatbinary)),
        ("libdevice", _try(_libdevice)),
        ("cuda driver", driver),
        ("gpu", gpu),
    ]
