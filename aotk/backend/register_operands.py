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

import llvmlite.ir as ir

from ..passes.layouts import Layout
from .llvm_types import I32, llvm_type
from .reduce import shuffle


def staged(value) -> bool:
    """Whether a pipelined loop already put ``value`` in shared memory (``shared_read``)."""
    return value.owner is not None and value.owner.opcode == "shared_read"


def a_in_registers(plan, op, tf32: bool = True) -> bool:
    """Whether A stays in the registers it was computed in: a 16-bit (or, ``tf32``, fp32)
    block resident in the accumulator fragments of a dot laid out as this one, whose warps
    tile only M (each warp then holds whole rows of A, all of this dot's K), and not stored
    transposed for this dot."""
    a = op.operands[0]
    layout = Layout(plan.mma[op])
    element_fits = a.element.itemsize == 2 and not a.element.is_int() or \
        tf32 and a.element.itemsize == 4 and a.element.is_floating()
    return not staged(a) and element_fits and plan.homes.get(a) == layout and \
        layout in plan.demands.get(a, []) and layout.blocked.warps_per_cta[1] == 1 and \
        not layout.blocked.warp_columns and plan.m_major_a(op) is None


def b_in_registers(plan, op) -> bool:
    """Whether B stays in the registers it was computed in: as ``a_in_registers``, with
    warps tiling only N (each warp holds all of K for its columns), for mma.sync only."""
    b = op.operands[1]
    layout = Layout(plan.mma[op])
    element_fits = b.element.itemsize == 2 and not b.element.is_int() or \
        b.element.itemsize == 4 and b.element.is_floating()
    return not staged(b) and element_fits and plan.homes.get(b) == layout and \
        layout in plan.demands.get(b, []) and layout.blocked.warps_per_cta[0] == 1 and \
        not layout.blocked.warp_columns and plan.k_major_b(op) is None


def b_register_fragments(ctx, b_value, layout, column_tiles: int, k_steps: int) -> list:
    """B's register fragments per (column tile, k slice), two registers each, from B's
    accumulator-layout registers (``b_in_registers``): lane (g, t) of the instruction
    wants column g at rows 2t, 2t + 1 (and 2t + 8, 2t + 9) of a k16 slice, 16-bit pairs,
    or at rows t (and t + 4) of a k8 slice, tf32; the Mma layout has row r at quad r % 8,
    columns 2t', 2t' + 1 at quad lane t'. Each source lane's column pair is shuffled as one
    32-bit word where the elements are 16-bit, and the receiver keeps the column of its
    parity."""
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
        def gathered(index, row):
            even_column = shuffle(ctx, registers[index], source(row), "idx")
            odd_column = shuffle(ctx, registers[index + 1], source(row), "idx")
            return b.bitcast(b.select(odd, odd_column, even_column), I32)
        # k8 slice ks: rows 8 ks .. 8 ks + 7 are half ks % 2 of row tile ks // 2.
        return [[[gathered(slot(ks // 2, ks % 2, tn), b.add(quad_lane, c(4 * extra)))
                  for extra in (0, 1)]
                 for ks in range(k_steps)] for tn in range(column_tiles)]
    element_type = llvm_type(b_value.element)
    pair_type = ir.VectorType(element_type, 2)
    half_bits = ir.IntType(16)

    def packed(index):
        pair = ir.Constant(pair_type, None)
        for position in (0, 1):
            pair = b.insert_element(pair, registers[index + position], c(position))
        return b.bitcast(pair, I32)

    def column_of(word):   # the receiver's column of a shuffled pair: high half when odd
        shifted = b.select(odd, b.lshr(word, c(16)), word)
        return b.trunc(shifted, half_bits)

    def fragment(index):
        word = packed(index)
        rows = [column_of(shuffle(ctx, word, source(b.add(b.mul(quad_lane, c(2)), c(r))),
                                  "idx")) for r in (0, 1)]
        pair = ir.Constant(ir.VectorType(half_bits, 2), None)
        for position, row in enumerate(rows):
            pair = b.insert_element(pair, row, c(position))
        return b.bitcast(pair, I32)

    # k16 slice ks is row tile ks (16 rows): rows 2t, 2t + 1 in half 0, 2t + 8, 2t + 9 in 1.
    return [[[fragment(slot(ks, half, tn)) for half in (0, 1)]
             for ks in range(k_steps)] for tn in range(column_tiles)]


def a_register_fragments(ctx, a, layout, row_tiles: int, k_steps: int) -> list:
    """A's register fragments per (row tile, k slice), from A's accumulator-layout
    registers (``a_in_registers``), four registers each. 16-bit elements, k16 slices: the
    instruction wants (row r, columns 2t, 2t+1), (r + 8, same), (r, 2t + 8, 2t + 9),
    (r + 8, same), which are the pairs the Mma layout holds in the slice's two 8-column
    tiles. fp32 as tf32, k8 slices: it wants (r, t), (r + 8, t), (r, t + 4), (r + 8, t + 4);
    lane t of a quad holds columns 2t and 2t + 1, so column t comes from quad lane t / 2
    and column t + 4 from quad lane 2 + t / 2, both registers shuffled and the one of t's
    parity kept."""
    b = ctx.builder
    registers = ctx.regs(a, Layout(layout))
    per_row = 2 * (a.type.shape[1] // 8)      # registers per slot row of A's Mma layout
    if a.element.itemsize == 4:
        c = lambda v: ir.Constant(I32, v)   # noqa: E731
        lane = ctx.threads.lane
        quad_lane = b.urem(lane, c(4))
        low = b.add(b.sub(lane, quad_lane), b.lshr(quad_lane, c(1)))
        sources = (low, b.add(low, c(2)))
        odd = b.icmp_unsigned("!=", b.and_(quad_lane, c(1)), c(0))

        def gathered(slot, source):
            even_column = shuffle(ctx, registers[slot], source, "idx")
            odd_column = shuffle(ctx, registers[slot + 1], source, "idx")
            return b.bitcast(b.select(odd, odd_column, even_column), I32)

        return [[[gathered((2 * tm + half) * per_row + 2 * ks, source)
                  for source in sources for half in (0, 1)]
                 for ks in range(k_steps)] for tm in range(row_tiles)]
    pair_type = ir.VectorType(llvm_type(a.element), 2)

    def packed(slot):
        pair = ir.Constant(pair_type, None)
        for lane in (0, 1):
            pair = b.insert_element(pair, registers[slot + lane], ir.Constant(I32, lane))
        return b.bitcast(pair, I32)

    return [[[packed((2 * tm + half) * per_row + 2 * (2 * ks + tile))
              for tile in (0, 1) for half in (0, 1)]
             for ks in range(k_steps)] for tm in range(row_tiles)]
