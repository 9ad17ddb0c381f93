"""Interpreter rule of ``gather``: numpy's take_along_axis.

In: the source and index arrays and the op's axis. Out: the gathered array, of the index's
shape. An index outside the source is wrapped into it, an element of the source as on the
GPU (``backend.gather`` clamps; both are unspecified, as in Triton).
"""
from __future__ import annotations

import numpy as np

from .executor import register_op_rules


def _gather(ctx, op, src, index):
    axis = op.attrs["axis"]
    size = src.shape[axis]
    positions = np.clip(index.astype(np.int64), 0, size - 1)
    return np.take_along_axis(src, positions, axis=axis)


register_op_rules({"gather": _gather})
