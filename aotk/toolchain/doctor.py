"""What toolchain aotk would use here, and where each piece comes from. Never raises."""
from __future__ import annotations

import ctypes
import platform


def _try(fn):
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001 - the doctor reports, it never fails
        return f"not found ({exc})"


def _driver() -> tuple[str, str]:
    try:
        libcuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return "not found (libcuda.so.1 cannot be loaded)", "none"
    if libcuda.cuInit(0) != 0:
        return "present, but cuInit failed", "none"
    version = ctypes.c_int(0)
    libcuda.cuDriverGetVersion(ctypes.byref(version))
    driver = f"CUDA {version.value // 1000}.{version.value % 1000 // 10}"
    count = ctypes.c_int(0)
    if libcuda.cuDeviceGetCount(ctypes.byref(count)) != 0 or count.value == 0:
        return driver, "none"
    device = ctypes.c_int(0)
    libcuda.cuDeviceGet(ctypes.byref(device), 0)
    name = ctypes.create_string_buffer(256)
    libcuda.cuDeviceGetName(name, 256, device)
    return driver, name.value.decode()


def report() -> list[tuple[str, str]]:
    from ..backend.ptx import llvm_version, target_machine
    from .libdevice import find_libdevice
    from .locate import find_tool
    from .ptxas import find_ptxas
    import llvmlite

    def ptxas_row():
        info = find_ptxas()
        return f"{info.path} ({info.origin}, {info.version})"

    def fatbinary_row():
        tool = find_tool("fatbinary")
        return f"{tool.path} ({tool.origin})"

    driver, gpu = _driver()
    return [
        ("python", platform.python_version()),
        ("llvmlite", f"{llvmlite.__version__} (LLVM {llvm_version()})"),
        ("nvptx target", _try(lambda: target_machine("sm_90") and "available")),
        ("ptxas", _try(ptxas_row)),
        ("fatbinary", _try(fatbinary_row)),
        ("libdevice", _try(find_libdevice)),
        ("cuda driver", driver),
        ("gpu", gpu),
    ]
