"""``sort`` -> LLVM IR: a bitonic sorting network run in the shared scratch buffer.

In: the op (its operand in its rank's layout) and the layout its result is wanted in. Out:
the result's registers there. The operand is written out row-major (one row per sorted
last-axis run), then every compare-exchange stage of the network is one loop in which the
CTA's threads take the buffer's element pairs in turn (pair p, p + threads, ...), with a
barrier between stages; the result is read back in its layout. The stages are unrolled
(log2(n) * (log2(n) + 1) / 2 of them), the pairs are not, so the code stays small for any
size. The network and the comparator are the interpreter's (``interpreter.sort``): a pair
is swapped where (first > second) != descending-here, a float compare that is false on NaN.
"""
from __future__ import annotations

import llvmlite.ir as ir

from .llvm_types import I1, I32
from .registry import scratch, value_lowering
from .shared_rows import RowMajorBuffer, padded_bytes


@scratch("sort")
def sort_scratch_bytes(plan, op) -> int:
    return padded_bytes((op.result.type.numel,), op.result.element)


def _greater(b, element, x, y):
    if element.is_floating():
        return b.fcmp_ordered(">", x, y)
    if element.is_int_signed():
        return b.icmp_signed(">", x, y)
    return b.icmp_unsigned(">", x, y)


def _stage(ctx, element, memory_type, size, n, pairs, threads, block, distance, descending):
    """One compare-exchange at ``distance`` inside bitonic runs of ``block`` elements, as
    a loop over the pairs this thread takes."""
    b = ctx.builder
    const = lambda v: ir.Constant(I32, v)   # noqa: E731 - a local shorthand
    function = b.function
    loop = function.append_basic_block("sort.pairs")
    done = function.append_basic_block("sort.stage_done")
    tid = ctx.threads.tid
    entry = b.block
    b.cbranch(b.icmp_unsigned("<", tid, const(pairs)), loop, done)
    b.position_at_end(loop)
    pair = b.phi(I32, "pair")
    pair.add_incoming(tid, entry)
    shift = distance.bit_length() - 1
    half = n // 2
    row, within = b.lshr(pair, const((half).bit_length() - 1)), b.and_(pair, const(half - 1))
    # The first element of the pair: bit `shift` of its position in the row is 0.
    position = b.or_(b.shl(b.lshr(within, const(shift)), const(shift + 1)),
                     b.and_(within, const(distance - 1)))
    first_index = b.add(b.mul(row, const(n)), position)
    second_index = b.add(first_index, const(distance))
    first_slot = ctx.shared.pointer(b.mul(first_index, const(size)), memory_type)
    second_slot = ctx.shared.pointer(b.mul(second_index, const(size)), memory_type)
    first, second = b.load(first_slot, typ=memory_type), b.load(second_slot, typ=memory_type)
    if block == n:
        flipped = ir.Constant(I1, int(descending))
    else:   # runs in odd positions merge descending
        flipped = b.icmp_unsigned("!=", b.and_(position, const(block)), const(0))
    swap = b.xor(_greater(b, element, first, second), flipped)
    b.store(b.select(swap, second, first), first_slot)
    b.store(b.select(swap, first, second), second_slot)
    following = b.add(pair, const(threads))
    pair.add_incoming(following, b.block)
    b.cbranch(b.icmp_unsigned("<", following, const(pairs)), loop, done)
    b.position_at_end(done)
    ctx.shared.barrier()


@value_lowering("sort")
def lower_sort(ctx, op, layout) -> list:
    """``layout`` is the result's home, its rank's layout."""
    source = op.operands[0]
    element = op.result.element
    buffer = RowMajorBuffer(ctx, source.type.shape, element)
    ctx.shared.begin_use()
    buffer.write(source, ctx.plan.natural(source))
    ctx.shared.barrier()
    n = source.type.shape[-1]
    block = 2
    while block <= n:
        distance = block // 2
        while distance >= 1:
            _stage(ctx, element, buffer.memory_type, buffer.element_bytes, n,
                   op.result.type.numel // 2, 32 * ctx.plan.num_warps, block, distance,
                   op.attrs["descending"])
            distance //= 2
        block *= 2
    return [buffer.read(indices)
            for indices in ctx.threads.logical_indices(op.result, ctx.plan.natural(op.result))]
