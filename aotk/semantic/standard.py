"""Typing rules of the functions Triton composes in ``triton.language.standard`` from core
ones: ``tl.softmax`` and ``tl.swizzle2d``. They emit no op of their own.

In: a block and an axis (``softmax``); four index values and a group size (``swizzle2d``).
Out: the composed ``tensor``s, typed by the rules they are built of.
"""
from __future__ import annotations

from ..language.core import constexpr, tensor, unwrap
from .elementwise import minimum, sub
from .math import fdiv, unary_math
from .promotion import to_tensor
from .reduce import reduce


def softmax(x, dim=None, keep_dims=False, ieee_rounding=False):
    """exp(x - max(x)) / sum(exp(x - max(x))) along ``dim`` (default 0), composed as Triton
    composes it (so with ``keep_dims=False`` the reduced values broadcast as Triton's do)."""
    x = to_tensor(x)
    axis = 0 if unwrap(dim) is None else unwrap(dim)
    shifted = sub(x, reduce(x, axis, "max", keep_dims))
    numerator = unary_math("exp", shifted)
    denominator = reduce(numerator, axis, "add", keep_dims)
    return fdiv(numerator, denominator, bool(unwrap(ieee_rounding)))


def swizzle2d(i, j, size_i, size_j, size_g):
    """(new_i, new_j): the indices of a row-major ``size_i`` x ``size_j`` matrix mapped to
    column-major order within each group of ``size_g`` rows (the grouped ordering of
    Triton's matmul tutorial). Written with the operators, so compile-time operands stay
    compile-time (with Python's rules) and tensors follow the tensor rules."""
    index = i * size_j + j
    group_size = size_g * size_j
    first_row = index // group_size * size_g
    remaining = size_i - first_row   # the last group may have fewer rows
    rows = minimum(remaining, size_g) if isinstance(remaining, tensor) or \
        isinstance(size_g, tensor) else constexpr(min(unwrap(remaining), unwrap(size_g)))
    within = index % group_size
    return first_row + within % rows, within // rows


__all__ = ["softmax", "swizzle2d"]
