"""The ``tl`` scans along an axis (cumulative sum and product, a scan by a @jit combine
function). Each one only unpacks its arguments and calls ``aotk.semantic``
(``semantic.scan``)."""
from __future__ import annotations

from .. import semantic
from .core import builtin, tensor_member


@builtin
def cumsum(input, axis=0, reverse=False, dtype=None):
    return semantic.cumsum(input, axis, reverse, dtype)


@builtin
def cumprod(input, axis=0, reverse=False):
    return semantic.cumprod(input, axis, reverse)


@builtin
def associative_scan(input, axis, combine_fn, reverse=False):
    """Inclusive scan of ``input`` (a block or a tuple of blocks) along ``axis`` with the
    @aotk.jit function ``combine_fn``."""
    return semantic.associative_scan(input, axis, combine_fn, reverse)


# Triton's tensor methods: x.cumsum(0), ...
for _member in (associative_scan, cumprod, cumsum):
    tensor_member(_member)
