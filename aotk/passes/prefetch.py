"""Register prefetch for loops that feed ``tl.dot``: the loads of trip i+1 are issued before
the dot of trip i, so their global-memory latency hides behind the tensor-core work.

In: a kir ``Function`` that the pass may edit (the compiler hands it a copy). Out: the same
function where each qualifying ``for`` loop is rewritten:

    before:  for i: a = load(pa(i, carried)); b = load(pb(...)); acc = dot(a, b, acc); ...
    after:   a0, b0 = the same loads for i = start, with the initial carried values
             for i, (..., a, b): <everything but the dots>
                                 a', b' = the loads for i + step, with the values this trip
                                          yields, masked by i + step < end
                                 acc = dot(a, b, acc)    (each dot, in body order)
                                 yield ..., a', b'

A loop qualifies when its step is positive at compile time, the operands of its dots are
loads of the body, seen directly or through size-1 reshapes and transposes, that nothing
else reads (``rewrite.dot_operand_loads``; a load may feed several dots, and is prefetched
once), the loads depend on nothing but pure ops, the induction variable and carried values,
each dot's result only feeds the yield, and the
body neither stores nor has nested regions (moving loads earlier must not reorder them with
writes), and the prefetched tiles cost each thread at most ``MAX_PREFETCH_BYTES`` of extra
registers: on the H200, 128x128x32 tiles with 8 warps (64 bytes) gained 12%, while larger
tiles spilled and lost 2-3x. Anything else is left as it is.
"""
from __future__ import annotations

from ..ir import kir
from ..ir import types as T
from ..ir.types import BlockType
from .rewrite import (clone_ops, dot_operand_loads, new_op, remove_unused_pure_ops,
                      upward_for_loops, users_of)


MAX_PREFETCH_BYTES = 64


def prefetch_dot_operands(function: kir.Function, num_warps: int) -> int:
    """Rewrites every qualifying loop; returns how many were rewritten."""
    count = 0
    budget = MAX_PREFETCH_BYTES * 32 * num_warps
    for block, loop in upward_for_loops(function):
        if _rewrite(block, loop, budget):
            count += 1
    return count


def _rewrite(parent: list, loop, budget: int) -> bool:
    region = loop.regions[0]
    ops = region.body
    terminator = region.terminator
    shape = dot_operand_loads(loop)
    if shape is None:
        return False
    dots, loads, slice_ops = shape.dots, shape.loads, shape.load_ops
    if sum(l.result.type.numel * l.result.element.itemsize for l in loads) > budget:
        return False
    users = users_of(ops)
    if any(users.get(dot.result) != [terminator] for dot in dots):
        return False
    # The next trip's loads are computed from what this trip yields, before the dots: they
    # cannot depend on a dot's own result.
    for arg, yielded in zip(region.args[1:], terminator.operands):
        for dot in dots:
            if yielded is dot.result and any(arg in o.operands for o in ops if o is not dot):
                return False

    induction, carried = region.args[0], region.args[1:]
    start, end, step = loop.operands[:3]
    inits = loop.operands[3:]

    # Trip 0's loads, before the loop.
    first = dict(zip([induction] + carried, [start] + inits))
    prologue = clone_ops(slice_ops, first)
    position = parent.index(loop)
    parent[position:position] = prologue
    initial = [first[l.result] for l in loads]

    # The next trip's loads, masked off past the end.
    current = [kir.Value(l.result.type, hint_name=f"{l.result.hint_name or 'operand'}_next")
               for l in loads]
    next_induction = new_op("add", [induction, step], induction.type)
    in_range = new_op("cmp", [next_induction.result, end], BlockType(T.int1), predicate="lt")
    following = dict(zip([induction] + carried,
                         [next_induction.result] + list(terminator.operands)))
    upcoming = clone_ops(slice_ops, following, in_range.result)
    moved = {id(o) for o in dots + loads}
    remaining = [o for o in ops if id(o) not in moved and o is not terminator]
    # The dots and the views between them and the loads read this trip's tiles.
    this_trip = {load.result: value for load, value in zip(loads, current)}
    for o in dots + shape.view_ops:
        o.operands[:] = [this_trip.get(v, v) for v in o.operands]
    terminator.operands.extend(following[l.result] for l in loads)
    region.body[:] = remaining + [next_induction, in_range] + upcoming + dots + [terminator]
    region.args.extend(current)
    for value in current:
        value.owner = None
    loop.operands.extend(initial)
    for load in loads:
        result = kir.Value(load.result.type)
        result.owner = loop
        loop.results.append(result)
    remove_unused_pure_ops(region.body)
    return True
