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


def _targets() -> str:
    from ..options import SUPPORTED_TARGETS
    from .ptxas import unbuildable_targets
    missing = unbuildable_targets(SUPPORTED_TARGETS)
    buildable = [t for t in SUPPORTED_TARGETS if t not in missing]
    return ", ".join(buildable) + (f"; not by this ptxas: {', '.join(missing)}" if missing
                                   else " (this ptxas builds them all)")


def runnable(targets, major: int, minor: int) -> str:
    """What a GPU of compute capability ``major.minor`` runs of each target's code: a cubin
    of its own major version and a minor no newer (sm_90a only on 9.0 itself), and the PTX
    of any target up to its capability (the driver compiles it on first load)."""
    from ..targets import capability
    own = major * 10 + minor
    cubins = [t for t in targets if capability(t) // 10 == major and capability(t) <= own]
    if own == 90 and "sm_90" in cubins:
        cubins.append("sm_90a")
    ptx = [t for t in targets if capability(t) <= own]
    if not ptx:
        return f"sm_{own}: none of the targets (the oldest, {targets[0]}, is newer)"
    return (f"sm_{own}: cubins for {', '.join(cubins) or 'none'}; PTX of "
            f"{', '.join(ptx)} through the driver's JIT compiler")


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
    major, minor = ctypes.c_int(0), ctypes.c_int(0)
    # CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR / _MINOR
    libcuda.cuDeviceGetAttribute(ctypes.byref(major), 75, device)
    libcuda.cuDeviceGetAttribute(ctypes.byref(minor), 76, device)
    if major.value:
        from ..options import SUPPORTED_TARGETS
        more += f"; runs {runnable(list(SUPPORTED_TARGETS), major.value, minor.value)}"
    return driver, name.value.decode(errors="replace") + more


def fit(ptxas_version: tuple, driver_version: tuple | None) -> str:
    """Whether code from this ptxas (and aotk's PTX ISA 8.0) loads on this driver.

    A driver loads cubins from a toolkit of its own major version or older (CUDA's minor
    version compatibility) and JIT-compiles PTX of an ISA it knows; PTX ISA 8.0 needs 12.0.
    """
    if not ptxas_version:
        return "unknown: ptxas version not recognized"
    if driver_version is None:
        return "no driver here: libraries build, and report 'no CUDA driver' when called"
    if driver_version < (12, 0):
        return (f"no: the driver (CUDA {driver_version[0]}.{driver_version[1]}) predates PTX ISA "
                "8.0; update the driver")
    if ptxas_version[0] > driver_version[0]:
        return (f"no: cubins from ptxas {ptxas_version[0]}.{ptxas_version[1]} need a CUDA "
                f"{ptxas_version[0]} driver; set AOTK_PTXAS to a ptxas of CUDA "
                f"{driver_version[0]} or update the driver")
    return (f"yes: ptxas {ptxas_version[0]}.{ptxas_version[1]} cubins load on the CUDA "
            f"{driver_version[0]}.{driver_version[1]} driver")


def _driver_version():
    try:
        libcuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None
    version = ctypes.c_int(0)
    if libcuda.cuDriverGetVersion(ctypes.byref(version)) != 0:
        return None
    return (version.value // 1000, version.value % 1000 // 10)


def _fit() -> str:
    from .ptxas import ptxas_version
    return fit(ptxas_version(), _driver_version())


def report() -> list[tuple[str, str]]:
    try:
        driver, gpu = _driver_and_gpu()
    except Exception as exc:  # noqa: BLE001 - a broken driver install is a finding too
        driver, gpu = f"unusable ({exc})", "none"
    return [
        ("python", platform.python_version()),
        ("llvmlite", _try(_llvmlite)),
        ("nvptx target", _try(_nvptx_target)),
        ("targets", _try(_targets)),
        ("ptxas", _try(_ptxas)),
        ("fatbinary", _try(_fatbinary)),
        ("libdevice", _try(_libdevice)),
        ("cuda driver", driver),
        ("gpu", gpu),
        ("fit together", _try(_fit)),
    ]
