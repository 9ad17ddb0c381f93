"""8-bit float conversions in LLVM IR: an fp8 value lives in an ``i8`` register as its code.

In: an ``i8`` code (or an ``f32``) and a ``Float8Format``. Out: the ``f32`` it stands for
(exact), or the ``i8`` code of an ``f32`` rounded as ``aotk.ir.float8`` says (round to
nearest even or towards zero, saturate to the largest finite code, NaN to 0x7F), or of
float8e4b15 the code of an ``f16`` (its own rules, in the f16's bits). Plain
integer and float instructions only, so the same code runs on every target; the interpreter
implements the same rules with tables and the tests hold the two together.
"""
from __future__ import annotations

import llvmlite.ir as ir

from ..ir.float8 import E4B15_LARGEST_HALF_BITS, NAN_CODE, Float8Format
from .llvm_types import I8, I32, declare_function

F32 = ir.FloatType()


def _i32(value: int) -> ir.Constant:
    return ir.Constant(I32, value)


def decode_to_f32(builder: ir.IRBuilder, fmt: Float8Format, code: ir.Value) -> ir.Value:
    """The f32 value of an i8 code."""
    b, m = builder, fmt.mantissa_bits
    c = b.zext(code, I32)
    sign = b.shl(b.and_(c, _i32(0x80)), _i32(24))
    exponent = b.and_(b.lshr(c, _i32(m)), _i32((1 << fmt.exponent_bits) - 1))
    mantissa = b.and_(c, _i32((1 << m) - 1))
    normal = b.or_(b.shl(b.add(exponent, _i32(127 - fmt.bias)), _i32(23)),
                   b.shl(mantissa, _i32(23 - m)))
    # Subnormal: mantissa * 2^(1 - bias - m), exact in f32.
    scale = ir.Constant(F32, 2.0 ** (fmt.min_normal_exponent - m))
    subnormal = b.bitcast(b.fmul(b.uitofp(mantissa, F32), scale), I32)
    magnitude = b.select(b.icmp_unsigned("==", exponent, _i32(0)), subnormal, normal)
    all_ones = (1 << fmt.exponent_bits) - 1
    if fmt.has_infinity:
        special = b.icmp_unsigned("==", exponent, _i32(all_ones))
        nan_or_inf = b.or_(_i32(0x7F800000), b.shl(mantissa, _i32(23 - m)))
        magnitude = b.select(special, nan_or_inf, magnitude)
    elif fmt.has_nan:
        is_nan = b.icmp_unsigned("==", b.and_(c, _i32(0x7F)), _i32(0x7F))
        magnitude = b.select(is_nan, _i32(0x7FC00000), magnitude)
    return b.bitcast(b.or_(magnitude, sign), F32)


def encode_from_half(builder: ir.IRBuilder, half: ir.Value) -> ir.Value:
    """The i8 float8e4b15 code of an f16 value: its magnitude clamped to 1.75 (NaN too),
    rounded to the nearest code with ties away from zero, in the f16's own bits (the two
    formats share the exponent bias)."""
    b = builder
    bits = b.zext(b.bitcast(half, ir.IntType(16)), I32)
    magnitude = b.and_(bits, _i32(0x7FFF))
    largest = _i32(E4B15_LARGEST_HALF_BITS)
    magnitude = b.select(b.icmp_unsigned(">", magnitude, largest), largest, magnitude)
    code = b.or_(b.and_(b.lshr(bits, _i32(8)), _i32(0x80)),
                 b.lshr(b.add(magnitude, _i32(0x40)), _i32(7)))
    return b.trunc(code, I8)


def encode_from_f32(builder: ir.IRBuilder, fmt: Float8Format, value: ir.Value,
                    rounding: str = "rtne") -> ir.Value:
    """The i8 code of an f32 value."""
    b, m = builder, fmt.mantissa_bits
    bits = b.bitcast(value, I32)
    sign = b.and_(b.lshr(bits, _i32(24)), _i32(0x80))
    magnitude_bits = b.and_(bits, _i32(0x7FFFFFFF))
    magnitude = b.bitcast(magnitude_bits, F32)
    # Normal range: drop 23 - m mantissa bits of the f32, rounding on the integer.
    shift = 23 - m
    if rounding == "rtz":
        rounded = b.lshr(magnitude_bits, _i32(shift))
    else:
        odd = b.and_(b.lshr(magnitude_bits, _i32(shift)), _i32(1))
        bias = b.add(_i32((1 << (shift - 1)) - 1), odd)
        rounded = b.lshr(b.add(magnitude_bits, bias), _i32(shift))
    # Magnitudes here are below 2^128, so the subtraction is of a larger number.
    normal = b.sub(rounded, _i32((127 - fmt.bias) << m))
    # Subnormal range: a multiple of the smallest subnormal, rounded as an integer.
    scaled = b.fmul(magnitude, ir.Constant(F32, 2.0 ** (m - fmt.min_normal_exponent)))
    if rounding != "rtz":
        rint = declare_function(b.module, "llvm.rint.f32", F32, [F32])
        scaled = b.call(rint, [scaled])
    subnormal = b.fptoui(scaled, I32)
    min_normal = ir.Constant(F32, 2.0 ** fmt.min_normal_exponent)
    code = b.select(b.fcmp_ordered("<", magnitude, min_normal), subnormal, normal)
    # satfinite: past the largest finite code (infinities included) is the largest.
    largest = _i32(fmt.max_finite_code)
    code = b.select(b.icmp_unsigned(">", code, largest), largest, code)
    code = b.or_(code, sign)
    is_nan = b.icmp_unsigned(">", magnitude_bits, _i32(0x7F800000))
    return b.trunc(b.select(is_nan, _i32(NAN_CODE), code), I8)
