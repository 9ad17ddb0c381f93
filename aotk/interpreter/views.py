"""Interpreter rules of the ops that move elements without computing: ``splat``,
``broadcast``, ``expand_dims``, ``permute``, ``reshape``, ``join``, ``split``.

In: the operand arrays and the op's result shape / attributes. Out: the array of the result
shape holding the moved elements.
"""
from __future__ import annotations

import numpy as np

from .executor import register_op_rules

register_op_rules({
    "splat": lambda ctx, op, x: np.broadcast_to(x, op.result.type.shape).copy(),
    "broadcast": lambda ctx, op, x: np.broadcast_to(x, op.result.type.shape).copy(),
    "expand_dims": lambda ctx, op, x: np.expand_dims(x, op.attrs["axis"]),
    "permute": lambda ctx, op, x: np.transpose(x, op.attrs["order"]).copy(),
    "reshape": lambda ctx, op, x: x.reshape(op.result.type.shape),
    "join": lambda ctx, op, a, b: np.stack([a, b], axis=-1),
    "split": lambda ctx, op, x: x[..., op.attrs["index"]].copy(),
})
