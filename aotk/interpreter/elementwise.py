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

import numpy as np

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
    if target.is_bool():
        return x != 0
    if source.is_floating() and target.is_int():
        return np.trunc(x).astype(np.int64 if target.bits < 64 or target.is_int_signed()
                                  else np.uint64)
    return x


def _fma(ctx, op, a, b, c):
    element = op.result.element
    wide = np.float64 if element.bits <= 32 else np.longdouble
    return a.astype(wide) * b.astype(wide) + c.astype(wide)


def _addptr(ctx, op, pointer, offset):
    size = np.uint64(op.result.element.element_ty.itemsize)
    return pointer + offset.astype(np.int64).astype(np.uint64) * size


def _libm(function):
    """A Python ``math`` function on every element, in float64 (the reference the GPU's
    libdevice result is compared with), rounded to the result type afterwards."""
    return np.frompyfunc(function, 1, 1)


# The math functions of aotk.semantic's MATH_FUNCTIONS (kir op ``math``), by name.
MATH = {
    "erf": _libm(math.erf),
    "sqrt_rn": _libm(math.sqrt),
}


def _math(ctx, op, *operands):
    wide = [np.asarray(x, np.float64) for x in operands]
    return np.asarray(MATH[op.attrs["function"]](*wide), np.float64)


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
