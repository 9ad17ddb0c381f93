"""``for`` / ``if`` / ``while`` -> basic blocks with one phi per register of each carried value.

In: the op, its operands' registers, its regions. Out: the registers of its results. Carried
values and an if's results keep one layout throughout (``passes.layouts``: their natural
layout, or a dot accumulator's mma layout). Shared-memory bookkeeping follows the control
flow: a loop body's first scratch use may follow the previous trip's last one, so it starts
with a barrier; an ``if`` needs one after it when either branch used the buffer; a pipelined
loop's operand stages stay live for the whole loop, so other users go above them meanwhile.
"""
from __future__ import annotations

import llvmlite.ir as ir

from ..passes.layouts import SCALAR
from ..passes.mma_layout import Mma
from .registry import lowering
from .wgmma import wait_for_wgmma


def _phis(ctx, incoming, block):
    phis = [[ctx.builder.phi(r.type) for r in registers] for registers in incoming]
    _add_incoming(phis, incoming, block)
    return phis


def _add_incoming(phis, incoming, block):
    for phi_list, registers in zip(phis, incoming):
        for phi, register in zip(phi_list, registers):
            phi.add_incoming(register, block)


def _enter_loop(ctx, kind: str, incoming):
    """Branches to a new header block holding one phi per incoming register; returns the
    phis and the (not yet entered) body and exit blocks."""
    b = ctx.builder
    header, body, exit_block = (ctx.kernel.append_basic_block(f"{kind}.{part}")
                                for part in ("header", "body", "exit"))
    preheader = b.block
    b.branch(header)
    b.position_at_end(header)
    phis = _phis(ctx, incoming, preheader)
    # The body's first shared-memory use may follow the previous trip's last one: it
    # needs a barrier (a body without shared memory pays nothing for this).
    ctx.shared.enter_loop()
    return phis, body, exit_block


@lowering("for")
def lower_for(ctx, op) -> list:
    b = ctx.builder
    start, end, step = (ctx.regs(v, SCALAR)[0] for v in op.operands[:3])
    # Carried values keep their block argument's layout (a dot accumulator: mma).
    layouts = [ctx.plan.homes[a] for a in op.regions[0].args[1:]]
    inits = [ctx.regs(v, layout) for v, layout in zip(op.operands[3:], layouts)]
    direction = op.attrs["direction"]
    in_flight = op.attrs.get("wgmma_in_flight")

    def keep_going(value):
        going_up = b.icmp_signed("<", value, end)
        going_down = b.icmp_signed(">", value, end)
        if direction == "up":
            return going_up
        if direction == "down":
            return going_down
        positive = b.icmp_signed(">", step, ir.Constant(step.type, 0))
        return b.select(positive, going_up, going_down)

    if in_flight:
        # Tested before the first trip and after each (see the drain below).
        guard = b.block
        entry = ctx.kernel.append_basic_block("for.enter")
        skipped = keep_going(start)
        b.position_at_end(entry)
    ((induction,), *carried), body, exit_block = _enter_loop(ctx, "for", [[start]] + inits)
    header = b.block
    if in_flight:
        with b.goto_block(guard):   # the exit block exists now
            b.cbranch(skipped, entry, exit_block)
        b.branch(body)
    else:
        b.cbranch(keep_going(induction), body, exit_block)
    b.position_at_end(body)
    entered = ctx.shared.control_state()
    floor = ctx.shared.floor
    if op.attrs.get("pipeline") is not None:
        # The operand stages stay live for the whole loop: other users go above them.
        ctx.shared.floor = ctx.pipeline.loop_bytes[op.attrs["pipeline"]]
    yielded = ctx.lower_region(op.regions[0], [[induction]] + carried, layouts)
    ctx.shared.floor = floor
    # After the loop: after no trip, or after the last one.
    ctx.shared.join([entered, ctx.shared.control_state()])
    latch = b.block
    next_induction = b.add(induction, step)
    _add_incoming([[induction]] + carried, [[next_induction]] + yielded, latch)
    if not in_flight:
        b.branch(header)
        b.position_at_end(exit_block)
        return carried
    # The last trip's wgmma may still be writing the accumulators: the latch leaves
    # through a block that waits for it. The wait must come first after the loop
    # (ptxas serializes every wgmma when other instructions run before it), so it
    # is not in the exit block, where LLVM sinks the code that follows the loop.
    drain = ctx.kernel.append_basic_block("for.drain")
    b.cbranch(keep_going(next_induction), header, drain)
    b.position_at_end(drain)
    drained = [wait_for_wgmma(b, registers, 0)
               if isinstance(getattr(layout, "blocked", None), Mma) else registers
               for registers, layout in zip(yielded, layouts)]
    b.branch(exit_block)
    b.position_at_end(exit_block)
    results = _phis(ctx, inits, guard)
    _add_incoming(results, drained, drain)
    return results


@lowering("if")
def lower_if(ctx, op) -> list:
    b = ctx.builder
    (condition,) = ctx.regs(op.operands[0], SCALAR)
    blocks = [ctx.kernel.append_basic_block(name) for name in ("if.then", "if.else")]
    merge = ctx.kernel.append_basic_block("if.end")
    b.cbranch(condition, *blocks)
    before, after, incoming = ctx.shared.control_state(), [], []
    for region, block in zip(op.regions, blocks):
        b.position_at_end(block)
        ctx.shared.restore(before)
        yielded = ctx.lower_region(region, [], [ctx.plan.homes[v] for v in op.results])
        after.append(ctx.shared.control_state())
        incoming.append((yielded, b.block))
        b.branch(merge)
    ctx.shared.join(after)
    b.position_at_end(merge)
    (then_values, then_block), (else_values, else_block) = incoming
    phis = _phis(ctx, then_values, then_block)
    _add_incoming(phis, else_values, else_block)
    return phis


@lowering("while")
def lower_while(ctx, op) -> list:
    b = ctx.builder
    natural = ctx.plan.natural
    before_region, after_region = op.regions
    # Each value in the layout of the block argument receiving it (layout_demands._branches).
    inits = [ctx.regs(v, natural(arg)) for v, arg in zip(op.operands, before_region.args)]
    carried, body, exit_block = _enter_loop(ctx, "while", inits)
    entered = ctx.shared.control_state()
    before = b.block
    (condition,), *forwarded = ctx.lower_region(
        before_region, carried, [SCALAR] + [natural(arg) for arg in after_region.args])
    b.cbranch(condition, body, exit_block)
    b.position_at_end(body)
    yielded = ctx.lower_region(after_region, forwarded,
                               [natural(arg) for arg in before_region.args])
    _add_incoming(carried, yielded, b.block)
    b.branch(before)
    b.position_at_end(exit_block)
    # The exit follows the condition: after the first test, or after a later trip's.
    ctx.shared.join([entered, ctx.shared.control_state()])
    return forwarded
