"""``triton.runtime.driver``: ``driver.active``, the current CUDA GPU as Triton describes it.

In: the CUDA driver (through cuda-python). Out: ``active``, read when first asked for, with
Triton's methods that kernel libraries call: ``get_current_target()`` (backend "cuda", the
arch as an int such as 90, warp size 32), ``get_current_device()``, ``set_current_device``,
``utils.get_device_properties(device)`` (Triton's keys: max_shared_mem, max_num_regs,
multiprocessor_count, warpSize, sm_clock_rate, mem_clock_rate, mem_bus_width) and
``get_device_interface()`` (``torch.cuda``). Without a driver or a GPU, asking for ``active``
raises RuntimeError, as Triton's does; libraries that probe for a GPU catch it.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GPUTarget:
    backend: str
    arch: int
    warp_size: int


# Triton's property names -> CUdevice_attribute names.
_PROPERTIES = {
    "max_shared_mem": "CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN",
    "max_num_regs": "CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK",
    "multiprocessor_count": "CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT",
    "warpSize": "CU_DEVICE_ATTRIBUTE_WARP_SIZE",
    "sm_clock_rate": "CU_DEVICE_ATTRIBUTE_CLOCK_RATE",
    "mem_clock_rate": "CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE",
    "mem_bus_width": "CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH",
}


def _call(driver, result, what: str):
    error, *values = result if isinstance(result, tuple) else (result,)
    if error != driver.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"aotk.runtime.driver: {what} failed ({error})")
    return values[0] if len(values) == 1 else values


class _Utils:
    def __init__(self, driver):
        self._driver = driver

    def get_device_properties(self, device: int) -> dict:
        driver = self._driver
        handle = _call(driver, driver.cuDeviceGet(int(device)), "cuDeviceGet")
        attribute = driver.CUdevice_attribute
        return {name: int(_call(driver, driver.cuDeviceGetAttribute(getattr(attribute, key),
                                                                    handle),
                                f"cuDeviceGetAttribute({key})"))
                for name, key in _PROPERTIES.items()}


class CudaDriver:
    """The CUDA driver of this process, as ``triton.runtime.driver.active``."""

    def __init__(self, driver):
        self._driver = driver
        self.utils = _Utils(driver)
        self._device = 0

    def get_current_device(self) -> int:
        try:
            import torch
            return torch.cuda.current_device()
        except (ImportError, RuntimeError, AssertionError):
            return self._device

    def set_current_device(self, device: int) -> None:
        self._device = int(device)
        try:
            import torch
            torch.cuda.set_device(self._device)
        except ImportError:
            pass

    def get_current_target(self) -> GPUTarget:
        driver = self._driver
        handle = _call(driver, driver.cuDeviceGet(self.get_current_device()), "cuDeviceGet")
        attribute = driver.CUdevice_attribute
        major, minor = (int(_call(driver, driver.cuDeviceGetAttribute(getattr(
            attribute, f"CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_{part}"), handle),
            "cuDeviceGetAttribute")) for part in ("MAJOR", "MINOR"))
        return GPUTarget("cuda", major * 10 + minor, 32)

    def get_device_interface(self):
        import torch
        return torch.cuda

    def is_active(self) -> bool:
        return True


_active = None


def _load() -> CudaDriver:
    global _active
    if _active is None:
        try:
            from cuda.bindings import driver
            _call(driver, driver.cuInit(0), "cuInit")
            count = _call(driver, driver.cuDeviceGetCount(), "cuDeviceGetCount")
        except (ImportError, OSError, RuntimeError) as exc:   # no cuda-python, no libcuda
            raise RuntimeError(f"aotk.runtime.driver.active: no CUDA driver ({exc})") from None
        if count < 1:
            raise RuntimeError("aotk.runtime.driver.active: the CUDA driver sees no GPU")
        _active = CudaDriver(driver)
    return _active


def __getattr__(name: str):
    if name == "active":
        return _load()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
