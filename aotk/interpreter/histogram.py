"""Interpreter rule of ``histogram``: numpy's bincount over the elements in range.

In: the input array, the mask array when the op has one, and the number of bins (the
result's size). Out: an int32 array of counts; elements outside [0, num_bins) are not
counted, as on the GPU (``backend.histogram``).
"""
from __future__ import annotations

import numpy as np

from .executor import register_op_rules


def _histogram(ctx, op, values, mask=None):
    num_bins = op.result.type.shape[0]
    values = values.astype(np.int64)
    counted = (values >= 0) & (values < num_bins)
    if mask is not None:
        counted &= mask.astype(bool)
    return np.bincount(values[counted], minlength=num_bins).astype(np.int32)


register_op_rules({"histogram": _histogram})
