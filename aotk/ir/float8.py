"""The 8-bit float formats (``tl.float8e4nv`` = OCP e4m3fn, ``tl.float8e5`` = e5m2,
``tl.float8e4b15`` = Triton's own e4m3 with bias 15): what their bits mean, and the reference
conversions every stage agrees with.

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

``float8e4b15`` is Triton's software format for GPUs without fp8 (its
``convert_custom_float8``), and its conversions are Triton's, measured bit for bit on the
GPU (tests/test_float8.py): a code is the top byte of the float16 with the same value (both
have exponent bias 15), so it has no infinity and no NaN (0x7F is 1.875). To it:
  - a float32 is first narrowed to float16 towards zero (the GPU's ``cvt.rz``, which makes
    every NaN the positive one), a bfloat16 first widened to float32 (exactly);
  - then the float16's magnitude rounds to the nearest code, ties away from zero;
  - a magnitude past 1.75 (infinities and NaN included) gives 1.75 (0x7E), with its sign.
"""
from __future__ import annotations

import math
import struct
from dataclasses import dataclass


@dataclass(frozen=True)
class Float8Format:
    name: str            # the tl dtype's name
    exponent_bits: int
    mantissa_bits: int
    bias: int
    has_infinity: bool   # e5m2: exponent all ones is inf / NaN, as in IEEE
    has_nan: bool = True   # e4b15 has none: its all-ones code is a number
    through_fp16: bool = False   # converted to as e4b15 is (the module docstring)

    @property
    def max_finite_code(self) -> int:
        """The largest positive code a conversion gives (e4m3: 0x7E = 448, e5m2: 0x7B =
        57344, e4b15: 0x7E = 1.75, although 0x7F = 1.875 decodes)."""
        if self.has_infinity:
            return (((1 << self.exponent_bits) - 1) << self.mantissa_bits) - 1
        return 0x7E

    @property
    def min_normal_exponent(self) -> int:
        return 1 - self.bias


NAN_CODE = 0x7F

E4M3 = Float8Format("float8e4nv", 4, 3, 7, has_infinity=False)
E5M2 = Float8Format("float8e5", 5, 2, 15, has_infinity=True)
E4M3B15 = Float8Format("float8e4b15", 4, 3, 15, has_infinity=False, has_nan=False,
                       through_fp16=True)
FORMATS = {f.name: f for f in (E4M3, E5M2, E4M3B15)}


def is_nan_code(fmt: Float8Format, code: int) -> bool:
    if not fmt.has_nan:
        return False
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


def encode(fmt: Float8Format, value: float, rounding: str = "rtne",
           from_fp16: bool = False) -> int:
    """The code a conversion of ``value`` produces (see the module docstring); ``from_fp16``:
    the value is a float16 (e4b15 takes its NaN's sign)."""
    if fmt.through_fp16:
        return _encode_through_fp16(value, from_fp16)
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


E4B15_LARGEST_HALF_BITS = 0x3F00   # float16 1.75: the largest e4b15 code's value


def half_bits_toward_zero(value: float) -> int:
    """The float16 bits of a float32 ``value`` narrowed towards zero (NaN: 0x7FFF, the
    canonical NaN the GPU's ``cvt.rz.f16.f32`` gives)."""
    if math.isnan(value):
        return 0x7FFF
    sign = 0x8000 if math.copysign(1.0, value) < 0 else 0
    magnitude = abs(value)
    if magnitude >= 65504.0:   # towards zero never reaches infinity
        return sign | (0x7C00 if math.isinf(value) else 0x7BFF)
    # Codes 0..0x7BFF are increasing in value: the largest not above ``magnitude``.
    low, high = 0, 0x7BFF
    while low < high:
        middle = (low + high + 1) // 2
        if struct.unpack("<e", struct.pack("<H", middle))[0] <= magnitude:
            low = middle
        else:
            high = middle - 1
    return sign | low


def e4b15_from_half_bits(bits: int) -> int:
    """The e4b15 code of a float16 given by its bits (the module docstring's rules)."""
    magnitude = bits & 0x7FFF
    if magnitude > E4B15_LARGEST_HALF_BITS:   # 1.75 < |x|, infinities and NaN
        magnitude = E4B15_LARGEST_HALF_BITS
    return ((bits >> 8) & 0x80) | ((magnitude + 0x40) >> 7)


def _encode_through_fp16(value: float, from_fp16: bool) -> int:
    if from_fp16:
        bits = struct.unpack("<H", struct.pack("<e", value))[0]
        if math.isnan(value):
            bits = (0x8000 if math.copysign(1.0, value) < 0 else 0) | 0x7E00
    else:
        bits = half_bits_toward_zero(value)
    return e4b15_from_half_bits(bits)
