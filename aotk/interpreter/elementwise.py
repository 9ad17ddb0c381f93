"""Interpreter rules of the elementwise ops: the binary ops (``add`` ... ``max``), ``cmp``,
the unary ops (``neg`` ... ``ceil``), ``fma``, ``select``, ``cast``, ``addptr``.

In: the operand arrays (one shape, or scalars) and the op. Out: the result array, element by
element, as kir defines it: integer division and remainder round toward zero (C), shifts by
the bit width or more give 0 (or the sign for an arithmetic right shift), float min/max
return the non-NaN operand, math functions compute in float32 (float64 for fp64; the libm
functions of ``math`` in float64), ``fma`` rounds once, ``addptr`` moves by whole elements. The executor casts every result to its
exact dtype afterwards.
"""
from __future__ import annotations

import math
import statistics

import numpy as np

from . import float8
from .executor import numpy_dtype, register_op_rules


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
        return float8.encode(target.float8_format, x, rounding)
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


def _wide(function):
    """A numpy function applied in float64 (the reference the GPU's libdevice result is
    compared with); the executor rounds the result to the op's type afterwards."""
    return lambda *operands: function(*(np.asarray(x, np.float64) for x in operands))


def _pointwise(function, arity=1):
    """A Python function on every element, in float64; NaN where it has no value (a domain
    or pole error), an infinity where it overflows."""
    def safe(*values):
        try:
            return function(*values)
        except ValueError:
            return math.nan
        except OverflowError:
            return math.inf
    vectorized = np.frompyfunc(safe, arity, 1)
    return _wide(lambda *x: np.asarray(vectorized(*x), np.float64))


def _erfinv(y):
    """erf's inverse, through the normal distribution's (accurate to about 1e-16)."""
    if not -1 < y < 1:
        return math.copysign(math.inf, y) if abs(y) == 1 else math.nan
    return statistics.NormalDist().inv_cdf((y + 1) / 2) / math.sqrt(2)


def _round_half_away(x):
    whole = np.trunc(x)
    return whole + np.where(np.abs(x - whole) >= 0.5, np.sign(x), 0)


def _native(function):
    """A numpy function applied in the operands' own type (nextafter steps by their ulp)."""
    return lambda *operands: function(*operands)


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


# The math functions of aotk.semantic's MATH_FUNCTIONS (kir op ``math``), by name: numpy
# arrays of the operands' type in, an array out (the executor casts it to the result type).
MATH = {
    "erf": _pointwise(math.erf), "erfc": _pointwise(math.erfc), "erfinv": _pointwise(_erfinv),
    "tanh": _wide(np.tanh), "exp10": _wide(lambda x: np.power(10.0, x)),
    "log10": _wide(np.log10), "log1p": _wide(np.log1p), "expm1": _wide(np.expm1),
    "sinh": _wide(np.sinh), "cosh": _wide(np.cosh), "tan": _wide(np.tan),
    "asin": _wide(np.arcsin), "acos": _wide(np.arccos), "atan": _wide(np.arctan),
    "asinh": _wide(np.arcsinh), "acosh": _wide(np.arccosh), "atanh": _wide(np.arctanh),
    "cbrt": _wide(np.cbrt), "rcbrt": _wide(lambda x: 1 / np.cbrt(x)),
    "lgamma": _pointwise(math.lgamma), "tgamma": _pointwise(math.gamma),
    "round": _wide(_round_half_away), "trunc": _wide(np.trunc), "rint": _wide(np.rint),
    "nearbyint": _wide(np.rint),
    "sinpi": _wide(lambda x: np.sin(np.pi * (x - 2 * np.rint(x / 2)))),
    "cospi": _wide(lambda x: np.cos(np.pi * (x - 2 * np.rint(x / 2)))),
    "normcdf": _pointwise(lambda x: 0.5 * math.erfc(-x / math.sqrt(2))),
    "sqrt_rn": _wide(np.sqrt), "rcp_rn": _wide(lambda x: 1 / x),
    "pow": _wide(np.power), "atan2": _wide(np.arctan2), "hypot": _wide(np.hypot),
    "copysign": _wide(np.copysign), "fmod": _wide(np.fmod),
    "fdim": _wide(lambda x, y: np.where(np.isnan(x) | np.isnan(y), np.nan,
                                        np.maximum(x - y, 0))),
    "remainder": _pointwise(math.remainder, 2), "nextafter": _native(np.nextafter),
    "div_rn": _wide(np.divide), "add_rn": _wide(np.add), "sub_rn": _wide(np.subtract),
    "mul_rn": _wide(np.multiply),
    "rsqrt_rn": _wide(lambda x: 1 / np.sqrt(x)), "fast_expf": _wide(np.exp),
    "fast_logf": _wide(np.log), "fast_sinf": _wide(np.sin), "fast_cosf": _wide(np.cos),
    "fast_tanf": _wide(np.tan), "fast_exp10f": _wide(lambda x: np.power(10.0, x)),
    "fast_log2f": _wide(np.log2), "fast_log10f": _wide(np.log10),
    "fast_powf": _wide(np.power), "fast_dividef": _wide(np.divide),
    "isnan": _native(np.isnan), "isinf": _native(np.isinf), "signbit": _native(np.signbit),
    "finitef": _native(np.isfinite), "isfinited": _native(np.isfinite),
    "umulhi": _high_product(signed=False),
    "mulhi": lambda a, b: _high_product(signed=a.dtype.kind == "i")(a, b),
    "clz": _bits(lambda v, bits: bits - v.bit_length()),
    "popc": _bits(lambda v, bits: bin(v).count("1")),
    "ffs": _bits(lambda v, bits: (v & -v).bit_length()),
    "brev": lambda x: _bits(_reverse_bits)(x).astype(x.dtype),
}


def _math(ctx, op, *operands):
    return MATH[op.attrs["function"]](*operands)


register_op_rules({
    "add": lambda ctx, op, a, b: a + b,
    "sub": lambda ctx, op, a, b: a - b,
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
