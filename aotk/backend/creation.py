"""``program_id``, ``num_programs``, ``constant``, ``arange`` and ``read_register``: values
made from nothing but the op's attributes, the thread's place in the grid and the clock.

In: the op and the layout its result is wanted in. Out: the result's registers there: a
special-register read (``ctaid`` / ``nctaid``), one constant repeated, or each register's
index along the range's axis (``backend.geometry``) plus the start.
"""
from __future__ import annotations

import llvmlite.ir as ir

from ..passes.layouts import SCALAR
from .geometry import special_register
from .llvm_types import I32, I64, constant, inline_asm
from .registry import value_lowering


@value_lowering("program_id", "num_programs")
def lower_program_coordinate(ctx, op, layout):
    prefix = "ctaid." if op.opcode == "program_id" else "nctaid."
    return [special_register(ctx.builder, prefix + "xyz"[op.attrs["axis"]], op.opcode)]


@value_lowering("read_register")
def lower_read_register(ctx, op, layout):
    """A volatile ``mov`` from the special register: two reads stay two reads."""
    name = op.attrs["register"]
    if name == "globaltimer":
        return [inline_asm(ctx.builder, "mov.u64 $0, %globaltimer;", "=l", [], I64)]
    return [inline_asm(ctx.builder, f"mov.u32 $0, %{name};", "=r", [], I32)]


@value_lowering("constant")
def lower_constant(ctx, op, layout):
    value = constant(op.result.element, op.attrs["value"])
    return [value] * ctx.threads.count(op.result, layout)


@value_lowering("arange")
def lower_arange(ctx, op, layout):
    if layout is SCALAR:
        raise AssertionError("arange is a block")
    b = ctx.builder
    dist = ctx.threads.distribution(layout, op.result.type.shape)
    axis = layout.parent_axis(0)
    indices = dist.axis_indices(axis)
    start = op.attrs["start"]
    return [b.add(indices[slot[axis]], ir.Constant(I32, start)) if start else indices[slot[axis]]
            for slot in dist.slots()]
