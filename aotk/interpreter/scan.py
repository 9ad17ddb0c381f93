"""Interpreter rule of ``scan`` with a named combine (add, mul); a combine region is
``combine``'s.

In: the operand array and the op (axis, combine, reverse). Out: the inclusive scan, one
element after another along the axis (from its end if reverse), in the element's own dtype.
"""
from __future__ import annotations

import numpy as np

from .executor import register_op_rules


def _scan(ctx, op, x):
    axis = op.attrs["axis"]
    accumulate = (np.add if op.attrs["combine"] == "add" else np.multiply).accumulate
    if op.attrs["reverse"]:
        return np.flip(accumulate(np.flip(x, axis), axis=axis, dtype=x.dtype), axis)
    return accumulate(x, axis=axis, dtype=x.dtype)


register_op_rules({"scan": _scan})
