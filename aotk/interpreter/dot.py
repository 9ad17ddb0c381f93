"""Interpreter rule of ``dot``: ``acc + a @ b``.

In: the operand arrays a [.., M, K], b [.., K, N], acc [.., M, N] and the op's precision.
Out: the sum computed wide (float64, int64 for integers) before the executor casts it to the
result type; fp32 inputs with precision tf32 drop the low 13 mantissa bits first, as a tensor
core reads them, and tf32x3 adds the big*big, big*small and small*big products of their tf32
parts.
"""
from __future__ import annotations

import numpy as np

from .executor import register_op_rules


def _tf32(x):
    """fp32 as a tensor core reads it for tf32: the low 13 mantissa bits ignored."""
    bits = np.asarray(x, np.float32).view(np.uint32) & np.uint32(0xFFFFE000)
    return bits.view(np.float32)


def _dot(ctx, op, a, b, acc):
    precision = op.attrs.get("precision")
    if precision == "tf32":
        a, b = _tf32(a), _tf32(b)
    elif precision == "tf32x3":
        # big + small parts, the small*small product dropped, as the GPU computes it
        a_big, b_big = _tf32(a), _tf32(b)
        a_small, b_small = _tf32(a - a_big), _tf32(b - b_big)
        wide = np.float64
        product = (np.matmul(a_big.astype(wide), b_big.astype(wide)) +
                   np.matmul(a_big.astype(wide), b_small.astype(wide)) +
                   np.matmul(a_small.astype(wide), b_big.astype(wide)))
        return acc.astype(wide) + product
    wide = np.int64 if op.result.element.is_int() else np.float64
    return acc.astype(wide) + np.matmul(a.astype(wide), b.astype(wide))


register_op_rules({"dot": _dot})
