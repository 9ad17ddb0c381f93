"""``tl.standard``: the functions Triton builds in ``triton.language.standard`` from the
core ones, and the compile-time helpers real kernels import from there (``_log2``,
``_is_power_of_two``)."""
from .core import constexpr, unwrap
from .functions import (bitonic_merge, cdiv, flip, interleave, ravel, sigmoid, softmax, sort,
                        swizzle2d, topk, zeros, zeros_like)
from .reduce import argmax, argmin, max, min, reduce_or, sum, xor_sum
from .scan import cumprod, cumsum
from .missing import module_getattr


def _log2(i):
    """floor(log2(i)) of a compile-time integer."""
    n, log2 = int(unwrap(i)), 0
    while n > 1:
        n >>= 1
        log2 += 1
    return constexpr(log2)


def _is_power_of_two(i):
    n = int(unwrap(i))
    return constexpr(n != 0 and n & (n - 1) == 0)


__getattr__ = module_getattr(__name__, "tl.standard")

__all__ = ["argmax", "argmin", "bitonic_merge", "cdiv", "cumprod", "cumsum", "flip", "interleave", "max", "min",
           "ravel", "reduce_or", "sigmoid", "softmax", "sort", "sum", "swizzle2d", "topk",
           "xor_sum", "zeros", "zeros_like"]
