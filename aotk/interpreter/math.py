"""Interpreter rules of the math ops: ``exp`` ... ``ceil``, ``fma`` and the ``math`` op (every
``tl.math`` / libdevice function that is no core op, by name: ``MATH``).

In: the operand arrays (one shape, or scalars) and the op. Out: the result array: math
functions compute in float32 (float64 for fp64; the libm functions of ``math`` in float64),
``fma`` rounds once. The executor casts every result to its exact dtype afterwards.
libdevice's own functions are referenced from ``interpreter.libdevice`` (exact where the GPU
is exact, float64 or more elsewhere).
"""
from __future__ import annotations

import math
import statistics

import numpy as np

from .elementwise import math_operand
from .executor import register_op_rules
from .libdevice import LIBDEVICE_REFERENCES, native, pointwise, round_half_away, wide


def _unary_math(fn):
    def rule(ctx, op, x):
        return fn(math_operand(x, op.result.element))
    return rule


def _fma(ctx, op, a, b, c):
    element = op.result.element
    wide = np.float64 if element.bits <= 32 else np.longdouble
    return a.astype(wide) * b.astype(wide) + c.astype(wide)


def _erfinv(y):
    """erf's inverse, through the normal distribution's (accurate to about 1e-16)."""
    if not -1 < y < 1:
        return math.copysign(math.inf, y) if abs(y) == 1 else math.nan
    return statistics.NormalDist().inv_cdf((y + 1) / 2) / math.sqrt(2)


def _high_product(signed: bool):
    """The high half of the 2N-bit product; umulhi reads its operands as unsigned."""
    def high(a, b):
        bits = a.dtype.itemsize * 8
        as_int = (lambda v: int(v)) if signed else (lambda v: int(v) & ((1 << bits) - 1))
        product = np.frompyfunc(lambda x, y: (as_int(x) * as_int(y)) >> bits, 2, 1)(a, b)
        mask = (1 << bits) - 1
        return np.asarray(np.frompyfunc(lambda v: v & mask, 1, 1)(product), np.uint64) \
            .astype(a.dtype.str.replace("i", "u")).view(a.dtype)
    return high


def _bits(function):
    """A function of an integer's bits (as unsigned of its width) on every element."""
    def apply(x):
        bits = x.dtype.itemsize * 8
        values = np.frompyfunc(lambda v: function(int(v) & ((1 << bits) - 1), bits), 1, 1)(x)
        return np.asarray(values, np.int64)
    return apply


def _reverse_bits(value, bits):
    reversed_value = int(format(value, f"0{bits}b")[::-1], 2)
    return reversed_value - (1 << bits) if reversed_value >> (bits - 1) else reversed_value


# The math functions of aotk.semantic's ALL_MATH_FUNCTIONS (kir op ``math``), by name: numpy
# arrays of the operands' types in, an array out (the executor casts it to the result type).
MATH = {
    "erf": pointwise(math.erf), "erfc": pointwise(math.erfc), "erfinv": pointwise(_erfinv),
    "tanh": wide(np.tanh), "exp10": wide(lambda x: np.power(10.0, x)), "exp": wide(np.exp),
    "log10": wide(np.log10), "log1p": wide(np.log1p), "expm1": wide(np.expm1),
    "sinh": wide(np.sinh), "cosh": wide(np.cosh), "tan": wide(np.tan),
    "asin": wide(np.arcsin), "acos": wide(np.arccos), "atan": wide(np.arctan),
    "asinh": wide(np.arcsinh), "acosh": wide(np.arccosh), "atanh": wide(np.arctanh),
    "cbrt": wide(np.cbrt), "rcbrt": wide(lambda x: 1 / np.cbrt(x)),
    "lgamma": pointwise(math.lgamma), "tgamma": pointwise(math.gamma),
    "round": wide(round_half_away), "trunc": wide(np.trunc), "rint": wide(np.rint),
    "nearbyint": wide(np.rint),
    "sinpi": wide(lambda x: np.sin(np.pi * (x - 2 * np.rint(x / 2)))),
    "cospi": wide(lambda x: np.cos(np.pi * (x - 2 * np.rint(x / 2)))),
    "normcdf": pointwise(lambda x: 0.5 * math.erfc(-x / math.sqrt(2))),
    "sqrt_rn": wide(np.sqrt), "rcp_rn": wide(lambda x: 1 / x),
    "pow": wide(np.power), "atan2": wide(np.arctan2), "hypot": wide(np.hypot),
    "copysign": wide(np.copysign), "fmod": wide(np.fmod),
    "fdim": wide(lambda x, y: np.where(np.isnan(x) | np.isnan(y), np.nan,
                                        np.maximum(x - y, 0))),
    "remainder": pointwise(math.remainder, 2), "nextafter": native(np.nextafter),
    "div_rn": wide(np.divide), "add_rn": wide(np.add), "sub_rn": wide(np.subtract),
    "mul_rn": wide(np.multiply),
    "rsqrt_rn": wide(lambda x: 1 / np.sqrt(x)), "fast_expf": wide(np.exp),
    "fast_logf": wide(np.log), "fast_sinf": wide(np.sin), "fast_cosf": wide(np.cos),
    "fast_tanf": wide(np.tan), "fast_exp10f": wide(lambda x: np.power(10.0, x)),
    "fast_log2f": wide(np.log2), "fast_log10f": wide(np.log10),
    "fast_powf": wide(np.power), "fast_dividef": wide(np.divide),
    "isnan": native(np.isnan), "isinf": native(np.isinf), "signbit": native(np.signbit),
    "finitef": native(np.isfinite), "isfinited": native(np.isfinite),
    "umulhi": _high_product(signed=False),
    "mulhi": lambda a, b: _high_product(signed=a.dtype.kind == "i")(a, b),
    "clz": _bits(lambda v, bits: bits - v.bit_length()),
    "popc": _bits(lambda v, bits: bin(v).count("1")),
    "ffs": _bits(lambda v, bits: (v & -v).bit_length()),
    "brev": lambda x: _bits(_reverse_bits)(x).astype(x.dtype),
    **LIBDEVICE_REFERENCES,
}


def _math(ctx, op, *operands):
    return MATH[op.attrs["function"]](*operands)


register_op_rules({
    "exp": _unary_math(np.exp), "exp2": _unary_math(np.exp2), "log": _unary_math(np.log),
    "log2": _unary_math(np.log2), "sqrt": _unary_math(np.sqrt),
    "rsqrt": _unary_math(lambda x: 1 / np.sqrt(x)), "sin": _unary_math(np.sin),
    "cos": _unary_math(np.cos), "floor": _unary_math(np.floor), "ceil": _unary_math(np.ceil),
    "fma": _fma,
    "math": _math,
})
