"""A producer warp for a TMA-pipelined loop (``tl.range(..., warp_specialize=True)``,
sm_90).

Without it every warp computes and one thread of the CTA issues the copies, after a CTA
barrier that tells it every warp is done with the stage it refills: the copies run one
trip's worth of barrier behind the tensor cores. Here one more warp (warp ``num_warps``)
only copies: it runs the loop's trips itself, each trip waiting until the compute warps
are done with the stage (an mbarrier each warp arrives on when its wgmma that read the
stage is retired), then arming the stage's tile mbarrier and issuing the TMA copies. The
compute warps only wait for the tiles, compute, and arrive; no CTA barrier per trip.
CUTLASS's Hopper kernels are built this way.

In: the loop ``passes.pipeline`` rewrites for TMA, when it is in the kernel's top-level
body, its dots leave their wgmma groups in flight (one dot waiting for the previous trip's
group, or several and one wait after the last) and it copies tiles whose coordinates only
the induction variable and values from before the loop make. Out (kir's "producer
warp" ops): ``producer_warp`` (int1: this thread is in the producer warp), an ``if`` on
it whose then-branch is the producer's ``for`` and ``warp_exit``, then
``consumers_only`` (the CTA barriers after it are the compute warps' alone), and in the
compute loop ``tma_consumed`` after the dot.
"""
from __future__ import annotations

from ..ir import kir
from ..ir import types as T
from ..ir.types import BlockType
from .rewrite import constant, new_op

SCALAR_INT = BlockType(T.int32)
FLAG = BlockType(T.int1)


def qualifies(loop, loads) -> bool:
    """Are the loads' coordinates made by the induction variable and values from before
    the loop only (so the producer can compute any trip's)?"""
    body = loop.regions[0]
    induction = body.args[0]
    inside = {id(op) for op in kir.walk(body.body)}

    def made_outside(value, seen) -> bool:
        if value is induction or id(value) in seen:
            return True
        seen.add(id(value))
        owner = value.owner
        if owner is None or id(owner) not in inside:
            return value not in body.args
        if owner.opcode not in kir.PURE_OPS or owner.regions:
            return False
        return all(made_outside(operand, seen) for operand in owner.operands)
    return all(made_outside(v, set()) for load in loads
               for v in kir.descriptor_operands(load)[3])


def producer_ops(copies, start, end, step, index_type, number: int, stages: int,
                 groups: int, num_warps: int, pair=None) -> list:
    """The fork before the compute loop: the producer warp's loop over every trip, then
    its exit; ``copies(mapping, trip, stage)`` gives one trip's copy ops."""
    role = new_op("producer_warp", [], FLAG, num_warps=num_warps)
    trip = kir.Value(index_type, hint_name="trip")
    stage = kir.Value(SCALAR_INT, hint_name="stage")
    phase = kir.Value(SCALAR_INT, hint_name="phase")
    ops = []
    # From the trip S on, the stage was read S trips ago: wait until every warp is done.
    count = constant(stages, index_type.element)
    span = new_op("mul", [step, count.result], index_type)
    refill_start = new_op("add", [start, span.result], index_type)
    refill = new_op("cmp", [trip, refill_start.result], FLAG, predicate="ge")
    ops += [count, span, refill_start, refill]
    waited = [stage, phase, refill.result] + ([pair.result] if pair is not None else [])
    ops.append(new_op("tma_produce_wait", waited, None, loop=number, stages=stages,
                      groups=groups, num_warps=num_warps))
    ops += copies({}, trip, stage)
    one, wrap = constant(1, T.int32), constant(stages, T.int32)
    following = new_op("add", [stage, one.result], SCALAR_INT)
    past = new_op("cmp", [following.result, wrap.result], FLAG, predicate="ge")
    zero = constant(0, T.int32)
    stage_after = new_op("select", [past.result, zero.result, following.result], SCALAR_INT)
    flipped = new_op("xor", [phase, one.result], SCALAR_INT)
    phase_after = new_op("select", [past.result, flipped.result, phase], SCALAR_INT)
    ops += [one, wrap, following, past, zero, stage_after, flipped, phase_after,
            kir.Op("yield", [stage_after.result, phase_after.result], None)]
    initial_stage, initial_phase = constant(0, T.int32), constant(0, T.int32)
    results = [kir.Value(SCALAR_INT), kir.Value(SCALAR_INT)]
    loop = kir.Op("for", [start, end, step, initial_stage.result, initial_phase.result], None,
                  {"direction": "up", "producer": number},
                  regions=[kir.Region([trip, stage, phase], ops)], results=results)
    for value in results:
        value.owner = loop
    then = [initial_stage, initial_phase, loop, new_op("warp_exit", [], None),
            kir.Op("yield", [], None)]
    fork = kir.Op("if", [role.result], None, {},
                  regions=[kir.Region([], then), kir.Region([], [kir.Op("yield", [], None)])])
    return [role, fork, new_op("consumers_only", [], None, num_warps=num_warps)]


def consumed_op(stage, induction, start, number: int, stages: int, groups: int) -> list:
    """After the dot of a trip past the first: each compute warp is done with the stage
    the previous trip read (its wgmma retired by the dot's wait)."""
    later = new_op("cmp", [induction, start], FLAG, predicate="ne")
    return [later, new_op("tma_consumed", [stage, later.result], None, loop=number,
                          stages=stages, groups=groups)]
