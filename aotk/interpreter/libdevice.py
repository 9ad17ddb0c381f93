"""Reference values of libdevice's own functions for the interpreter (the rows of
aotk.semantic's LIBDEVICE_FUNCTIONS), and the numeric wrappers every math reference uses.

In: numpy arrays of the operands' types. Out: arrays the executor casts to the result type.
Directed-rounding arithmetic, conversions, bit casts and integer helpers are exact, bit for
bit the GPU's result; the special functions (Bessel, erfcx, erfcinv, normcdfinv, norms,
rcp64h) are computed in float64 or more (the Bessel functions in ``interpreter.bessel``). ``interpreter.elementwise`` merges
``LIBDEVICE_REFERENCES`` into its MATH table (the ``math`` op is an elementwise op).
"""
from __future__ import annotations

import math
import statistics
from fractions import Fraction

import numpy as np

from ..semantic.math import (DIRECTED_ROUNDINGS, LIBDEVICE_CONVERSIONS,
                                    LIBDEVICE_ROUNDINGS)
from .bessel import bessel_i, bessel_j, bessel_jn, bessel_y, bessel_yn, sign_bit_set


def wide(function):
    """A numpy function applied in float64 (the reference the GPU's libdevice result is
    compared with); the executor rounds the result to the op's type afterwards."""
    return lambda *operands: function(*(np.asarray(x, np.float64) for x in operands))


def pointwise(function, arity=1):
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
    return wide(lambda *x: np.asarray(vectorized(*x), np.float64))


def round_half_away(x):
    whole = np.trunc(x)
    return whole + np.where(np.abs(x - whole) >= 0.5, np.sign(x), 0)


def native(function):
    """A numpy function applied in the operands' own type (nextafter steps by their ulp)."""
    return lambda *operands: function(*operands)



# ---------------------------------------------------------------------------------------
# libdevice's arithmetic in a chosen rounding direction, and its conversions: exact, bit for
# bit the GPU's result. Each element is computed as an exact rational (fractions.Fraction),
# rounded to nearest, then stepped one ulp where the direction asks.
# ---------------------------------------------------------------------------------------

def _sign(value) -> int:
    """-1, 0 or 1."""
    return int(value > 0) - int(value < 0)


def _nearest(exact: Fraction, held):
    """The rational ``exact`` rounded to nearest even in the numpy float type ``held``
    (np.float32 or np.float64); an infinity where it overflows."""
    try:
        wide = float(exact)   # CPython divides integers correctly rounded, subnormals too
    except OverflowError:
        return held(math.inf if exact > 0 else -math.inf)
    if held is np.float64 or Fraction(wide) == exact:
        return held(wide)
    # A second rounding, to float32, could meet a tie that the exact value is not on:
    # rounding to float64 towards zero and setting the last bit (rounding to odd) keeps the
    # value on the exact value's side of every float32 tie.
    toward_zero = wide if abs(Fraction(wide)) < abs(exact) else math.nextafter(wide, 0.0)
    return np.float32((np.float64(toward_zero).view(np.int64) | 1).view(np.float64))


def _directed(nearest, error_sign: int, mode: str):
    """The exact value rounded in ``mode`` (rn, rz, rd, ru), from ``nearest`` (its rounding
    to nearest, or for the directed modes either float next to it) and the sign of
    (exact - nearest). One step towards the exact value's side where the direction asks,
    which also makes an overflow the largest finite value where it rounds towards zero."""
    if mode == "ru" and error_sign > 0:
        return np.nextafter(nearest, nearest.dtype.type(np.inf))
    if mode == "rd" and error_sign < 0:
        return np.nextafter(nearest, nearest.dtype.type(-np.inf))
    if mode == "rz" and nearest != 0 and error_sign != 0 and (nearest > 0) == (error_sign < 0):
        return np.nextafter(nearest, nearest.dtype.type(0))
    return nearest


def _rounded(exact: Fraction, held, mode: str):
    """The nonzero rational ``exact`` rounded to ``held`` (np.float32 / np.float64) in
    ``mode``."""
    nearest = _nearest(exact, held)
    if math.isinf(nearest):
        error_sign = -_sign(nearest)   # the exact value is finite: nearer zero
    else:
        error_sign = _sign(exact - Fraction(float(nearest)))
    return _directed(nearest, error_sign, mode)


def _exact_zero_sum(addends_negative, mode: str) -> float:
    """The zero IEEE 754 gives a sum that is exactly zero: -0 when rounding down unless
    every addend is +0, else +0 unless every addend is -0."""
    negative = any(addends_negative) if mode == "rd" else all(addends_negative)
    return -0.0 if negative else 0.0


# The rounded arithmetic, one element at a time: ``held`` (the result's numpy float type),
# the rounding ``mode`` and the operands (Python floats) in; a ``held`` scalar out.

def _add_rounded(held, mode, a, b):
    """a + b (add_rz ...)."""
    if not (math.isfinite(a) and math.isfinite(b)):
        return held(a) + held(b)    # infinities and NaN: exact
    exact = Fraction(a) + Fraction(b)
    if exact == 0:
        return held(_exact_zero_sum((sign_bit_set(a), sign_bit_set(b)), mode))
    return _rounded(exact, held, mode)


def _sub_rounded(held, mode, a, b):
    """a - b (sub_rz ...)."""
    return _add_rounded(held, mode, a, -b)


def _mul_rounded(held, mode, a, b):
    """a * b (mul_rz ...)."""
    if not (math.isfinite(a) and math.isfinite(b)) or a == 0 or b == 0:
        return held(a) * held(b)    # special or zero: exact, with IEEE's sign
    return _rounded(Fraction(a) * Fraction(b), held, mode)


def _div_rounded(held, mode, a, b):
    """a / b (div_rz ...)."""
    if not (math.isfinite(a) and math.isfinite(b)) or a == 0 or b == 0:
        return held(a) / held(b)    # special, zero or a zero divisor: exact
    return _rounded(Fraction(a) / Fraction(b), held, mode)


def _rcp_rounded(held, mode, x):
    """1 / x (rcp_rz ...)."""
    return _div_rounded(held, mode, 1.0, x)


def _sqrt_rounded(held, mode, x):
    """sqrt(x) (sqrt_rz ...)."""
    root = np.sqrt(held(x))     # rounded to nearest (IEEE); exact for zeros, inf and NaN
    if not (math.isfinite(x) and x > 0):
        return root
    # sqrt(x) - root has the sign of x - root**2, which is rational
    return _directed(root, _sign(Fraction(x) - Fraction(float(root)) ** 2), mode)


def _fma_rounded(held, mode, a, b, c):
    """a * b + c, rounded once (fma_rn, fma_rz ...)."""
    if not (math.isfinite(a) and math.isfinite(b)):
        return held(a * b + c)      # an infinite or NaN product: exact (NaN for inf * 0)
    if not math.isfinite(c):
        return held(c)
    exact = Fraction(a) * Fraction(b) + Fraction(c)
    if exact == 0:
        product_negative = sign_bit_set(a) != sign_bit_set(b)
        return held(_exact_zero_sum((product_negative, sign_bit_set(c)), mode))
    return _rounded(exact, held, mode)


def _per_element(function, mode: str, held=None):
    """``function(held, mode, *elements)`` on every element (Python floats or ints in); the
    result in ``held``, by default the first operand's float type."""
    def apply(*operands):
        result_type = held or operands[0].dtype.type
        results = np.frompyfunc(lambda *values: function(result_type, mode, *values),
                                len(operands), 1)(*operands)
        return np.asarray(results, result_type)
    return apply


def _float_narrowed(held, mode, x):
    """double2float: a float64 rounded to float32 in ``mode``."""
    if not math.isfinite(x) or x == 0:
        return held(x)
    return _rounded(Fraction(x), held, mode)


def _integer_to_float(held, mode, value):
    """int2float_rz, ll2double_ru ...: an integer rounded to the float type ``held``."""
    return held(0.0) if value == 0 else _rounded(Fraction(int(value)), held, mode)


_TO_INTEGRAL = {"rn": np.rint, "rz": np.trunc, "rd": np.floor, "ru": np.ceil}


def _nan_as_integer(source, bits: int, signed: bool) -> int:
    """What the GPU's cvt to an integer gives for NaN, measured on sm_90: 0 from fp32 to a
    32-bit integer, signed or not; otherwise (from fp64, or to 64 bits) the bits of the
    signed minimum, 1 << (bits - 1), whether the target is signed or unsigned."""
    if bits == 32 and np.dtype(source) == np.float32:
        return 0
    return -(1 << (bits - 1)) if signed else 1 << (bits - 1)


def _saturated(whole, bits: int, signed: bool, nan_value: int = 0):
    """Integral floats as the integer type of ``bits`` and signedness, as PTX's cvt to an
    integer gives them: clamped to the type's range, NaN to ``nan_value`` (held in int64 /
    uint64)."""
    held = np.int64 if signed else np.uint64
    low = -(1 << (bits - 1)) if signed else 0
    high = (1 << (bits - 1)) - 1 if signed else (1 << bits) - 1
    nan = np.isnan(whole)
    whole = np.where(nan, 0.0, whole)
    inside = (whole >= low) & (whole < float(high + 1))   # high + 1: a power of two, exact
    values = np.where(inside, whole, 0.0).astype(held)
    clamped = np.where(whole < low, held(low), np.where(inside, values, held(high)))
    return np.where(nan, held(nan_value), clamped)


def _float_to_integer(mode: str, bits: int, signed: bool):
    """float2int_rn, llrint ...: rounded to an integral value in ``mode``, then saturated."""
    integral = _TO_INTEGRAL[mode]

    def convert(x):
        x = np.asarray(x)
        return _saturated(integral(x.astype(np.float64)), bits, signed,
                          _nan_as_integer(x.dtype, bits, signed))
    return convert


def _llround(x):
    """llround: half away from zero, saturated; NaN gives the minimum (libdevice tests
    isnan first and returns LLONG_MIN, in fp32 and fp64 alike)."""
    return _saturated(round_half_away(np.asarray(x, np.float64)), 64, True, -(1 << 63))


# What a libdevice conversion (double2uint_rz ...) produces, by the name's target: a float
# type, or an integer's (bits, signed). The "uint" / "ull" results are declared signed (as
# Triton declares them), but the value saturates as unsigned.
_CONVERSION_TARGETS = {"float": np.float32, "double": np.float64, "int": (32, True),
                       "uint": (32, False), "ll": (64, True), "ull": (64, False)}


def _conversion(name: str, mode: str):
    """The interpreter rule of libdevice's conversion ``name`` in rounding ``mode``."""
    source, target = (_CONVERSION_TARGETS[part] for part in name.split("2"))
    if isinstance(target, tuple):
        return _float_to_integer(mode, *target)
    if isinstance(source, tuple):
        return _per_element(_integer_to_float, mode, target)
    return _per_element(_float_narrowed, mode, target)


def _bits_as(numpy_type):
    """The same bits read as ``numpy_type`` (of the same width)."""
    return lambda x: np.asarray(x).view(numpy_type)


def _double_word(high: bool):
    """double2hiint / double2loint: the high or low 32 bits of a float64."""
    def word(x):
        bits = np.asarray(x, np.float64).view(np.uint64)
        return ((bits >> np.uint64(32)) if high else bits).astype(np.uint32).view(np.int32)
    return word


def _hilo_to_double(high, low):
    """hiloint2double: the float64 whose high and low 32 bits are the two words."""
    word = lambda x: np.asarray(x).view(np.uint32).astype(np.uint64)    # noqa: E731
    return ((word(high) << np.uint64(32)) | word(low)).view(np.float64)


# ---------------------------------------------------------------------------------------
# libdevice's other exact functions: integer helpers, exponents, ldexp, saturate
# ---------------------------------------------------------------------------------------

def _low_word(values, like):
    """Integers (int64) wrapped to 32 bits, read as ``like``'s type (int32 or uint32)."""
    return np.asarray(values).astype(np.uint32).view(like.dtype)


def _mul24(a, b):
    """The low 32 bits of the product of the operands' low 24 bits (sign-extended for
    int32, as libdevice's __nv_mul24 does)."""
    def low24(x):
        bits = np.asarray(x).astype(np.int64) & 0xFFFFFF
        return bits - ((bits >> 23) << 24) if x.dtype.kind == "i" else bits
    return _low_word((low24(a) * low24(b)) & 0xFFFFFFFF, a)


def _halved_sum(round_up: bool):
    """hadd / rhadd: (a + b) >> 1, or (a + b + 1) >> 1, without overflow."""
    return lambda a, b: _low_word((a.astype(np.int64) + b.astype(np.int64) + round_up) >> 1, a)


def _sad(a, b, c):
    """|a - b| + c, wrapping at 32 bits (PTX sad)."""
    difference = np.abs(a.astype(np.int64) - b.astype(np.int64))
    return _low_word((difference + c.astype(np.int64)) & 0xFFFFFFFF, a)


def _byte_perm(a, b, selector):
    """PTX prmt as __nv_byte_perm calls it: byte i of the result is byte (selector's nibble
    i, low 3 bits) of the eight bytes b:a (a the low four)."""
    unsigned = lambda x: np.asarray(x).view(np.uint32).astype(np.uint64)    # noqa: E731
    word, select = (unsigned(b) << np.uint64(32)) | unsigned(a), unsigned(selector)
    result = np.zeros_like(word)
    for byte in range(4):
        source = (select >> np.uint64(4 * byte)) & np.uint64(7)
        picked = (word >> (source * np.uint64(8))) & np.uint64(0xFF)
        result |= picked << np.uint64(8 * byte)
    return result.astype(np.uint32).view(np.int32)


INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1


def _ilogb(x):
    """The unbiased binary exponent as an integer (subnormals by their leading bit); 0 and
    NaN give INT_MIN, infinities INT_MAX, as libdevice's."""
    x = np.asarray(x, np.float64)
    _, exponent = np.frexp(np.where(np.isfinite(x), x, 1.0))
    return np.where(np.isnan(x) | (x == 0), INT32_MIN,
                    np.where(np.isinf(x), INT32_MAX, exponent.astype(np.int64) - 1))


def _logb(x):
    """ilogb as a float: -inf for 0, +inf for infinities, NaN for NaN."""
    exponent = _ilogb(x).astype(np.float64)
    x = np.asarray(x, np.float64)
    return np.where(x == 0, -np.inf, np.where(np.isinf(x), np.inf,
                                              np.where(np.isnan(x), x, exponent)))


def _saturate(x):
    """saturatef: clamped to [0, 1], NaN and -0 to +0 (PTX's cvt.sat, as the GPU gives it;
    libdevice's documentation keeps -0, the hardware does not)."""
    return np.where(np.isnan(x) | (x <= 0), np.float32(0), np.minimum(x, np.float32(1)))


# ---------------------------------------------------------------------------------------
# libdevice's approximations, computed in float64 (or more) and rounded once to the result
# type: Bessel functions, erfcx, erfcinv, normcdfinv, Euclidean norms, rcp64h. Within a few
# float64 ulps of the exact value (Bessel functions: absolute near their zeros, and jn / yn
# of high orders lose more through their recurrences), well inside libdevice's own bounds
# (2 to 9 ulps in fp32); tests/test_libdevice.py measures them against mpmath.
# ---------------------------------------------------------------------------------------

def _exact_square(x: float) -> tuple:
    """(x*x rounded, its rounding error) exactly, by Dekker's product (|x| < 1e150)."""
    split = 134217729.0 * x     # 2**27 + 1: Veltkamp's split into two 26-bit halves
    high = split - (split - x)
    low = x - high
    square = x * x
    return square, ((high * high - square) + 2 * high * low) + low * low


def _erfcx(x):
    """exp(x**2) * erfc(x): the product where erfc does not underflow (x < 10), with x**2
    carried exactly into exp; the asymptotic series 1/(x sqrt(pi)) * sum (-1)^k
    (2k-1)!! / (2x^2)^k from x = 10 on."""
    if math.isnan(x):
        return x
    if x < -27:
        return math.inf     # 2 exp(x**2) overflows
    if x < 10:
        square, error = _exact_square(x)
        return math.exp(square) * (1 + error) * math.erfc(x)
    if math.isinf(x):
        return 0.0
    inverse = 1 / (2 * x * x)
    total, term, k = 1.0, 1.0, 0
    while abs(term) > 1e-18:
        k += 1
        term *= -(2 * k - 1) * inverse
        total += term
    return total / x / math.sqrt(math.pi)     # (x * sqrt(pi) would overflow first)


def _normcdfinv(p):
    """The standard normal distribution's quantile (Wichura's AS241, about 1e-16)."""
    if not 0 < p < 1:
        return -math.inf if p == 0 else math.inf if p == 1 else math.nan
    return statistics.NormalDist().inv_cdf(p)


def _erfcinv(y):
    """erfc's inverse on [0, 2]: -normcdfinv(y / 2) / sqrt(2), y / 2 taken as a quantile in
    the tail where it is small (no cancellation)."""
    if not 0 < y < 2:
        return math.inf if y == 0 else -math.inf if y == 2 else math.nan
    if y / 2 == 0:
        # Below the smallest float64 quantile: Newton's method on log erfc(x) = log y, from
        # the quantile of y itself (log erfc(x) = log erfcx(x) - x**2, whose slope is
        # -2 / (sqrt(pi) erfcx(x))).
        x = -_normcdfinv(y) / math.sqrt(2)
        for _ in range(4):
            x += (math.log(_erfcx(x)) - x * x - math.log(y)) * _erfcx(x) * math.sqrt(math.pi) / 2
        return x
    return -_normcdfinv(y / 2) / math.sqrt(2)


def _euclidean_norm(reciprocal: bool):
    """norm3d / norm4d / rhypot ... : sqrt of the sum of squares, or its reciprocal. Scaled
    by the power of two of the largest magnitude (nothing overflows or underflows on the
    way), summed and rooted in long double (a 64-bit significand on x86-64), rounded once to
    float64; an infinite component gives +inf (+0) even beside NaN, as libdevice's."""
    def norm(*components):
        magnitudes = [np.abs(np.asarray(c, np.float64)) for c in components]
        largest = np.maximum.reduce(magnitudes)
        _, exponent = np.frexp(np.where(np.isfinite(largest), largest, 1.0))
        total = sum(np.square(np.ldexp(m, -exponent).astype(np.longdouble)) for m in magnitudes)
        if reciprocal:
            value = np.ldexp((1 / np.sqrt(total)).astype(np.float64), -exponent)
        else:
            value = np.ldexp(np.sqrt(total).astype(np.float64), exponent)
        infinite = np.logical_or.reduce([np.isinf(m) for m in magnitudes])
        return np.where(infinite, 0.0 if reciprocal else np.inf, value)
    return norm


_HIGH_WORD = np.uint64(0xFFFFFFFF00000000)


def _reciprocal_of_high_word(x):
    """rcp64h (PTX rcp.approx.ftz.f64): 1/x from x's high 32 bits only, subnormals flushed
    to zero, the result's low 32 bits cleared; relative error below 2**-19 (the GPU's own
    approximation differs in those last bits)."""
    tiny = np.finfo(np.float64).tiny
    high = (np.asarray(x, np.float64).view(np.uint64) & _HIGH_WORD).view(np.float64)
    high = np.where(np.abs(high) < tiny, np.copysign(0.0, high), high)
    result = (np.asarray(1 / high).view(np.uint64) & _HIGH_WORD).view(np.float64)
    return np.where(np.abs(result) < tiny, np.copysign(0.0, result), result)


_ROUNDED_ARITHMETIC = {"add": _add_rounded, "sub": _sub_rounded, "mul": _mul_rounded,
                       "div": _div_rounded, "rcp": _rcp_rounded, "sqrt": _sqrt_rounded,
                       "fma": _fma_rounded}



# aotk.semantic's LIBDEVICE_FUNCTIONS, by name (merged into interpreter.elementwise's MATH).
LIBDEVICE_REFERENCES = {
    # aotk.semantic's LIBDEVICE_FUNCTIONS: the exact ones (bit for bit the GPU's) ...
    **{f"{name}_{mode}": _per_element(function, mode)
       for name, function in _ROUNDED_ARITHMETIC.items() for mode in DIRECTED_ROUNDINGS},
    "fma_rn": _per_element(_fma_rounded, "rn"),
    **{f"{name}_{mode}": _conversion(name, mode)
       for name in LIBDEVICE_CONVERSIONS for mode in LIBDEVICE_ROUNDINGS},
    "int2double_rn": wide(lambda x: x), "uint2double_rn": wide(lambda x: x),
    "int_as_float": _bits_as(np.float32), "float_as_int": _bits_as(np.int32),
    "uint_as_float": _bits_as(np.float32), "float_as_uint": _bits_as(np.int32),
    "longlong_as_double": _bits_as(np.float64), "double_as_longlong": _bits_as(np.int64),
    "double2loint": _double_word(high=False), "double2hiint": _double_word(high=True),
    "hiloint2double": _hilo_to_double,
    "llrint": _float_to_integer("rn", 64, signed=True),
    "llround": _llround,
    "ilogb": _ilogb, "logb": _logb,
    # ldexp is one correctly rounded scaling (libdevice's clamp of n changes no result)
    "ldexp": native(np.ldexp), "scalbn": native(np.ldexp),
    "saturatef": _saturate,
    "mul24": _mul24, "hadd": _halved_sum(round_up=False), "rhadd": _halved_sum(round_up=True),
    "sad": _sad, "byte_perm": _byte_perm,
    # ... and the approximations (within a few float64 ulps, see above)
    "rcp64h": _reciprocal_of_high_word,
    "j0": pointwise(lambda x: bessel_j(0, x)), "j1": pointwise(lambda x: bessel_j(1, x)),
    "y0": pointwise(lambda x: bessel_y(0, x)), "y1": pointwise(lambda x: bessel_y(1, x)),
    "jn": bessel_jn, "yn": bessel_yn,
    "cyl_bessel_i0": pointwise(bessel_i(0)), "cyl_bessel_i1": pointwise(bessel_i(1)),
    "erfcx": pointwise(_erfcx), "erfcinv": pointwise(_erfcinv),
    "normcdfinv": pointwise(_normcdfinv),
    "rhypot": wide(_euclidean_norm(reciprocal=True)),
    "norm3d": wide(_euclidean_norm(reciprocal=False)),
    "rnorm3d": wide(_euclidean_norm(reciprocal=True)),
    "norm4d": wide(_euclidean_norm(reciprocal=False)),
    "rnorm4d": wide(_euclidean_norm(reciprocal=True)),
}
