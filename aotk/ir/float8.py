"""The 8-bit float formats (``tl.float8e4nv`` = OCP e4m3fn, ``tl.float8e5`` = e5m2): what
their bits mean, and the reference conversions every stage agrees with.

In: a format and a Python float (or an 8-bit code). Out: the code a conversion to the format
produces, or the value a code stands for. The interpreter (numpy tables built from
``decode``) and the GPU backend (integer LLVM IR) implement these same rules; their tests
compare against the functions here.

Rules, as Triton's conversions on sm_90 (``cvt.rn.satfinite``):
  - a value rounds to the nearest code, ties to the even code (``rtne``), or towards zero
    (``rtz``);
  - a finite value past the largest finite code, and an infinity, saturate to the largest
    finite code of its sign (``satfinite``);
  - NaN becomes the positive all-ones code 0x7F;
  - the sign of zero is kept.
A format without infinities (e4m3 "fn") gives up only its all-ones code to NaN.
"""
from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Float8Format:
    name: str            # the tl dtype's name
    exponent_bits: int
    mantissa_bits: int
    bias: int
    has_infinity: bool   # e5m2: exponent all ones is inf / NaN, as in IEEE

    @property
    def max_finite_code(self) -> int:
        """The largest finite positive code (e4m3: 0x7E = 448, e5m2: 0x7B = 57344)."""
        if self.has_infinity:
            return (((1 << self.exponent_bits) - 1) << self.mantissa_bits) - 1
        return 0x7E

    @property
    def min_normal_exponent(self) -> int:
        return 1 - self.bias


NAN_CODE = 0x7F

E4M3 = Float8Format("float8e4nv", 4, 3, 7, has_infinity=False)
E5M2 = Float8Format("float8e5", 5, 2, 15, has_infinity=True)
FORMATS = {f.name: f for f in (E4M3, E5M2)}


def is_nan_code(fmt: Float8Format, code: int) -> bool:
    magnitude = code & 0x7F
    if fmt.has_infinity:
        return magnitude > (((1 << fmt.exponent_bits) - 1) << fmt.mantissa_bits)
    return magnitude == 0x7F


def decode(fmt: Float8Format, code: int) -> float:
    """The value of an 8-bit code (exact in float32)."""
    code &= 0xFF
    sign = -1.0 if code & 0x80 else 1.0
    if is_nan_code(fmt, code):
        return math.nan
    exponent = (code >> fmt.mantissa_bits) & ((1 << fmt.exponent_bits) - 1)
    mantissa = code & ((1 << fmt.mantissa_bits) - 1)
    if fmt.has_infinity and exponent == (1 << fmt.exponent_bits) - 1:
        return sign * math.inf
    if exponent == 0:   # subnormal
        return sign * math.ldexp(mantissa, fmt.min_normal_exponent - fmt.mantissa_bits)
    return sign * math.ldexp((1 << fmt.mantissa_bits) + mantissa,
                             exponent - fmt.bias - fmt.mantissa_bits)


def encode(fmt: Float8Format, value: float, rounding: str = "rtne") -> int:
    """The code a conversion of ``value`` produces (see the module docstring)."""
    if math.isnan(value):
        return NAN_CODE
    sign = 0x80 if math.copysign(1.0, value) < 0 else 0
    magnitude = abs(value)
    largest = decode(fmt, fmt.max_finite_code)
    if magnitude >= largest:
        return sign | fmt.max_finite_code
    # Codes 0..max_finite_code are increasing in value: find the two around ``magnitude``.
    low, high = 0, fmt.max_finite_code
    while high - low > 1:
        middle = (low + high) // 2
        if decode(fmt, middle) <= magnitude:
            low = middle
        else:
            high = middle
    if decode(fmt, high) <= magnitude:
        low = high
    if decode(fmt, low) == magnitude or rounding == "rtz":
        return sign | low
    below, above = magnitude - decode(fmt, low), decode(fmt, low + 1) - magnitude
    if below < above or (below == above and low % 2 == 0):
        return sign | low
    return sign | (low + 1)
