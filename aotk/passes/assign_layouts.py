"""Layout assignment: kir + axis info -> gir, the distribution of every block over threads.

In: a kir ``Function``, its axis info, ``num_warps``, whether the target has ``wgmma`` and
Ampere's ``mma.sync`` shapes. Out: a ``LayoutPlan`` (``passes.layouts``): data only;
``aotk.backend`` alone turns it into code. The pass runs in three steps:

1. Facts (``passes.layout_facts``): the vector width of each memory op (from axis info),
   one blocked layout per block rank (shaped by that rank's largest block and its
   elected access width) and one of their own for the block shapes it would replicate,
   the layouts of tiles that ``async_copy`` moves, those of loads and stores contiguous
   along another dimension than the last, which tensor-core layout computes each ``dot``
   (``passes.mma_layout``), and which values stay in an accumulator's layout
   (``passes.mma_residency``: epilogues, reductions of dot results, what a loop carries).
2. The demand table (``passes.layout_demands.DEMANDS``): for each op, given the layouts its
   result is wanted in, the layouts it wants of its operands, and whether its result gets a
   *home* (it is computed once there; every other layout it is wanted in is a conversion
   through shared memory). Elementwise ops take their result's layout, ``expand_dims`` asks
   for a slice of it (or has a reduction's elementwise chain computed in the reduction's
   slice, its home, and converted there), ``splat`` a scalar; loads, reductions, shuffles
   and dots have homes.
3. The solver (``layout_demands.Demands``): roots (stores, side effects, region terminators)
   want their operands in their natural layout; demands flow backward through the table,
   region by region. Values that cross a region boundary (loop-carried values, block
   arguments, results of ``for`` / ``if`` / ``while``, what a terminator yields) live in the
   natural layout of their shape, so that every path agrees on which thread holds which
   element; a loop carrying a dot's accumulator keeps it in the dot's mma layout. (Carrying
   a block in the one layout its body reads it in instead, to save the conversion each trip,
   was tried and measured: it took fla's fused-recurrent GLA from 2.6 to 5.2 ms on an H200;
   ptxas then interleaved the trip's loads with their uses instead of issuing them
   together.)
"""
from __future__ import annotations

from ..ir.kir import Function, walk
from .layout_demands import Demands
from .layout_facts import (access_layouts, blocked_layouts, column_read_operands,
                           copy_layouts, transposed_operand_views)
from .layouts import (SCALAR, LayoutPlan, memory_vector_dim, memory_vector_width,
                      permuted_layout)
from .mma_layout import choose_mma
from .mma_residency import fragment_views, mma_residency


def assign_layouts(function: Function, infos: dict, num_warps: int,
                   wgmma: bool = False, ampere_mma: bool = True) -> LayoutPlan:
    memory_ops = [op for op in walk(function.body)
                  if op.opcode in ("load", "store", "async_copy")]
    vector_dim = {op: memory_vector_dim(op, infos) for op in memory_ops}
    widths_along_dim = {op: memory_vector_width(op, infos, vector_dim[op]) for op in memory_ops}
    # Tensor-core dots store an operand read down its columns transposed (its loads then
    # keep their own layout); which instruction computes a dot may depend on that.
    column_read = column_read_operands(function, vector_dim, widths_along_dim)
    # The transposes of tiles read along their rows are stored the same way, from the
    # transposed view of the tile's own layout (``transposed_operand_views``).
    views = transposed_operand_views(function, vector_dim, widths_along_dim)
    mma = {op: choose_mma(op, num_warps, wgmma, ampere_mma,
                          b_stored_k_major=(op, 1) in column_read or (op, 1) in views,
                          a_stored_m_major=(op, 0) in column_read or (op, 0) in views)
           for op in walk(function.body) if op.opcode == "dot"}
    column_read = {key: loads for key, loads in column_read.items() if mma[key[0]] is not None}
    access = access_layouts(function, vector_dim, widths_along_dim, num_warps,
                            frozenset(load for loads in column_read.values() for load in loads))
    stored_transposed = {(dot, index): access[loads[0]]
                         for (dot, index), loads in column_read.items()}
    # An op without a layout of its own accesses memory along the last dimension, in
    # vectors as wide as that one allows.
    vector_width = {op: memory_vector_width(op, infos, vector_dim[op] if op in access else None)
                    for op in memory_ops}
    # The rank's layouts are shaped by the ops that access memory along the last dimension.
    along_last = {op: width for op, width in vector_width.items() if op not in access}
    by_rank, by_shape = blocked_layouts(function, along_last, num_warps)
    plan = LayoutPlan(num_warps, by_rank, vector_width, blocked_by_shape=by_shape,
                      preferred=copy_layouts(function, vector_width, num_warps),
                      vector_dim={op: vector_dim[op] for op in access}, access=access,
                      mma=mma, stored_transposed=stored_transposed)
    for (dot, index), view in views.items():
        if mma[dot] is not None and (dot, index) not in stored_transposed:
            plan.stored_transposed[dot, index] = permuted_layout(
                plan.natural(view.operands[0]), view.attrs["order"])
    resident, carried = mma_residency(plan, function)
    plan.fragment_views = fragment_views(plan, function, resident)
    demands = Demands(plan, resident, carried)
    demands.solve(function.body)
    for value in list(demands.wanted):
        if value.type.shape == ():
            demands.wanted[value] = [SCALAR]
            if value in demands.homes:
                demands.homes[value] = SCALAR
    plan.demands, plan.homes = demands.wanted, demands.homes
    return plan

