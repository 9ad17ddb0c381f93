"""``gather`` -> LLVM IR: the source written to the shared scratch buffer, each result
element read back at the place its index names.

In: the op (the source in its natural layout, the index in the result's layout) and the
result's layout. Out: the result's registers there. The source is stored row-major (every
replica writes the same value, so replicas need no care), one barrier, then each thread
loads, for each of its result elements, the source element whose coordinate along the axis
is the index (clamped into the source, so that a wrong index reads a source element, never
other memory: the interpreter clamps the same way).
"""
from __future__ import annotations

import llvmlite.ir as ir

from .llvm_types import I32
from .registry import scratch, value_lowering
from .shared_rows import RowMajorBuffer


@scratch("gather")
def gather_scratch_bytes(plan, op) -> int:
    source = op.operands[0]
    return source.type.numel * max(1, source.element.itemsize)


def _position(b, index, element, size: int):
    """The index register as an i32 in [0, size)."""
    bits = element.bits
    if bits > 32:
        low, high = ir.Constant(index.type, 0), ir.Constant(index.type, size - 1)
        signed = element.is_int_signed()
        below = b.icmp_signed("<", index, low) if signed else ir.Constant(ir.IntType(1), 0)
        above = b.icmp_signed(">", index, high) if signed else b.icmp_unsigned(">", index, high)
        index = b.trunc(b.select(below, low, b.select(above, high, index)), I32)
    else:
        if bits < 32:
            index = b.sext(index, I32) if element.is_int_signed() else b.zext(index, I32)
        low, high = ir.Constant(I32, 0), ir.Constant(I32, size - 1)
        if element.is_int_signed():
            index = b.select(b.icmp_signed("<", index, low), low, index)
        index = b.select(b.icmp_unsigned(">", index, high), high, index)
    return index


@value_lowering("gather")
def lower_gather(ctx, op, layout) -> list:
    b = ctx.builder
    source, index = op.operands
    axis = op.attrs["axis"]
    buffer = RowMajorBuffer(ctx, source.type.shape, op.result.element)
    ctx.shared.begin_use()
    buffer.write(source, ctx.operand_layout(source, ctx.plan.natural(source)))
    ctx.shared.barrier()
    out = []
    for position, indices in zip(ctx.regs(index, layout),
                                 ctx.threads.logical_indices(op.result, layout)):
        indices = list(indices)
        indices[axis] = _position(b, position, index.element, source.type.shape[axis])
        out.append(buffer.read(indices))
    return out
