"""Interpreter rule of ``sort``: the bitonic network the GPU runs (``backend.sort``), stage
by stage on whole arrays, so that equal keys (0.0 and -0.0) and NaNs end where they do on
the GPU.

In: the operand array and ``descending``. Out: the array sorted along its last axis.
"""
from __future__ import annotations

import numpy as np

from .executor import register_op_rules


def _sort(ctx, op, x):
    x = np.array(x, copy=True)
    shape, n = x.shape, x.shape[-1]
    block = 2
    while block <= n:
        distance = block // 2
        while distance >= 1:
            pairs = x.reshape(shape[:-1] + (n // (2 * distance), 2, distance))
            first, second = pairs[..., 0, :], pairs[..., 1, :]
            if block == n:
                flipped = bool(op.attrs["descending"])
            else:   # runs in odd positions merge descending
                positions = np.arange(n // (2 * distance)) * 2 * distance
                flipped = ((positions & block) != 0)[:, None]
            swap = (first > second) != flipped
            x = np.stack([np.where(swap, second, first), np.where(swap, first, second)],
                         axis=-2).reshape(shape)
            distance //= 2
        block *= 2
    return x


register_op_rules({"sort": _sort})
