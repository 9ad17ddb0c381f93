"""One rule applied to each of a value's registers, for the elementwise-like op families
(``backend.elementwise``, ``backend.math``).

In: the op, the layout its result is wanted in (its operands are wanted in the same one)
and a rule ``(ctx, op, operand registers of one element) -> ir.Value``. Out: the result's
registers. Where axis info proves the result constant over runs of a thread's registers
(``offs < n`` over aligned vectors of offsets), only the first of each run is computed and
the others reuse it, as Triton does.
"""
from __future__ import annotations

import math

from ..passes.layouts import Blocked, Layout


def apply_per_register(ctx, op, layout, rule) -> list:
    """The result's registers: ``rule`` on each register's operands, once per constant run."""
    operand_registers = [ctx.regs(v, layout) for v in op.operands]
    count = len(operand_registers[0])
    runs = constant_runs(ctx, op.result, layout, count)
    results = []
    for i in range(count):
        if runs[i] < i:
            results.append(results[runs[i]])
        else:
            results.append(rule(ctx, op, [registers[i] for registers in operand_registers]))
    return results


def constant_runs(ctx, value, layout, count: int) -> list:
    """For each of a thread's ``count`` registers of ``value`` in ``layout``, the first
    register holding the same value by axis info's constancy (runs of equal values aligned
    on multiples of it): registers whose offsets from the thread's base fall in one block
    of ``run_width`` along every axis."""
    unchanged = list(range(count))
    info = ctx.infos.get(value)
    shape = value.type.shape
    if info is None or not shape or len(info.constancy) != len(shape) \
            or all(c == 1 for c in info.constancy) or not isinstance(layout, Layout) \
            or not isinstance(layout.blocked, Blocked):
        return unchanged
    distribution = ctx.threads.distribution(layout, shape)
    slots = distribution.slots()
    if len(slots) != count:
        return unchanged
    # Per parent axis (a slice's removed axes hold one offset, 0): the width of a run.
    widths = [1] * layout.blocked.rank
    for d in range(len(shape)):
        axis = layout.parent_axis(d)
        widths[axis] = run_width(layout.blocked, axis, shape[d], info.constancy[d])
    first = {}
    return [first.setdefault(tuple(distribution.slot_offsets[a][slot[a]] // widths[a]
                                   for a in range(layout.blocked.rank)), index)
            for index, slot in enumerate(slots)]


def run_width(blocked, axis: int, size: int, constancy: int) -> int:
    """A width such that a thread's elements along ``axis`` whose offsets (from its base)
    agree when divided by it are in one run of ``constancy`` equal values.

    The base is a multiple of min(size per thread, extent) and the offsets ``r * tile +
    s`` (``Blocked.slot_offsets``), so elements within a block of gcd(constancy, that)
    share a run. Where the threads and warps tile the axis without wrapping (base + s <
    tile) and the runs are whole tiles, the element at offset ``o`` lies in run
    ``o // constancy`` whatever the thread: liger's mhc pre-mix masks each of a thread's 8
    rows of a [32, 128] tile with ``n_offs < N``, one run of 32 rows; computed per row, 8
    predicates a thread (112 registers; Triton, which keeps one, 64)."""
    tile = blocked.tile(axis)
    if tile <= size and constancy % tile == 0:
        return constancy
    return math.gcd(constancy, min(blocked.size_per_thread[axis], size))
