"""The references and inputs tests/test_libdevice.py checks libdevice against, written
independently of the interpreter: exact rational arithmetic rounded by a quantum-and-remainder
rule (directed rounding, conversions), struct packing (bit casts), Python integers (integer
helpers), mpmath (approximations, imported only where a test needs it); and the operands
each group runs on (special values, edges of each format, random ones)."""
from __future__ import annotations

import math
import struct
from fractions import Fraction

import numpy as np
import pytest

from aotk import semantic

N = 512                     # elements per exact group

# ---------------------------------------------------------------------------------------
# Inputs
# ---------------------------------------------------------------------------------------

def special_floats(dtype) -> list:
    info = np.finfo(dtype)
    return [0.0, -0.0, math.inf, -math.inf, math.nan, 1.0, -1.0, 0.5, float(info.max),
            -float(info.max), float(info.tiny), float(info.smallest_subnormal),
            -float(info.smallest_subnormal), 3.0, -1 / 3]


def _random_floats(rng, dtype, size, full_range: bool) -> np.ndarray:
    """Random finite floats: every exponent (random bit patterns, subnormals included), or
    magnitudes in [1/16, 16) where sums and products round in interesting ways."""
    if full_range:
        bits, finite = (np.uint32, 0x7F800000) if dtype == np.float32 else \
            (np.uint64, 0x7FF0000000000000)
        values = rng.integers(0, finite, size, dtype=bits).view(dtype)
    else:
        values = (rng.uniform(1, 2, size) * 2.0 ** rng.integers(-4, 4, size)).astype(dtype)
    return np.where(rng.random(size) < 0.5, -values, values).astype(dtype)


def _edge_floats(dtype, position: int) -> list:
    """Operands built to round on a tie or cancel, by operand position: a product
    (1 + 2**-(p//2)) (1 + 2**-(p - p//2)) = 1 + ... + 2**-p exactly half an ulp off a float
    of p bits, which an fma addend of +-2**-(2p + 12) tips either way; exact cancellation
    (1.5 - 1.5); products far into the subnormals and far beyond the largest float."""
    bits = 24 if dtype == np.float32 else 53
    tip = 2.0 ** -(2 * bits + 12)
    return [[1 + 2.0 ** -(bits // 2), 1 + 2.0 ** -(bits // 2), 1.5, 2.0 ** -(bits * 3),
             2.0 ** (bits * 3), 1e-30, 1.0, 1.0],
            [1 + 2.0 ** -(bits - bits // 2), 1 + 2.0 ** -(bits - bits // 2), -1.5,
             2.0 ** -(bits * 3), 2.0 ** (bits * 3), -1e-30, 1.0, 1.0],
            [tip, -tip, 0.0, 0.0, 1.0, -0.0, -1.0, 1.0]][position]


def float_operands(rng, dtype, arity: int) -> list:
    """``arity`` arrays of N floats: every pair of special values first, then edge cases,
    then random values of every exponent and of nearby exponents."""
    specials = special_floats(dtype)
    count = len(specials)
    first = [np.array(specials * count, dtype), np.array(np.repeat(specials, count), dtype)]
    columns = []
    for position in range(arity):
        head = first[position] if position < 2 else \
            np.array([specials[(k * 7 + position) % count] for k in range(count * count)], dtype)
        edge = np.array(_edge_floats(dtype, position), dtype)
        rest = N - head.size - edge.size
        random = np.concatenate([_random_floats(rng, dtype, rest // 2, True),
                                 _random_floats(rng, dtype, rest - rest // 2, False)])
        columns.append(np.concatenate([head, edge, random]).astype(dtype))
    # exact cancellations: b = -a in a stretch of the random part
    if arity >= 2:
        columns[1][-40:] = -columns[0][-40:]
    return columns


def integer_operands(rng, dtype, arity: int, size=N) -> list:
    info = np.iinfo(dtype)
    edges = np.array([0, 1, info.max, info.min, info.max - 1, 2, 3], dtype=dtype)
    if info.min < 0:
        edges = np.concatenate([edges, np.array([-1, -2, info.min + 1], dtype)])
    return [np.concatenate([np.roll(edges, k),
                            rng.integers(info.min, info.max, size - edges.size, dtype=dtype,
                                         endpoint=True)]) for k in range(arity)]


def conversion_floats(rng, dtype) -> np.ndarray:
    """Floats for conversions to integers and to the narrower float: specials, halves (ties
    of rn), values around every integer type's limits, random values of every exponent."""
    limits = [2.0 ** 31, 2.0 ** 32, 2.0 ** 63, 2.0 ** 64]
    around = []
    for limit in limits:
        for value in (limit, -limit):
            stored = dtype(value)
            around += [float(stored), float(np.nextafter(stored, dtype(0))),
                       float(np.nextafter(stored, dtype(np.inf) * np.sign(stored)))]
    halves = [k / 2 for k in range(-9, 10)] + [k + 0.25 for k in range(-3, 3)]
    head = np.array(special_floats(dtype) + around + halves, dtype)
    return np.concatenate([head, _random_floats(rng, dtype, (N - head.size) // 2, True),
                           _random_floats(rng, dtype, N - head.size - (N - head.size) // 2,
                                          False) * dtype(1e9)]).astype(dtype)


def conversion_integers(rng, dtype) -> np.ndarray:
    """Integers for conversions to floats: limits, values a hair off float32 / float64
    ties (2**24 + 1, 2**53 + 1 ...), random ones of every size."""
    info = np.iinfo(dtype)
    ties = [2 ** 24 + 1, 2 ** 24 + 3, 2 ** 25 + 2, 2 ** 53 + 1, 2 ** 53 + 3, 2 ** 62 + 2 ** 9]
    edges = [0, 1, 2, info.max, info.min, info.max - 1] + [t for t in ties if t <= info.max]
    if info.min < 0:
        edges += [-t for t in ties if -t >= info.min] + [-1]
    head = np.array(edges, dtype)
    widths = rng.integers(0, info.bits, N - head.size)
    random = rng.integers(0, 2 ** 62, N - head.size, dtype=np.uint64) >> (62 - np.minimum(
        widths, 62)).astype(np.uint64)
    random = random.astype(dtype)
    if info.min < 0:
        random = np.where(rng.random(random.size) < 0.5, -random, random).astype(dtype)
    return np.concatenate([head, random])


# ---------------------------------------------------------------------------------------
# Exact references: rational arithmetic rounded by quantum and remainder
# ---------------------------------------------------------------------------------------

FORMATS = {np.float32: (24, -126, 127), np.float64: (53, -1022, 1023)}


def round_exact(value: Fraction, dtype, mode: str) -> float:
    """A nonzero rational rounded to float32 / float64 in mode (rn, rz, rd, ru): the
    value's quantum (ulp) from its exponent, the whole number of quanta and the remainder,
    then IEEE's overflow rule for the direction."""
    precision, min_exponent, max_exponent = FORMATS[dtype]
    negative, magnitude = value < 0, abs(value)
    exponent = magnitude.numerator.bit_length() - magnitude.denominator.bit_length()
    if Fraction(2) ** exponent > magnitude:
        exponent -= 1
    quantum = Fraction(2) ** (max(exponent, min_exponent) - precision + 1)
    whole, remainder = divmod(magnitude, quantum)
    if remainder:
        up = {"rn": remainder > quantum / 2 or (remainder == quantum / 2 and whole % 2 == 1),
              "rz": False, "rd": negative, "ru": not negative}[mode]
        whole += up
    result = whole * quantum
    largest = (2 - Fraction(2) ** (1 - precision)) * Fraction(2) ** max_exponent
    if result > largest:
        to_infinity = {"rn": True, "rz": False, "rd": negative, "ru": not negative}[mode]
        result = math.inf if to_infinity else largest
    result = float(result)
    return -result if negative else result


def _ieee(expression, *values):
    """An IEEE operation on special values (infinities, NaN, zeros), whose result is exact:
    computed in float64 by numpy."""
    with np.errstate(all="ignore"):
        return float(expression(*(np.float64(v) for v in values)))


def _zero_sum(a_negative, b_negative, mode):
    if a_negative == b_negative:
        return -0.0 if a_negative else 0.0     # x + x keeps x's sign, zeros too
    return -0.0 if mode == "rd" else 0.0


def reference_rounded(dtype):
    """The reference of the add/sub/mul/div/rcp/sqrt/fma_<mode> family in ``dtype``."""
    def reference(name, *values):
        operation, mode = name.rsplit("_", 1)
        if operation == "rcp":
            operation, values = "div", (1.0,) + values
        if operation == "sub":
            operation, values = "add", (values[0], -values[1])
        finite = all(math.isfinite(v) for v in values)
        if operation == "add":
            a, b = values
            if not finite:
                return _ieee(np.add, a, b)
            exact = Fraction(a) + Fraction(b)
            if exact == 0:
                return _zero_sum(math.copysign(1, a) < 0, math.copysign(1, b) < 0, mode)
        elif operation == "mul":
            a, b = values
            if not finite or a == 0 or b == 0:
                return _ieee(np.multiply, a, b)
            exact = Fraction(a) * Fraction(b)
        elif operation == "div":
            a, b = values
            if not finite or a == 0 or b == 0:
                return _ieee(np.divide, a, b)
            exact = Fraction(a) / Fraction(b)
        elif operation == "sqrt":
            (x,) = values
            if not math.isfinite(x) or x <= 0:
                return _ieee(np.sqrt, x)
            return round_sqrt(Fraction(x), dtype, mode)
        else:   # fma
            a, b, c = values
            if not (math.isfinite(a) and math.isfinite(b)):
                return _ieee(lambda x, y, z: x * y + z, a, b, c)
            if not math.isfinite(c):
                return c
            exact = Fraction(a) * Fraction(b) + Fraction(c)
            if exact == 0:
                product_negative = (math.copysign(1, a) < 0) != (math.copysign(1, b) < 0)
                if a == 0 or b == 0:
                    return _zero_sum(product_negative, math.copysign(1, c) < 0, mode)
                return -0.0 if mode == "rd" else 0.0
        return round_exact(exact, dtype, mode)
    return reference


def round_sqrt(x: Fraction, dtype, mode) -> float:
    """sqrt(x) rounded: the integer square root of x scaled by 4**s (s making the root
    carry 8 bits more than the format), with half a unit added where it is inexact (no
    rounding boundary lies within one unit then)."""
    precision = FORMATS[dtype][0]
    scale = 0
    while math.isqrt(int(x * 4 ** scale)) < 2 ** (precision + 8) or \
            (x * 4 ** scale).denominator != 1:
        scale += 1
    scaled = int(x * 4 ** scale)
    root = math.isqrt(scaled)
    value = Fraction(root) if root * root == scaled else root + Fraction(1, 2)
    return round_exact(value / 2 ** scale, dtype, mode)


_INTEGER_RANGES = {"int": (32, True), "uint": (32, False), "ll": (64, True), "ull": (64, False)}


def reference_conversion(name, x):
    """double2int_rz ...: PTX's conversions: to integers rounded in the mode, saturated,
    NaN to 0 or the type's minimum; to floats rounded from the exact value."""
    stem, mode = name.rsplit("_", 1)
    source, target = stem.split("2")
    if target in _INTEGER_RANGES:
        bits, signed = _INTEGER_RANGES[target]
        low, high = (-2 ** (bits - 1), 2 ** (bits - 1) - 1) if signed else (0, 2 ** bits - 1)
        if math.isnan(x):   # measured on sm_90: 0 only from fp32 to 32 bits, else 1 << 31 / 63
            return 0 if bits == 32 and source == "float" else 2 ** (bits - 1)
        if math.isinf(x):
            return high if x > 0 else low
        exact = Fraction(x)
        whole = {"rn": round(exact), "rz": math.trunc(exact), "rd": math.floor(exact),
                 "ru": math.ceil(exact)}[mode]    # round(): half to even
        return min(max(whole, low), high)
    dtype = np.float32 if target == "float" else np.float64
    if isinstance(x, float) and (not math.isfinite(x) or x == 0):
        return x
    return 0.0 if x == 0 else round_exact(Fraction(x), dtype, mode)


_PACK = {"fp32": "<f", "fp64": "<d", "i32": "<i", "u32": "<I", "i64": "<q"}


def reference_bit_cast(name, *values):
    """The same bits through struct: int_as_float ..., double2loint / hiint (the low /
    high word of the little-endian float64), hiloint2double (high, low)."""
    if name == "hiloint2double":
        high, low = values
        return struct.unpack("<d", struct.pack("<Ii", low & 0xFFFFFFFF, high))[0]
    operand, result = semantic.LIBDEVICE_BIT_CASTS[name]
    packed = struct.pack(_PACK[operand], values[0])
    if name == "double2loint":
        return struct.unpack("<i", packed[:4])[0]
    if name == "double2hiint":
        return struct.unpack("<i", packed[4:])[0]
    return struct.unpack(_PACK[result], packed)[0]


def wrap_integer(value: int, bits: int, signed: bool) -> int:
    """``value`` modulo 2**bits, read as signed or unsigned."""
    value &= (1 << bits) - 1
    return value - (1 << bits) if signed and value >> (bits - 1) else value


def reference_integer(signed: bool):
    """mul24, hadd, rhadd, sad, byte_perm on Python integers."""
    def reference(name, *values):
        if name == "mul24":
            low = [v & 0xFFFFFF for v in values]
            if signed:
                low = [v - (1 << 24) if v >> 23 else v for v in low]
            return wrap_integer(low[0] * low[1], 32, signed)
        if name in ("hadd", "rhadd"):
            return (values[0] + values[1] + (name == "rhadd")) // 2
        if name == "sad":
            return wrap_integer(abs(values[0] - values[1]) + values[2], 32, signed)
        a, b, selector = (v & 0xFFFFFFFF for v in values)     # byte_perm
        eight_bytes = a | b << 32
        picked = [(eight_bytes >> (8 * ((selector >> (4 * i)) & 7))) & 0xFF for i in range(4)]
        return wrap_integer(sum(byte << (8 * i) for i, byte in enumerate(picked)), 32, True)
    return reference


INT32_MIN, INT32_MAX = -2 ** 31, 2 ** 31 - 1


def reference_exponent(dtype):
    """llrint, llround, ilogb, logb, ldexp / scalbn, saturatef in ``dtype``."""
    def reference(name, x, *exponent):
        if name in ("ldexp", "scalbn"):
            if not math.isfinite(x) or x == 0:
                return x
            n = max(min(exponent[0], 10_000), -10_000)    # beyond: overflow / zero anyway
            return round_exact(Fraction(x) * Fraction(2) ** n, dtype, "rn")
        if name in ("llrint", "llround"):
            if math.isnan(x):   # cvt from fp64 or to 64 bits, and llroundf's own test
                return -2 ** 63
            if math.isinf(x):
                return 2 ** 63 - 1 if x > 0 else -2 ** 63
            exact = Fraction(x)
            whole = round(exact) if name == "llrint" else \
                int(math.copysign(math.floor(abs(exact) + Fraction(1, 2)), x))
            return min(max(whole, -2 ** 63), 2 ** 63 - 1)
        if name == "saturatef":
            return 0.0 if math.isnan(x) or x <= 0 else min(x, 1.0)   # -0 too: cvt.sat
        if math.isnan(x) or x == 0:
            return INT32_MIN if name == "ilogb" else x if math.isnan(x) else -math.inf
        if math.isinf(x):
            return INT32_MAX if name == "ilogb" else math.inf
        exponent = math.frexp(x)[1] - 1
        return exponent if name == "ilogb" else float(exponent)
    return reference


# ---------------------------------------------------------------------------------------
# Approximations: references by mpmath (imported only by the tests that need it)
# ---------------------------------------------------------------------------------------

def mpmath_module():
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.prec = 160
    return mpmath


def reference_special(name, *values):
    """Special functions at 160 bits, with libdevice's special values."""
    mp = mpmath_module()
    if name in ("jn", "yn"):
        order, x = values
    else:
        order, x = {"j0": 0, "j1": 1, "y0": 0, "y1": 1}.get(name, 0), values[0]
    if name in ("rhypot", "norm3d", "rnorm3d", "norm4d", "rnorm4d"):
        if any(math.isinf(v) for v in values):
            return 0.0 if name.startswith("r") else math.inf
        if any(math.isnan(v) for v in values):
            return math.nan
        norm = mp.sqrt(sum(mp.mpf(v) ** 2 for v in values))
        if name.startswith("r"):
            return math.inf if norm == 0 else float(1 / norm)
        return float(norm)
    if math.isnan(x) or (name[0] in "jy" and order < 0):
        return math.nan
    if name in ("j0", "j1", "jn"):
        return 0.0 if math.isinf(x) else float(mp.besselj(order, x))
    if name in ("y0", "y1", "yn"):
        if x < 0:
            return math.nan
        return -math.inf if x == 0 else 0.0 if math.isinf(x) else float(mp.bessely(order, x))
    if name.startswith("cyl_bessel_i"):
        return float(mp.besseli(int(name[-1]), x)) if math.isfinite(x) else \
            math.copysign(math.inf, x) if name[-1] == "1" else math.inf
    if name == "exp":
        return 0.0 if x == -math.inf else math.inf if x == math.inf else float(mp.exp(x))
    if name == "erfcx":
        if x > 1e6:     # mpmath's erfc gives up there: the asymptotic series' first terms
            return float((1 - 1 / (2 * mp.mpf(x) ** 2)) / (x * mp.sqrt(mp.pi)))
        return 0.0 if x == math.inf else math.inf if x == -math.inf else \
            float(mp.exp(mp.mpf(x) ** 2) * mp.erfc(x))
    if name in ("erfcinv", "normcdfinv"):
        # erfcinv(y) = erfinv(1 - y), normcdfinv(p) = -sqrt(2) erfcinv(2 p), with the bits
        # that 1 - y needs for a tiny y
        y = x if name == "erfcinv" else 2 * x
        if not 0 < y < 2:
            limit = math.inf if y == 0 else -math.inf if y == 2 else math.nan
            return limit if name == "erfcinv" else -limit
        with mp.workprec(160 + max(0, -math.frexp(y)[1])):
            inverse = mp.erfinv(1 - mp.mpf(y))
            return float(inverse if name == "erfcinv" else -mp.sqrt(2) * inverse)
    raise AssertionError(name)


def reference_bessel_order(dtype):
    """jn / yn in ``dtype``: libdevice's jn is NaN for orders >= 2 at 0 and at |x| up to the
    smallest normal, where its backward recurrence's 2k / x overflows (inf / inf at the
    end); J_n is 0 there. __nv_yn (fp64) returns -(2 / pi) / x below 1e-308: +inf at -0."""
    tiny = float(np.finfo(dtype).tiny)

    def reference(name, order, x):
        if name == "jn" and order >= 2 and abs(x) <= tiny:
            return math.nan
        if name == "yn" and dtype == np.float64 and order >= 2 and 0 <= x < 1e-308:
            return -2 / math.pi / x if x else math.copysign(math.inf, -x)   # __nv_yn's shortcut
        return reference_special(name, order, x)
    return reference
