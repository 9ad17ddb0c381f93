"""JIT launch on the GPU: ``kernel[grid](cuda_tensors...)``.

Specializes on the arguments (``launch.arguments``: like Triton's JIT), compiles through
``aotk.compiler`` with the on-disk cache (``aotk.cache``), loads the cubin once per CUDA
context and launches through cuda-python on the given or current stream.
"""
from __future__ import annotations

import ctypes
import os
import struct
import threading

from .. import cache
from ..ir import kir
from ..errors import AotkError
from ..options import CompileOptions
from .arguments import (address_of, parameter_ctypes, specialize_values,
                        torch_current_device)
from .tensor_maps import encode_tensor_maps

_lock = threading.Lock()
_modules: dict = {}      # ((context handle, id), cubin key) -> CUfunction
_launchable: dict = {}   # (kernel, (context handle, id), specialization) -> (CUfunction, metadata)
_targets: dict = {}      # device ordinal -> "sm_XY"


def _driver():
    from cuda.bindings import driver
    return driver


def _check(result, what: str):
    error, *values = result if isinstance(result, tuple) else (result,)
    driver = _driver()
    if error != driver.CUresult.CUDA_SUCCESS:
        _, name = driver.cuGetErrorName(error)
        raise AotkError(f"{what} failed: {name.decode() if isinstance(name, bytes) else name}")
    return values[0] if len(values) == 1 else values


_initialized = False


class HotDriver:
    """The driver entry points every launch calls, straight from libcuda through ctypes:
    cuda-python's wrappers build objects for each argument and result (microseconds a call,
    several calls a launch); a ctypes call costs well under one. Everything else (init,
    modules, attributes) stays on cuda-python."""

    def __init__(self, library):
        c_uint, c_void_p = ctypes.c_uint, ctypes.c_void_p
        self.get_current = library.cuCtxGetCurrent
        self.get_current.argtypes, self.get_current.restype = [ctypes.POINTER(c_void_p)], ctypes.c_int
        self.get_id = getattr(library, "cuCtxGetId", None)   # CUDA 12.0+
        if self.get_id is not None:
            self.get_id.argtypes = [c_void_p, ctypes.POINTER(ctypes.c_ulonglong)]
            self.get_id.restype = ctypes.c_int
        self.launch = library.cuLaunchKernel
        self.launch.argtypes = [c_void_p] + [c_uint] * 7 + [c_void_p] * 3
        self.launch.restype = ctypes.c_int
        self._slots = threading.local()

    @classmethod
    def load(cls):
        """The driver library cuda-python also uses, or None where ctypes cannot open it."""
        name = "nvcuda.dll" if os.name == "nt" else "libcuda.so.1"
        try:
            return cls(ctypes.CDLL(name))
        except (OSError, AttributeError):
            return None

    def context_key(self):
        """``_current_context_key``'s answer for a current context, else None."""
        slots = getattr(self._slots, "out", None)
        if slots is None:   # this thread's out-parameters, made once: not a launch's cost
            context, ident = ctypes.c_void_p(), ctypes.c_ulonglong()
            slots = self._slots.out = (context, ctypes.byref(context), ident,
                                       ctypes.byref(ident))
        context, context_ref, ident, ident_ref = slots
        if self.get_current(context_ref) or not context.value:
            return None
        if self.get_id is None:
            return context.value, 0
        if self.get_id(context, ident_ref):
            return None
        return context.value, ident.value


_hot = None   # HotDriver, once the driver is initialized (None: cuda-python only)


def _current_context_key():
    """The current context's cache key (creating device 0's primary context if none): its
    handle and, where the driver has cuCtxGetId (CUDA 12.0+), its unique id, since a
    destroyed context's handle can be reused by a new one, whose modules are not loaded."""
    global _initialized, _hot
    if _hot is not None:
        key = _hot.context_key()
        if key is not None:
            return key
    driver = _driver()
    if not _initialized:
        _check(driver.cuInit(0), "cuInit")
        _initialized = True
        _hot = HotDriver.load()
    context = _check(driver.cuCtxGetCurrent(), "cuCtxGetCurrent")
    if not int(context):
        device = _check(driver.cuDeviceGet(0), "cuDeviceGet")
        context = _check(driver.cuDevicePrimaryCtxRetain(device), "cuDevicePrimaryCtxRetain")
        _check(driver.cuCtxSetCurrent(context), "cuCtxSetCurrent")
    get_id = getattr(driver, "cuCtxGetId", None)
    return int(context), (_check(get_id(context), "cuCtxGetId") if get_id else 0)


def _target() -> str:
    driver = _driver()
    device = _check(driver.cuCtxGetDevice(), "cuCtxGetDevice")
    key = int(device)
    if key not in _targets:
        attribute = driver.CUdevice_attribute
        major = _check(driver.cuDeviceGetAttribute(
            attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device), "cuDeviceGetAttribute")
        minor = _check(driver.cuDeviceGetAttribute(
            attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device), "cuDeviceGetAttribute")
        _targets[key] = f"sm_{major}{minor}"
    return _targets[key]


def current_device() -> str:
    """The current context's GPU, as ``"NVIDIA H100 80GB HBM3 (sm_90)"`` (what an autotuning
    result is measured on)."""
    _current_context_key()
    driver = _driver()
    device = _check(driver.cuCtxGetDevice(), "cuCtxGetDevice")
    name = _check(driver.cuDeviceGetName(256, device), "cuDeviceGetName")
    name = name.split(b"\0", 1)[0].decode() if isinstance(name, bytes) else str(name)
    return f"{name} ({_target()})"


def _compiled(kernel, signature, constants, options):
    function = kernel.kir(signature, constants=constants, num_warps=options.num_warps,
                          target=options.target)
    key = cache.cache_key(kir.cache_listing(function), options.cache_key(), cache.versions())
    hit = cache.load(key)
    if hit is None:
        from ..compiler import compile
        compiled = compile(kernel, signature, constants, options=options)
        cache.store(key, compiled.cubin, compiled.metadata)
        hit = compiled.cubin, compiled.metadata
    return key, hit[0], hit[1]


_torch_raw_stream = None   # torch's C binding of its current stream, once torch is seen


def _stream_handle(stream, runtime_args):
    global _torch_raw_stream
    if stream is not None:
        return int(getattr(stream, "cuda_stream", stream))
    for value in runtime_args.values():
        if type(value).__module__.startswith("torch"):
            if _torch_raw_stream is None:
                import torch
                # What Triton uses: current_stream() builds a Stream object each call.
                _torch_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None) or \
                    (lambda device: torch.cuda.current_stream(device).cuda_stream)
            return _torch_raw_stream(torch_current_device())
    return 0   # the legacy default stream, as for any CUDA array without a stream of its own


def _load_function(kernel, context_key, signature, constants, num_warps, num_stages,
                   tma=True, maxnreg=None, fp_fusion=True, num_ctas=1):
    driver = _driver()
    options = CompileOptions(num_warps=num_warps, num_stages=num_stages, target=_target(),
                             tma=tma, maxnreg=maxnreg, enable_fp_fusion=fp_fusion,
                             num_ctas=num_ctas)
    # A ":1" parameter is folded into the code but still passed: the ABI stays fixed.
    key, cubin, metadata = _compiled(kernel, signature, constants, options)
    with _lock:
        module_key = (context_key, key)
        function = _modules.get(module_key)
        if function is None:
            module = _check(driver.cuModuleLoadData(cubin), "cuModuleLoadData")
            function = _check(driver.cuModuleGetFunction(module, metadata["name"].encode()),
                              "cuModuleGetFunction")
            if metadata.get("shared", 0) > STATIC_SHARED_LIMIT:
                # Dynamic shared memory past 48 KB needs an opt-in per function.
                attribute = driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
                _check(driver.cuFuncSetAttribute(function, attribute, metadata["shared"]),
                       "raising the shared-memory limit")
            _modules[module_key] = function
    return function, metadata


STATIC_SHARED_LIMIT = 48 * 1024

# cuLaunchKernel's ``extra`` markers (cuda.h): the buffer, its size, the end of the list.
LAUNCH_PARAM_BUFFER_POINTER, LAUNCH_PARAM_BUFFER_SIZE, LAUNCH_PARAM_END = 1, 2, 0
_STRUCT_CODES = {ctypes.c_bool: "?", ctypes.c_int8: "b", ctypes.c_int16: "h",
                 ctypes.c_int32: "i", ctypes.c_int64: "q", ctypes.c_uint8: "B",
                 ctypes.c_uint16: "H", ctypes.c_uint32: "I", ctypes.c_uint64: "Q",
                 ctypes.c_float: "f", ctypes.c_double: "d"}


class ParameterPacking:
    """A kernel's parameters as one buffer laid out as the kernel reads them: each at the
    next offset aligned to its size, which is C's struct layout (``struct``'s native
    mode), and the ``extra`` list of cuLaunchKernel that passes it."""

    def __init__(self, ctypes_list):
        self.layout = struct.Struct("@" + "".join(_STRUCT_CODES[c] for c in ctypes_list))
        self.size = ctypes.c_size_t(self.layout.size)
        self._slots = threading.local()

    def pack(self, values):
        """The ``extra`` array (void*[5]) of one launch, its buffer and the size it points
        to living as long as it. Each thread packs into one buffer of its own, made on its
        first launch: cuLaunchKernel copies the parameters before it returns, so the next
        launch may overwrite them."""
        slot = getattr(self._slots, "extra", None)
        if slot is None:
            buffer = ctypes.create_string_buffer(max(1, self.layout.size))
            slot = (ctypes.c_void_p * 5)(LAUNCH_PARAM_BUFFER_POINTER, ctypes.addressof(buffer),
                                         LAUNCH_PARAM_BUFFER_SIZE,
                                         ctypes.addressof(self.size), LAUNCH_PARAM_END)
            slot._buffer, slot._packing = buffer, self
            self._slots.extra = slot
        self.layout.pack_into(slot._buffer, 0, *values)
        return slot


_packings: dict = {}   # Signature -> ParameterPacking


def _constants_key(constants: dict):
    """The constexpr values as a key that tells 1, 1.0 and True apart (they hash alike):
    the items and their types, hashed in C; reprs where a value is unhashable."""
    key = (tuple(constants.items()), tuple(map(type, constants.values())))
    try:
        hash(key)
    except TypeError:
        return tuple(sorted((k, repr(v)) for k, v in constants.items()))
    return key


def _in_pairs(metadata, grid) -> bool:
    """Whether a launch runs its programs in clusters of two: built so (``num_ctas=2`` with
    a loop whose producers share tiles), and the grid's x even."""
    return metadata.get("cluster", 1) == 2 and grid[0] % 2 == 0


def _launch_in_pairs(function, grid, threads, shared, stream, parameters, name):
    """cuLaunchKernelEx with clusters of two along x: programs 2i and 2i + 1 share the TMA
    tiles both load (``passes.multicast``; the grid's x is even)."""
    driver = _driver()
    pairs = driver.CUlaunchAttribute()
    pairs.id = driver.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
    pairs.value.clusterDim.x, pairs.value.clusterDim.y, pairs.value.clusterDim.z = 2, 1, 1
    config = driver.CUlaunchConfig()
    config.gridDimX, config.gridDimY, config.gridDimZ = grid
    config.blockDimX, config.blockDimY, config.blockDimZ = threads, 1, 1
    config.sharedMemBytes, config.hStream = shared, stream
    config.attrs, config.numAttrs = [pairs], 1
    _check(driver.cuLaunchKernelEx(config, function, parameters, 0), f"launching {name}")


def launch_on_device(kernel, grid, runtime_args, constants, num_warps, num_stages, stream,
                     maxnreg=None, fp_fusion=True, compile_only=False, num_ctas=1):
    """Launches ``kernel``, compiling and loading it first where this context has not yet;
    ``compile_only`` (a warmup) stops before the launch."""
    # Arguments first: a CPU tensor is a ValueError naming it, with or without a GPU.
    # specialize also checks each torch tensor's device (``check_devices``'s rule).
    signature, values = specialize_values(kernel, runtime_args)
    context_key = _current_context_key()
    # The hot path: a launch seen before skips kir, hashing and the disk cache.
    fast_key = (kernel, context_key, signature, _constants_key(constants), num_warps,
                num_stages, kernel.debug, maxnreg, fp_fusion, num_ctas)
    found = _launchable.get(fast_key)
    if found is None:
        found = _load_function(kernel, context_key, signature, constants, num_warps,
                               num_stages, maxnreg=maxnreg, fp_fusion=fp_fusion,
                               num_ctas=num_ctas)
        _launchable[fast_key] = found
    function, metadata = found
    if compile_only or 0 in grid:
        return
    if values and not metadata.get("tensor_maps") and not _in_pairs(metadata, grid):
        # The parameters packed into one buffer, passed through ``extra``: one struct call
        # per launch instead of a ctypes object per argument.
        packing = _packings.get(signature)
        if packing is None:
            packing = _packings[signature] = ParameterPacking(parameter_ctypes(signature))
        extra = packing.pack(values)
        arguments = (grid[0], grid[1], grid[2], metadata.get("threads", 32 * num_warps), 1, 1,
                     metadata.get("shared", 0),
                     _stream_handle(stream, runtime_args), None, ctypes.addressof(extra))
        if _hot is None:
            _check(_driver().cuLaunchKernel(function, *arguments[:-2], 0, arguments[-1]),
                   f"launching {kernel.name}")
            return
        result = _hot.launch(int(function), *arguments)
        if result:
            _check((_driver().CUresult(result),), f"launching {kernel.name}")
        return
    # kernelParams as a void*[] built with ctypes: far cheaper than cuda-python's packing.
    holders = [ctype(value) for value, ctype in zip(values, parameter_ctypes(signature))]
    addresses = [ctypes.addressof(h) for h in holders]
    if metadata.get("tensor_maps"):
        maps = encode_tensor_maps(metadata["tensor_maps"], runtime_args, address_of)
        if maps is None:
            # Sizes a tensor map cannot describe (an empty dimension): the build without TMA.
            fast_key += ("no TMA",)
            found = _launchable.get(fast_key)
            if found is None:
                found = _load_function(kernel, context_key, signature, constants,
                                       num_warps, num_stages, tma=False, maxnreg=maxnreg,
                                       fp_fusion=fp_fusion, num_ctas=num_ctas)
                _launchable[fast_key] = found
            function, metadata = found
        else:
            holders.append(maps)
            addresses += [m.address for m in maps]
    pointers = (ctypes.c_void_p * len(addresses))(*addresses)
    # A producer warp (``passes.warp_specialize``) runs beside the num_warps compute warps.
    if _in_pairs(metadata, grid):   # the build without TMA (just above) has no pairs
        return _launch_in_pairs(function, grid, metadata["threads"], metadata.get("shared", 0),
                                _stream_handle(stream, runtime_args), ctypes.addressof(pointers),
                                kernel.name)
    _check(_driver().cuLaunchKernel(function, grid[0], grid[1], grid[2],
                                    metadata.get("threads", 32 * num_warps), 1, 1,
                                 metadata.get("shared", 0), _stream_handle(stream, runtime_args),
                                 ctypes.addressof(pointers), 0), f"launching {kernel.name}")
