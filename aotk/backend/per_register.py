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
    register holding the same value by axis info's constancy. A thread's elements along an
    axis start at a multiple of min(size per thread, extent) (its base) and sit at fixed
    offsets from it, so registers whose offsets share a block of gcd(constancy, that) are
    in one run of equal values."""
    unchanged = list(range(count))
    info = ctx.infos.get(value)
    shape = value.type.shape
    if info is None or not shape or len(info.constancy) != len(shape) \
            or all(c == 1 for c in info.constancy) or not isinstance(layout, Layout) \
            or layout.sliced or not isinstance(layout.blocked, Blocked):
        return unchanged
    distribution = ctx.threads.distribution(layout, shape)
    slots = distribution.slots()
    if len(slots) != count:
        return unchanged
    widths = [math.gcd(info.constancy[d], min(layout.blocked.size_per_thread[d], shape[d]))
              for d in range(len(shape))]
    first = {}
    return [first.setdefault(tuple(distribution.slot_offsets[d][slot[d]] // widths[d]
                                   for d in range(len(shape))), index)
            for index, slot in enumerate(slots)]
