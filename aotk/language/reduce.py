"""The ``tl`` reductions along an axis (sum, max, min, their arg forms, xor, or, and a
reduction by a @jit combine function). Each one only unpacks its arguments and calls
``aotk.semantic`` (``semantic.reduce``)."""
from __future__ import annotations

from .. import semantic
from .core import builtin, tensor_member, unwrap


@builtin
def sum(input, axis=None, keep_dims=False, dtype=None):
    dtype = unwrap(dtype)
    if dtype is None:
        dtype = semantic.sum_dtype(input.dtype)
    return semantic.reduce(input, axis, "add", keep_dims, dtype)


def _extremum(kind, input, axis, return_indices, keep_dims):
    """tl.max / tl.min: the extremum along ``axis``, with its index if asked."""
    with_indices = bool(unwrap(return_indices))
    input = semantic.max_min_operand(input, with_indices)
    if with_indices:
        return (semantic.reduce(input, axis, kind, keep_dims),
                semantic.argreduce(input, axis, kind, keep_dims))
    return semantic.reduce(input, axis, kind, keep_dims)


@builtin
def max(input, axis=None, return_indices=False, return_indices_tie_break_left=True,
        keep_dims=False):
    return _extremum("max", input, axis, return_indices, keep_dims)


@builtin
def min(input, axis=None, return_indices=False, return_indices_tie_break_left=True,
        keep_dims=False):
    return _extremum("min", input, axis, return_indices, keep_dims)


@builtin
def argmax(input, axis, tie_break_left=True, keep_dims=False):
    return semantic.argreduce(semantic.widen_bfloat16(input), axis, "max", keep_dims)


@builtin
def argmin(input, axis, tie_break_left=True, keep_dims=False):
    return semantic.argreduce(semantic.widen_bfloat16(input), axis, "min", keep_dims)


@builtin
def xor_sum(input, axis=None, keep_dims=False):
    return semantic.reduce(input, axis, "xor", keep_dims)


@builtin
def reduce(input, axis, combine_fn, keep_dims=False):
    """Reduces ``input`` (a block or a tuple of blocks of one shape) along ``axis`` with the
    @aotk.jit function ``combine_fn`` of 2N scalars returning N."""
    return semantic.reduce_with(input, axis, combine_fn, keep_dims)


@builtin
def reduce_or(input, axis, keep_dims=False):
    """Bitwise or of the integers along ``axis``."""
    return semantic.reduce(input, axis, "or", keep_dims)


# Triton's tensor methods: x.sum(1), x.max(0), ...
for _member in (argmax, argmin, max, min, reduce, reduce_or, sum, xor_sum):
    tensor_member(_member)
