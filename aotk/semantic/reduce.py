"""Typing rules of reductions along an axis with a named combine: ``tl.sum``, ``max``,
``min``, ``xor_sum``, ``reduce_or`` (kir ``reduce``) and ``argmax`` / ``argmin`` (kir ``argreduce``).
Reductions by a combine function (``tl.reduce``) are in ``combine``.

In: a block, an axis (or None for all), options. Out: the reduced ``tensor``, of Triton's
result type: ``tl.sum`` of narrow integers accumulates in 32 bits (``sum_dtype``), ``tl.max``
/ ``tl.min`` widen narrow operands (``max_min_operand``).
"""
from __future__ import annotations

from ..ir import types as T
from ..ir.types import BlockType, DType
from ..language.core import tensor, unwrap
from .building import emit
from .elementwise import cast
from .promotion import to_tensor
from .views import expand_dims


def normalize_axis(x: tensor, axis) -> int:
    """``axis`` as an index into ``x``'s shape (negative counts from the end)."""
    rank = len(x.type.shape)
    axis = int(unwrap(axis))
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


def widen_bfloat16(x: tensor) -> tensor:
    """bfloat16 as fp32: Triton's max, min, argmax, argmin, cumsum and cumprod take bfloat16
    operands this way (so their results are fp32), as the hardware lacks bfloat16 compares."""
    x = to_tensor(x)
    return cast(x, T.float32) if x.dtype.is_bf16() else x


def max_min_operand(x, with_indices: bool) -> tensor:
    """Triton's operand for ``tl.max`` / ``tl.min``: bfloat16 widened to fp32; without
    indices, every type narrower than 32 bits too (floats to fp32, integers to int32), so
    that the result has that type."""
    x = widen_bfloat16(x)
    if with_indices or x.dtype.is_ptr() or x.dtype.bits >= 32:
        return x
    return cast(x, T.float32 if x.dtype.is_floating() else T.int32)


def reduce(x, axis, combine: str, keep_dims=False, dtype=None) -> tensor:
    """Reduces ``x`` along ``axis`` (None: every axis) with add/max/min/xor."""
    x = to_tensor(x)
    if not x.type.shape:
        raise ValueError("cannot reduce a scalar")
    if dtype is not None:
        x = cast(x, unwrap(dtype))
    if combine in ("xor", "or") and not x.dtype.is_int():
        raise TypeError(f"{'xor_sum' if combine == 'xor' else 'reduce_or'} needs integers, "
                        f"got {x.dtype}")
    if x.dtype.is_ptr():
        raise TypeError("cannot reduce pointers")
    axis = unwrap(axis)
    if axis is None:
        rank = len(x.type.shape)
        for a in reversed(range(rank)):
            x = emit("reduce", [x], x.type.with_shape(x.type.shape[:a] + x.type.shape[a + 1:]),
                     axis=a, combine=combine)
        return keep_reduced_dims(x, list(range(rank)), keep_dims)
    axis = normalize_axis(x, axis)
    shape = x.type.shape[:axis] + x.type.shape[axis + 1:]
    result = emit("reduce", [x], x.type.with_shape(shape), axis=axis, combine=combine)
    return keep_reduced_dims(result, [axis], keep_dims)


def argreduce(x, axis, combine: str, keep_dims=False) -> tensor:
    x = to_tensor(x)
    if not x.type.shape:
        raise ValueError("cannot reduce a scalar")
    if unwrap(axis) is None:
        if len(x.type.shape) != 1:
            raise ValueError("argmax/argmin with axis=None need a 1-d block; pass an axis")
        axis = 0
    axis = normalize_axis(x, axis)
    shape = x.type.shape[:axis] + x.type.shape[axis + 1:]
    result = emit("argreduce", [x], BlockType(T.int32, shape), axis=axis, combine=combine)
    return keep_reduced_dims(result, [axis], keep_dims)


def keep_reduced_dims(x: tensor, axes: list, keep_dims) -> tensor:
    """With ``keep_dims``, the reduced ``axes`` back in ``x``'s shape with size 1."""
    if not unwrap(keep_dims):
        return x
    for axis in sorted(axes):
        x = expand_dims(x, axis)
    return x
