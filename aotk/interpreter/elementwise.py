"""Interpreter rules of the elementwise ops: the binary ops (``add`` ... ``max``), ``cmp``,
the unary ops (``neg`` ... ``ceil``), ``fma``, ``select``, ``cast``, ``addptr``.

In: the operand arrays (one shape, or scalars) and the op. Out: the result array, element by
element, as kir defines it: integer division and remainder round toward zero (C), shifts by
the bit width or more give 0 (or the sign for an arithmetic right shift), float min/max
return the non-NaN operand, math functions compute in float32 (float64 for fp64; the libm
functions of ``math`` in float64), ``fma`` rounds once, ``addptr`` moves by whole elements. The executor casts every result to its
exact dtype afterwards. libdevice's own functions are referenced from
``interpreter.libdevice`` (exact where the GPU is exact, float64 or more elsewhere).
"""
from __future__ import annotations

import math
import statistics

import numpy as np

from . import float8
from .executor import numpy_dtype, register_op_rules
from .libdevice import LIBDEVICE_REFERENCES, native, pointwise, round_half_away, wide


def _math_operand(x, element):
    return x.astype(np.float64 if element.is_fp64() else np.float32)


def _unary_math(fn):
    def rule(ctx, op, x):
        return fn(_math_operand(x, op.result.element))
    return rule


def _c_divide(ctx, op, a, b):
    zero = b == 0
    safe = np.where(zero, 1, b)
    quotient = a // safe
    if op.result.element.is_int_signed():
        # numpy floors; C truncates: step back toward zero when signs differ and it is inexact.
        inexact = (a - quotient * safe) != 0
        quotient = np.where(inexact & ((a < 0) != (safe < 0)), quotient + 1, quotient).astype(a.dtype)
    result = quotient if op.opcode == "idiv" else a - quotient * safe
    return np.where(zero, 0, result)


def _shift(ctx, op, a, b):
    element = op.result.element
    amount = b.astype(np.uint64)
    too_far = amount >= element.bits
    clamped = np.where(too_far, 0, amount).astype(a.dtype)
    if op.opcode == "shl":
        return np.where(too_far, 0, np.left_shift(a, clamped))
    if element.is_int_signed():
        return np.right_shift(a, np.where(too_far, element.bits - 1, amount).astype(a.dtype))
    return np.where(too_far, 0, np.right_shift(a, clamped))


def _min_max(ctx, op, a, b):
    """Floats: the non-NaN operand where one is NaN (fmin / fmax), or NaN with
    ``propagate_nan`` (minimum / maximum, which propagate it)."""
    propagate = not op.result.element.is_floating() or op.attrs.get("propagate_nan")
    if op.opcode == "min":
        return np.minimum(a, b) if propagate else np.fmin(a, b)
    return np.maximum(a, b) if propagate else np.fmax(a, b)


def _compare(ctx, op, a, b):
    return {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
            "gt": np.greater, "ge": np.greater_equal}[op.attrs["predicate"]](a, b)


def _cast(ctx, op, x):
    source, target = op.operands[0].element, op.result.element
    if op.attrs.get("bitcast"):
        if source.is_ptr() or target.is_ptr():
            return x
        if source.is_bf16():
            x = (np.asarray(x, np.float32).view(np.uint32) >> 16).astype(np.uint16)
        if target.is_bf16():
            return (x.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
        return x.view(numpy_dtype(target)) if x.ndim else x.reshape(1).view(numpy_dtype(target))[0]
    rounding = op.attrs.get("rounding", "rtne")
    if source.is_fp8():
        x = float8.decode(source.float8_format, x)
    if target.is_fp8():
        return float8.encode(target.float8_format, x, rounding, from_fp16=source.is_fp16())
    if rounding == "rtz":
        return _round_toward_zero(x, target)
    if target.is_bool():
        return x != 0
    if source.is_floating() and target.is_int():
        return np.trunc(x).astype(np.int64 if target.bits < 64 or target.is_int_signed()
                                  else np.uint64)
    return x


def _round_toward_zero(x, target):
    """A float narrowed to ``target`` rounding towards zero: the nearest value, stepped once
    towards zero where it is farther from zero than ``x`` (overflow gives the largest)."""
    x = np.asarray(x, np.float64)
    if target.is_bf16():
        truncated = (np.asarray(x, np.float32).view(np.uint32) & 0xFFFF0000).view(np.float32)
        return np.where(np.isnan(x), np.float32(np.nan), truncated)
    held = numpy_dtype(target)
    nearest = x.astype(held)
    farther = np.abs(nearest.astype(np.float64)) > np.abs(x)
    return np.where(farther, np.nextafter(nearest, held(0)), nearest)


def _fma(ctx, op, a, b, c):
    element = op.result.element
    wide = np.float64 if element.bits <= 32 else np.longdouble
    return a.astype(wide) * b.astype(wide) + c.astype(wide)


def _addptr(ctx, op, pointer, offset):
    size = np.uint64(op.result.element.element_ty.itemsize)
    return pointer + offset.astype(np.int64).astype(np.uint64) * size


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


def _one_bit_or(arithmetic):
    """``arithmetic`` on numbers; on booleans the 1-bit wrapping add / sub of the GPU's i1
    (a xor), where numpy's bool + would be an or and its bool - an error."""
    def rule(ctx, op, a, b):
        if a.dtype == np.bool_:
            return a ^ b
        return arithmetic(a, b)
    return rule


register_op_rules({
    "add": _one_bit_or(np.add),
    "sub": _one_bit_or(np.subtract),
    "mul": lambda ctx, op, a, b: a * b,
    "fdiv": lambda ctx, op, a, b: a / b,
    "idiv": _c_divide, "irem": _c_divide,
    "frem": lambda ctx, op, a, b: np.fmod(_math_operand(a, op.result.element),
                                          _math_operand(b, op.result.element)),
    "and": lambda ctx, op, a, b: a & b,
    "or": lambda ctx, op, a, b: a | b,
    "xor": lambda ctx, op, a, b: a ^ b,
    "shl": _shift, "shr": _shift,
    "min": _min_max, "max": _min_max,
    "cmp": _compare,
    "neg": lambda ctx, op, x: np.negative(x) if not x.dtype == np.bool_ else x,
    "not": lambda ctx, op, x: np.invert(x),
    "abs": lambda ctx, op, x: np.abs(x),
    "exp": _unary_math(np.exp), "exp2": _unary_math(np.exp2), "log": _unary_math(np.log),
    "log2": _unary_math(np.log2), "sqrt": _unary_math(np.sqrt),
    "rsqrt": _unary_math(lambda x: 1 / np.sqrt(x)), "sin": _unary_math(np.sin),
    "cos": _unary_math(np.cos), "floor": _unary_math(np.floor), "ceil": _unary_math(np.ceil),
    "fma": _fma,
    "math": _math,
    "select": lambda ctx, op, c, a, b: np.where(c, a, b),
    "cast": _cast,
    "addptr": _addptr,
})
