"""kir element types -> llvmlite IR types (bfloat included, which llvmlite lacks)."""
from __future__ import annotations

import struct

import llvmlite.ir as ir
from llvmlite.ir.types import _BaseFloatType


class BFloatType(_BaseFloatType):
    """LLVM's ``bfloat``; constants print as ``0xRXXXX`` (the top half of an fp32)."""
    null = "0xR0000"
    intrinsic_name = "bf16"

    def __str__(self):
        return "bfloat"

    def format_constant(self, value):
        return "0xR%04X" % float_to_bf16_bits(float(value))


BFloatType._create_instance()


def float_to_bf16_bits(value: float) -> int:
    bits = struct.unpack("<I", struct.pack("<f", value))[0]
    if value != value:
        return 0x7FC0
    # Round to nearest even on the dropped 16 bits.
    bits += 0x7FFF + ((bits >> 16) & 1)
    return (bits >> 16) & 0xFFFF


I1, I8, I16, I32, I64 = (ir.IntType(n) for n in (1, 8, 16, 32, 64))


def llvm_type(element) -> ir.Type:
    if element.is_ptr():
        return I64   # addresses travel as integers; memory ops turn them into PTX operands
    if element.is_floating():
        return {16: BFloatType() if element.is_bf16() else ir.HalfType(), 32: ir.FloatType(),
                64: ir.DoubleType()}[element.bits]
    return ir.IntType(element.bits)
