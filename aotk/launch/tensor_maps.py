"""Host side of TMA for the JIT launcher: the tensor maps a kernel's recipes describe.

In: the ``tensor_maps`` recipes of a compiled kernel (``passes.tensor_maps``) and the launch's
arguments. Out: per recipe a 64-byte-aligned 128-byte ``CUtensorMap`` filled by the driver's
``cuTensorMapEncodeTiled`` (called through ctypes: cuda-python's wrapper costs more than
the launch) and kept for launches with the same arguments, or None when an argument is
outside what a tensor map can describe: the launcher then runs a build without TMA.
"""
from __future__ import annotations

import ctypes

from ..errors import AotkError
from ..passes.tensor_maps import (MAX_DIMENSION, MAX_STRIDE_BYTES, TENSOR_MAP_ALIGNMENT,
                                  TENSOR_MAP_BYTES)

SWIZZLE_128B = 3            # CUtensorMapSwizzle
L2_PROMOTION_256B = 3       # CUtensorMapL2promotion
OOB_FILL_NONE = 0           # CUtensorMapFloatOOBfill: zeros outside the tensor

_encode = None


def _encoder():
    global _encode
    if _encode is None:
        function = ctypes.CDLL("libcuda.so.1").cuTensorMapEncodeTiled
        function.restype = ctypes.c_int
        function.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint, ctypes.c_void_p,
                             ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_uint64),
                             ctypes.POINTER(ctypes.c_uint), ctypes.POINTER(ctypes.c_uint),
                             ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int]
        _encode = function
    return _encode


class TensorMap:
    """128 bytes at a 64-byte-aligned address inside a ctypes buffer it keeps alive."""

    def __init__(self):
        self._storage = ctypes.create_string_buffer(TENSOR_MAP_BYTES + TENSOR_MAP_ALIGNMENT)
        start = ctypes.addressof(self._storage)
        self.address = start + (-start) % TENSOR_MAP_ALIGNMENT


def _value(entry, arguments: dict) -> int:
    kind, content = entry
    return int(arguments[content]) if kind == "param" else int(content)


# Maps already encoded, by everything they hold: a launch that repeats its arguments (the
# common case) reuses them instead of paying ctypes and the driver again (~7 us per map).
_encoded: dict = {}
MAX_CACHED = 256


def encode_tensor_maps(recipes: list, arguments: dict, address_of) -> list | None:
    """``arguments``: parameter name -> launch argument (``address_of`` gives a device
    array's address). None when a shape or stride cannot be encoded."""
    maps = []
    for recipe in recipes:
        shape = tuple(_value(e, arguments) for e in recipe["shape"])
        stride_bytes = tuple(_value(e, arguments) * recipe["itemsize"]
                             for e in recipe["strides"])
        if not (all(1 <= n <= MAX_DIMENSION for n in shape)
                and all(1 <= n < MAX_STRIDE_BYTES for n in stride_bytes)):
            return None
        address = address_of(arguments[recipe["base"]])
        key = (recipe["data_type"], address, shape, stride_bytes, tuple(recipe["box"]))
        tensor_map = _encoded.get(key)
        if tensor_map is None:
            tensor_map = _encode_one(recipe, address, shape, stride_bytes)
            if len(_encoded) >= MAX_CACHED:
                _encoded.clear()
            _encoded[key] = tensor_map
        maps.append(tensor_map)
    return maps


def _encode_one(recipe, address, shape: tuple, stride_bytes: tuple) -> TensorMap:
    """The driver takes every list innermost dimension first; the innermost stride is the
    element itself and not passed; the box is 1 in the leading dimensions."""
    tensor_map = TensorMap()
    rank = len(shape)
    box_rows, box_columns = recipe["box"]
    box = (box_columns, box_rows) + (1,) * (rank - 2)
    result = _encoder()(
        tensor_map.address, recipe["data_type"], rank, address,
        (ctypes.c_uint64 * rank)(*reversed(shape)),
        (ctypes.c_uint64 * (rank - 1))(*reversed(stride_bytes)),
        (ctypes.c_uint * rank)(*box), (ctypes.c_uint * rank)(*[1] * rank),
        0, SWIZZLE_128B, L2_PROMOTION_256B, OOB_FILL_NONE)
    if result != 0:
        raise AotkError(f"cuTensorMapEncodeTiled failed (CUDA error {result}) for "
                        f"{recipe['base']}: shape {list(shape)}, strides {list(stride_bytes)} "
                        "bytes")
    return tensor_map
