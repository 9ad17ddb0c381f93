"""Interpreter rules of the ops that make values from nothing: ``program_id``,
``num_programs``, ``constant``, ``arange``, ``read_register``.

In: the op (its attributes) and the program's ids and grid. Out: an i32 scalar (the id or
the grid size along ``axis``), the constant splat to the result shape, or
``[start, end)`` as i32.
"""
from __future__ import annotations

import time

import numpy as np

from . import float8
from .executor import numpy_dtype, register_op_rules


def _constant(ctx, op):
    element, value = op.result.element, op.attrs["value"]
    if element.is_fp8():   # held as its code
        value = float8.encode(element.float8_format, value)
    return np.full(op.result.type.shape, value, numpy_dtype(element))


def _read_register(ctx, op):
    """globaltimer: the host's clock in nanoseconds (it only moves forward, as the GPU's);
    smid: 0, the interpreter's one multiprocessor."""
    if op.attrs["register"] == "globaltimer":
        return np.int64(time.time_ns())
    return np.int32(0)


register_op_rules({
    "read_register": _read_register,
    "program_id": lambda ctx, op: np.int32(ctx.pid[op.attrs["axis"]]),
    "num_programs": lambda ctx, op: np.int32(ctx.grid[op.attrs["axis"]]),
    "constant": _constant,
    "arange": lambda ctx, op: np.arange(op.attrs["start"], op.attrs["end"], dtype=np.int32),
})
