"""Typing rules of reductions along an axis (``sum``, ``max``, ``argmax``, ...).

In: a block, an axis (or None for all), options. Out: the reduced ``tensor``.
"""
from __future__ import annotations

from ..ir import types as T
from ..ir.types import BlockType, DType
from ..language.core import tensor
from .base import (_emit, _is_ptr, _value, broadcast_shapes, broadcast_to_shape, cast, constant,
                   expand_dims, to_tensor, validate_block_shape)

# ---------------------------------------------------------------------------------------
# Reductions
# ---------------------------------------------------------------------------------------

def _normalize_axis(x: tensor, axis) -> int:
    rank = len(x.type.shape)
    axis = int(_value(axis))
    if not -rank <= axis < rank:
        raise ValueError(f"axis {axis} is out of range for a {rank}-d block")
    return axis + rank if axis < 0 else axis


def sum_dtype(dtype: DType) -> DType:
    """tl.sum's accumulator: narrow signed ints -> int32, narrow unsigned/bool -> uint32."""
    if dtype.is_bool() or (dtype.is_int_unsigned() and dtype.bits < 32):
        return T.uint32
    if dtype.is_int_signed() and dtype.bits < 32:
        return T.int32
    return dtype


def reduce(x, axis, combine: str, keep_dims=False, dtype=None) -> tensor:
    """Reduces ``x`` along ``axis`` (None: every axis) with add/max/min/xor."""
    x = to_tensor(x)
    if not x.type.shape:
        raise ValueError("cannot reduce a scalar")
    if dtype is not None:
        x = cast(x, _value(dtype))
    if combine == "xor" and not x.dtype.is_int():
        raise TypeError(f"xor_sum needs integers, got {x.dtype}")
    if x.dtype.is_ptr():
        raise TypeError("cannot reduce pointers")
    axis = _value(axis)
    if axis is None:
        rank = len(x.type.shape)
        for a in reversed(range(rank)):
            x = _emit("reduce", [x], x.type.with_shape(x.type.shape[:a] + x.type.shape[a + 1:]),
                      axis=a, combine=combine)
        return _keep(x, list(range(rank)), keep_dims)
    axis = _normalize_axis(x, axis)
    shape = x.type.shape[:axis] + x.type.shape[axis + 1:]
    result = _emit("reduce", [x], x.type.with_shape(shape), axis=axis, combine=combine)
    return _keep(result, [axis], keep_dims)


def argreduce(x, axis, combine: str, keep_dims=False) -> tensor:
    x = to_tensor(x)
    if not x.type.shape:
        raise ValueError("cannot reduce a scalar")
    if _value(axis) is None:
        if len(x.type.shape) != 1:
            raise ValueError("argmax/argmin with axis=None need a 1-d block; pass an axis")
        axis = 0
    axis = _normalize_axis(x, axis)
    shape = x.type.shape[:axis] + x.type.shape[axis + 1:]
    result = _emit("argreduce", [x], BlockType(T.int32, shape), axis=axis, combine=combine)
    return _keep(result, [axis], keep_dims)


def _keep(x: tensor, axes: list, keep_dims) -> tensor:
    if not _value(keep_dims):
        return x
    for axis in sorted(axes):
        x = expand_dims(x, axis)
    return x


