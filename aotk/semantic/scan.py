"""Typing rules of inclusive scans along an axis with a named combine (``tl.cumsum``,
``cumprod``; kir ``scan``). Scans by a combine function (``tl.associative_scan``) are in
``combine``.

In: a block, an axis, the direction, an optional dtype. Out: a block of the same shape.
As in Triton, bfloat16 is scanned in fp32 (``reduce.widen_bfloat16``), and ``cumsum``
accumulates in ``tl.sum``'s type (narrow ints -> int32/uint32) unless ``dtype`` says
otherwise.
"""
from __future__ import annotations

from ..language.core import tensor, unwrap
from .building import emit
from .combine import scan_axis
from .elementwise import cast
from .promotion import to_tensor
from .reduce import sum_dtype, widen_bfloat16


def scan(x, axis, combine: str, reverse=False, dtype=None) -> tensor:
    x = to_tensor(x)
    if not x.type.shape:
        raise ValueError("cannot scan a scalar")
    if x.dtype.is_ptr():
        raise TypeError("cannot scan pointers")
    if dtype is not None:
        x = cast(x, unwrap(dtype))
    axis = scan_axis(x, axis)
    return emit("scan", [x], x.type, axis=axis, combine=combine, reverse=bool(unwrap(reverse)))


def cumsum(x, axis=0, reverse=False, dtype=None) -> tensor:
    x = widen_bfloat16(x)
    return scan(x, axis, "add", reverse, unwrap(dtype) or sum_dtype(x.dtype))


def cumprod(x, axis=0, reverse=False) -> tensor:
    return scan(widen_bfloat16(x), axis, "mul", reverse)
