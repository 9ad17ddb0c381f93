"""Interpreter rules of the elementwise ops: the binary ops (``add`` ... ``max``), ``cmp``,
the unary ops (``neg``, ``not``, ``abs``), ``select``, ``cast``, ``addptr`` (the math
functions: ``interpreter.math``).

In: the operand arrays (one shape, or scalars) and the op. Out: the result array, element by
element, as kir defines it: integer division and remainder round toward zero (C), shifts by
the bit width or more give 0 (or the sign for an arithmetic right shift), float min/max
return the non-NaN operand, ``frem`` computes in float32 (float64 for fp64), ``addptr``
moves by whole elements. The executor casts every result to its exact dtype afterwards.
"""
from __future__ import annotations

import numpy as np

from . import float8
from .executor import numpy_dtype, register_op_rules


def math_operand(x, element):
    """Math computes in float32 (float64 for fp64)."""
    return x.astype(np.float64 if element.is_fp64() else np.float32)


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


def _addptr(ctx, op, pointer, offset):
    size = np.uint64(op.result.element.element_ty.itemsize)
    return pointer + offset.astype(np.int64).astype(np.uint64) * size


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
    "frem": lambda ctx, op, a, b: np.fmod(math_operand(a, op.result.element),
                                          math_operand(b, op.result.element)),
    "and": lambda ctx, op, a, b: a & b,
    "or": lambda ctx, op, a, b: a | b,
    "xor": lambda ctx, op, a, b: a ^ b,
    "shl": _shift, "shr": _shift,
    "min": _min_max, "max": _min_max,
    "cmp": _compare,
    "neg": lambda ctx, op, x: np.negative(x) if not x.dtype == np.bool_ else x,
    "not": lambda ctx, op, x: np.invert(x),
    "abs": lambda ctx, op, x: np.abs(x),
    "select": lambda ctx, op, c, a, b: np.where(c, a, b),
    "cast": _cast,
    "addptr": _addptr,
})
