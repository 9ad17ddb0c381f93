"""Where a pipelined loop's trip waits for its wgmma groups (``passes.pipeline``).

In: the rewritten loop body's ops and its dots. Out, in place:

* ``wait_after_the_last_dot``: several dots a trip leave their groups in flight
  (``wgmma_deferred``); one ``wgmma_wait`` after the last (pending: one group per dot)
  retires the previous trip's, then a barrier before the copies refill their stages (or,
  with a producer warp, the compute warps' arrivals);
* ``retire_deferred``: a dot whose result only the next trip reads leaves its group in
  flight until the next trip's first dot that waits, whose ``wgmma_wait`` retires both.
"""
from __future__ import annotations

from ..ir import kir
from .rewrite import new_op


def retire_deferred(region, shape) -> None:
    """Makes the deferred dots and the retiring one leave their groups in flight, and puts
    the retiring dot's wait after it: ``wgmma_wait`` over its result and the deferred dots'
    carried values, whose users in the body read the wait's results instead."""
    retiring = shape.retiring
    for dot in [retiring] + [dot for dot, _ in shape.deferred]:
        dot.attrs["wgmma_deferred"] = True
    waited = [retiring.result] + [region.args[1 + index] for _, index in shape.deferred]
    results = [kir.Value(value.type, hint_name=value.hint_name) for value in waited]
    wait = kir.Op("wgmma_wait", waited, None, {"pending": 0}, results=results)
    for result in results:
        result.owner = wait
    place = next(i for i, o in enumerate(region.body) if o is retiring) + 1
    region.body.insert(place, wait)
    renamed = dict(zip(waited, results))
    for op in kir.walk(region.body[place + 1:]):
        op.operands = [renamed.get(value, value) for value in op.operands]


def wait_after_the_last_dot(ops: list, dots: list, terminator, after=None) -> None:
    """The dots of a trip leave their groups in flight (``wgmma_deferred``); after the last,
    in ``ops``, a ``wgmma_wait`` (pending: one group per dot) over their results, which the
    yield then takes, and a ``debug_barrier`` (or the ops ``after``)."""
    for dot in dots:
        dot.attrs["wgmma_deferred"] = True
    waited = [dot.result for dot in dots]
    results = [kir.Value(value.type, hint_name=value.hint_name) for value in waited]
    wait = kir.Op("wgmma_wait", waited, None, {"pending": len(dots)}, results=results)
    for result in results:
        result.owner = wait
    place = next(i for i, op in enumerate(ops) if op is dots[-1]) + 1
    ops[place:place] = [wait] + (after if after is not None else
                                 [new_op("debug_barrier", [], None)])
    renamed = dict(zip(waited, results))
    terminator.operands = [renamed.get(value, value) for value in terminator.operands]
