"""Interpreter rules of ``reduce`` and ``argreduce`` with a named combine (add, max, min,
xor, or; argmax / argmin); a combine region is ``combine``'s.

In: the operand array and the op (axis, combine). Out: the array without ``axis``: the sum
(wrapping in the element's own dtype), xor, or, or max / min (on floats ignoring NaN, as
``tl.maximum`` / ``tl.minimum``); for ``argreduce`` the i32 index of the first max / min.
"""
from __future__ import annotations

import numpy as np

from .executor import register_op_rules


def _reduce(ctx, op, x):
    axis, combine = op.attrs["axis"], op.attrs["combine"]
    if combine == "add" and x.dtype == np.bool_:
        # 1-bit wrapping sums (the GPU's i1 add); numpy's bool add would be an or
        return np.bitwise_xor.reduce(x, axis=axis)
    if combine == "add":
        return np.add.reduce(x, axis=axis, dtype=x.dtype)
    if combine == "xor":
        return np.bitwise_xor.reduce(x, axis=axis)
    if combine == "or":
        return np.bitwise_or.reduce(x, axis=axis)
    if x.dtype.kind == "f":   # NaN-ignoring, as tl.maximum / tl.minimum
        return (np.fmax if combine == "max" else np.fmin).reduce(x, axis=axis)
    return (np.max if combine == "max" else np.min)(x, axis=axis)


def _argreduce(ctx, op, x):
    # argmax/argmin return the first (smallest) index among ties, as tie_break_left asks.
    if x.dtype.kind == "f":
        filler = -np.inf if op.attrs["combine"] == "max" else np.inf
        x = np.where(np.isnan(x), filler, x)
    pick = np.argmax if op.attrs["combine"] == "max" else np.argmin
    return pick(x, axis=op.attrs["axis"]).astype(np.int32)


register_op_rules({"reduce": _reduce, "argreduce": _argreduce})
