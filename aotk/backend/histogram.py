"""``histogram`` -> LLVM IR: counts in the shared scratch buffer, one shared-memory atomic
add per counted element.

In: the op (the values and the mask in the values' natural layout) and the result's
layout. Out: the result's int32 registers there. The bins are zeroed (thread t clears bins
t, t + threads, ...), one barrier; each thread adds 1 to the bin of each element it owns
(replicas held by other threads are skipped, so nothing counts twice) when the element is
in [0, num_bins) and unmasked; one barrier; each thread reads its result elements.
"""
from __future__ import annotations

import llvmlite.ir as ir

from .llvm_types import I32
from .registry import scratch, value_lowering


@scratch("histogram")
def histogram_scratch_bytes(plan, op) -> int:
    return op.result.type.numel * 4


def _bin(ctx, value, element, num_bins):
    """(in range, bin as i32) for a value register."""
    b = ctx.builder
    bound = ir.Constant(value.type, num_bins)
    if element.is_int_signed():
        in_range = b.and_(b.icmp_signed(">=", value, ir.Constant(value.type, 0)),
                          b.icmp_signed("<", value, bound))
    else:
        in_range = b.icmp_unsigned("<", value, bound)
    bits = element.bits
    if bits > 32:
        position = b.trunc(value, I32)
    elif bits < 32:
        position = b.zext(value, I32)   # only used in range, where it is non-negative
    else:
        position = value
    return in_range, position


@value_lowering("histogram")
def lower_histogram(ctx, op, layout) -> list:
    b = ctx.builder
    values = op.operands[0]
    num_bins = op.result.type.shape[0]
    threads = 32 * ctx.plan.num_warps

    def counter(position):
        return ctx.shared.pointer(b.mul(position, ir.Constant(I32, 4)), I32)

    ctx.shared.begin_use()
    for start in range(0, num_bins, threads):
        position = b.add(ctx.threads.tid, ir.Constant(I32, start))
        if start + threads <= num_bins:
            b.store(ir.Constant(I32, 0), counter(position))
        else:
            with b.if_then(b.icmp_unsigned("<", position, ir.Constant(I32, num_bins))):
                b.store(ir.Constant(I32, 0), counter(position))
    ctx.shared.barrier()
    value_layout = ctx.operand_layout(values, ctx.plan.natural(values))
    owner = ctx.threads.owner(values, value_layout)
    masks = ctx.regs(op.operands[1], value_layout) if op.attrs["has_mask"] else None
    for number, register in enumerate(ctx.regs(values, value_layout)):
        counted, position = _bin(ctx, register, values.element, num_bins)
        if masks is not None:
            counted = b.and_(counted, masks[number])
        if owner is not None:
            counted = b.and_(counted, owner)
        with b.if_then(counted):
            b.atomic_rmw("add", counter(position), ir.Constant(I32, 1), "monotonic")
    ctx.shared.barrier()
    return [b.load(counter(indices[0]), typ=I32)
            for indices in ctx.threads.logical_indices(op.result, layout)]
