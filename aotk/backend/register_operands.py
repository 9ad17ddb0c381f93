"""Dot operands read from registers: which operands a tensor-core dot reads straight from
the registers they were computed in, and their instruction fragments.

In: a ``dot`` op and its layout plan; an operand resident in the accumulator fragments
(``passes.mma_residency``) of a dot laid out as this one. Out: ``a_in_registers`` /
``b_in_registers`` (whether ``backend.mma`` / ``backend.wgmma`` skip storing it to shared
memory) and ``a_register_fragments`` / ``b_register_fragments`` (the registers each
``mma.sync`` or ``wgmma`` takes, per row or column tile and k slice). ``staged`` says
whether a pipelined loop already put an operand in shared memory.
"""
from __future__ import annotations

import functools

import llvmlite.ir as ir

from ..passes.layouts import Layout
from .llvm_types import I32, llvm_type
from .warp_shuffle import shuffle


def staged(value) -> bool:
    """Whether a pipelined loop already put ``value`` in shared memory (``shared_read``)."""
    return value.owner is not None and value.owner.opcode == "shared_read"


def _in_registers(plan, op, position: int, tf32: bool) -> bool:
    """Operand ``position`` (0: A, 1: B) stays in the registers it was computed in: 16-bit
    (or, ``tf32``, fp32) and resident in the accumulator fragments of a dot laid out as this
    one, whose warps do not split the operand's K (A: warps tile only M; B: only N) nor
    repeat its tiles, and not stored transposed for this dot."""
    value = op.operands[position]
    layout = Layout(plan.mma[op])
    element_fits = value.element.itemsize == 2 and not value.element.is_int() or \
        tf32 and value.element.itemsize == 4 and value.element.is_floating()
    transposed = plan.m_major_a(op) if position == 0 else plan.k_major_b(op)
    repeated = any(layout.blocked.tile(axis) > size
                   for axis, size in enumerate(value.type.shape))
    return not staged(value) and element_fits and plan.homes.get(value) == layout and \
        layout in plan.demands.get(value, []) and \
        layout.blocked.warps_per_cta[1 - position] == 1 and \
        not layout.blocked.warp_columns and transposed is None and not repeated


def a_in_registers(plan, op, tf32: bool = True) -> bool:
    """Whether A stays in the registers it was computed in (``_in_registers``): each warp
    then holds whole rows of A, all of this dot's K."""
    return _in_registers(plan, op, 0, tf32)


def b_in_registers(plan, op) -> bool:
    """Whether B stays in the registers it was computed in: each warp holds all of K for
    its columns (mma.sync only)."""
    return _in_registers(plan, op, 1, True)


def _packed(ctx, registers, index: int, element_type):
    """Registers ``index`` and ``index + 1`` (two 16-bit elements) as one 32-bit word, the
    first in the low half."""
    b = ctx.builder
    pair = ir.Constant(ir.VectorType(element_type, 2), None)
    for position in (0, 1):
        pair = b.insert_element(pair, registers[index + position], ir.Constant(I32, position))
    return b.bitcast(pair, I32)


def _quad_exchange(ctx, even, odd, sender_sends_odd, sources, receiver_swaps):
    """Two 32-bit shuffles that deliver a lane the two values it wants, each held by
    another lane as the even or the odd register of a column pair (``even``, ``odd``): in
    round i the lane reads lane ``sources[i]``, a permutation of the lanes, so each sender
    is read by one lane and sends the register that lane wants (the odd one where
    ``sender_sends_odd[i]``); the receiver gets its two values in one order or, where
    ``receiver_swaps``, the other. Half the shuffles of sending both registers to every
    reader and keeping one."""
    b = ctx.builder
    received = [shuffle(ctx, b.select(sends_odd, odd, even), source, "idx")
                for sends_odd, source in zip(sender_sends_odd, sources)]
    first = b.select(receiver_swaps, received[1], received[0])
    second = b.select(receiver_swaps, received[0], received[1])
    return b.bitcast(first, I32), b.bitcast(second, I32)


def _once_per_block(build):
    """``build``'s fragments of a value, built once per basic block: another dot of the
    block that reads the same value in the same layout reuses them (they dominate it), as
    fla's block merges read one inverse block in two dots (Triton shuffles it once too)."""
    @functools.wraps(build)
    def fragments(ctx, value, layout, tiles: int, k_steps: int) -> list:
        key = (build.__name__, value, layout, tiles, k_steps, ctx.builder.block)
        if key not in ctx.derived:
            ctx.derived[key] = build(ctx, value, layout, tiles, k_steps)
        return ctx.derived[key]
    return fragments


@_once_per_block
def b_register_fragments(ctx, b_value, layout, column_tiles: int, k_steps: int) -> list:
    """B's register fragments per (column tile, k slice), two registers each, from B's
    accumulator-layout registers (``b_in_registers``): lane (g, t) of the instruction
    wants column g at rows 2t, 2t + 1 (and 2t + 8, 2t + 9) of a k16 slice, 16-bit pairs,
    or at rows t (and t + 4) of a k8 slice, tf32; the Mma layout has row r at quad r % 8,
    columns 2t', 2t' + 1 at quad lane t'. Each source lane's column pair is shuffled as one
    32-bit word where the elements are 16-bit, and the receiver keeps the column of its
    parity; tf32 rows t and t + 4 take two shuffles (``_quad_exchange``)."""
    b = ctx.builder
    c = lambda v: ir.Constant(I32, v)   # noqa: E731
    registers = ctx.regs(b_value, Layout(layout))
    per_row = 2 * (b_value.type.shape[1] // layout.tile(1))   # per slot row of B's Mma layout
    lane = ctx.threads.lane
    quad_lane = b.urem(lane, c(4))
    group = b.udiv(lane, c(4))
    pair_lane = b.lshr(group, c(1))                 # quad lane holding column g
    odd = b.icmp_unsigned("!=", b.and_(group, c(1)), c(0))

    def source(row):   # the lane holding (row r of the 8-row half, column g)
        return b.add(b.mul(row, c(4)), pair_lane)

    def slot(row_tile, half, column_tile):
        return (2 * row_tile + half) * per_row + 2 * column_tile

    if b_value.element.itemsize == 4:
        # k8 slice ks: rows 8 ks .. 8 ks + 7 are half ks % 2 of row tile ks // 2; lane
        # (g, t) wants rows t and t + 4 of column g. Round one: an even g reads row t, an
        # odd g row t + 4 (so rows 0-3 send their even column, rows 4-7 their odd one);
        # round two the other rows.
        lower_row = b.icmp_unsigned("<", group, c(4))
        upper_row = b.icmp_unsigned(">=", group, c(4))
        sources = [source(b.add(quad_lane, b.select(flag, c(4), c(0)))) for flag in
                   (odd, b.icmp_unsigned("==", b.and_(group, c(1)), c(0)))]
        fragments = []
        for tn in range(column_tiles):
            per_slice = []
            for ks in range(k_steps):
                index = slot(ks // 2, ks % 2, tn)
                per_slice.append(list(_quad_exchange(
                    ctx, registers[index], registers[index + 1], (upper_row, lower_row),
                    sources, odd)))
            fragments.append(per_slice)
        return fragments
    element_type = llvm_type(b_value.element)
    half_bits = ir.IntType(16)

    def column_of(word):   # the receiver's column of a shuffled pair: high half when odd
        shifted = b.select(odd, b.lshr(word, c(16)), word)
        return b.trunc(shifted, half_bits)

    def fragment(index):
        word = _packed(ctx, registers, index, element_type)
        rows = [column_of(shuffle(ctx, word, source(b.add(b.mul(quad_lane, c(2)), c(r))),
                                  "idx")) for r in (0, 1)]
        pair = ir.Constant(ir.VectorType(half_bits, 2), None)
        for position, row in enumerate(rows):
            pair = b.insert_element(pair, row, c(position))
        return b.bitcast(pair, I32)

    # k16 slice ks is row tile ks (16 rows): rows 2t, 2t + 1 in half 0, 2t + 8, 2t + 9 in 1.
    return [[[fragment(slot(ks, half, tn)) for half in (0, 1)]
             for ks in range(k_steps)] for tn in range(column_tiles)]


@_once_per_block
def a_register_fragments(ctx, a, layout, row_tiles: int, k_steps: int) -> list:
    """A's register fragments per (row tile, k slice), from A's accumulator-layout
    registers (``a_in_registers``), four registers each. 16-bit elements, k16 slices: the
    instruction wants (row r, columns 2t, 2t+1), (r + 8, same), (r, 2t + 8, 2t + 9),
    (r + 8, same), which are the pairs the Mma layout holds in the slice's two 8-column
    tiles. fp32 as tf32, k8 slices: it wants (r, t), (r + 8, t), (r, t + 4), (r + 8, t + 4);
    lane t of a quad holds columns 2t and 2t + 1, so column t comes from quad lane t / 2
    and column t + 4 from quad lane 2 + t / 2, two shuffles for the two (``_quad_exchange``)."""
    b = ctx.builder
    registers = ctx.regs(a, Layout(layout))
    per_row = 2 * (a.type.shape[1] // 8)      # registers per slot row of A's Mma layout
    if a.element.itemsize == 4:
        # Lane t of a quad wants columns t and t + 4, held by quad lanes t / 2 and
        # 2 + t / 2 as the register of t's parity. Round one: lane t reads quad lane
        # 2 (t % 2) + t / 2 (a permutation: 0, 2, 1, 3), which sends its odd register if
        # it is lane 2 or 3; round two: quad lane 2 (1 - t % 2) + t / 2, which sends its
        # odd register if it is lane 0 or 1. An even t gets column t first, an odd t
        # column t + 4.
        c = lambda v: ir.Constant(I32, v)   # noqa: E731
        lane = ctx.threads.lane
        quad_lane = b.urem(lane, c(4))
        quad = b.sub(lane, quad_lane)
        half_lane = b.lshr(quad_lane, c(1))
        odd_t = b.and_(quad_lane, c(1))
        upper = b.icmp_unsigned("!=", half_lane, c(0))
        lower = b.icmp_unsigned("==", half_lane, c(0))
        sources = (b.add(quad, b.add(b.mul(odd_t, c(2)), half_lane)),
                   b.add(quad, b.add(b.mul(b.sub(c(1), odd_t), c(2)), half_lane)))
        swaps = b.icmp_unsigned("!=", odd_t, c(0))
        fragments = []
        for tm in range(row_tiles):
            per_slice = []
            for ks in range(k_steps):
                columns = []   # (column t, column t + 4) for rows g and g + 8
                for half in (0, 1):
                    index = (2 * tm + half) * per_row + 2 * ks
                    columns.append(_quad_exchange(ctx, registers[index], registers[index + 1],
                                                  (upper, lower), sources, swaps))
                per_slice.append([columns[0][0], columns[1][0], columns[0][1], columns[1][1]])
            fragments.append(per_slice)
        return fragments
    element_type = llvm_type(a.element)
    return [[[_packed(ctx, registers, (2 * tm + half) * per_row + 2 * (2 * ks + tile),
                      element_type)
              for tile in (0, 1) for half in (0, 1)]
             for ks in range(k_steps)] for tm in range(row_tiles)]
