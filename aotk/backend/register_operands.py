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
from .warp_shuffle import shuffle


def staged(value) -> bool:
    """Whether a pipelined loop already put ``value`` in shared memory (``shared_read``)."""
    return value.owner is not None and value.owner.opcode == "shared_read"


def _in_registers(plan, op, position: int, tf32: bool) -> bool:
    """Operand ``position`` (0: A, 1: B) stays in the registers it was computed in: 16-bit
    (or, ``tf32``, fp32) and resident in the accumulator fragments of a dot laid out as this
    one, whose warps do not split the operand's K (A: warps tile only M; B: only N), and
    not stored transposed for this dot."""
    value = op.operands[position]
    layout = Layout(plan.mma[op])
    element_fits = value.element.itemsize == 2 and not value.element.is_int() or \
        tf32 and value.element.itemsize == 4 and value.element.is_floating()
    transposed = plan.m_major_a(op) if position == 0 else plan.k_major_b(op)
    return not staged(value) and element_fits and plan.homes.get(value) == layout and \
        layout in plan.demands.get(value, []) and \
        layout.blocked.warps_per_cta[1 - position] == 1 and \
        not layout.blocked.warp_columns and transposed is None


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


def _column_of_parity(ctx, registers, index: int, source, odd):
    """From lane ``source``, the column of a 32-bit column pair (registers ``index`` and
    ``index + 1``) that this lane wants: the second where ``odd``."""
    b = ctx.builder
    even_column = shuffle(ctx, registers[index], source, "idx")
    odd_column = shuffle(ctx, registers[index + 1], source, "idx")
    return b.bitcast(b.select(odd, odd_column, even_column), I32)


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
        # k8 slice ks: rows 8 ks .. 8 ks + 7 are half ks % 2 of row tile ks // 2.
        return [[[_column_of_parity(ctx, registers, slot(ks // 2, ks % 2, tn),
                                    source(b.add(quad_lane, c(4 * extra))), odd)
                  for extra in (0, 1)]
                 for ks in range(k_steps)] for tn in range(column_tiles)]
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
        return [[[_column_of_parity(ctx, registers, (2 * tm + half) * per_row + 2 * ks,
                                    source, odd)
                  for source in sources for half in (0, 1)]
                 for ks in range(k_steps)] for tm in range(row_tiles)]
    element_type = llvm_type(a.element)
    return [[[_packed(ctx, registers, (2 * tm + half) * per_row + 2 * (2 * ks + tile),
                      element_type)
              for tile in (0, 1) for half in (0, 1)]
             for ks in range(k_steps)] for tm in range(row_tiles)]
