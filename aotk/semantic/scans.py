"""Typing rules of inclusive scans along an axis (``cumsum``, ``cumprod``).

In: a block, an axis, the direction, an optional dtype. Out: a block of the same shape.
``cumsum`` accumulates in ``tl.sum``'s type (narrow ints -> int32/uint32) unless ``dtype``
says otherwise, as in Triton.
"""
from __future__ import annotations

from ..language.core import tensor
from .base import _emit, _value, cast, to_tensor
from .combine import scan_axis
from .reductions import sum_dtype


def scan(x, axis, combine: str, reverse=False, dtype=None) -> tensor:
    x = to_tensor(x)
    if not x.type.shape:
        raise ValueError("cannot scan a scalar")
    if x.dtype.is_ptr():
        raise TypeError("cannot scan pointers")
    if dtype is not None:
        x = cast(x, _value(dtype))
    axis = scan_axis(x, axis)
    return _emit("scan", [x], x.type, axis=axis, combine=combine, reverse=bool(_value(reverse)))


def cumsum(x, axis=0, reverse=False, dtype=None) -> tensor:
    x = to_tensor(x)
    return scan(x, axis, "add", reverse, _value(dtype) or sum_dtype(x.dtype))


def cumprod(x, axis=0, reverse=False) -> tensor:
    return scan(x, axis, "mul", reverse)
