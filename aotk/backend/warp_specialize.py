"""Lowering of the producer-warp ops (``passes.warp_specialize``): ``producer_warp``,
``warp_exit``, ``consumers_only``, ``tma_produce_wait``, ``tma_consumed``. The producer's
``tma_expect`` / ``tma_copy`` (attribute ``elected``) and the per-stage mbarriers the
compute warps arrive on (initialized with the loop's, count ``consumers``) are in
``backend.tma``.

In: the ops with their scalar operands. Out:

* ``producer_warp``: ``tid >= 32 * num_warps`` (the warp after the compute warps);
* ``warp_exit``: ``exit``;
* ``consumers_only``: from here on the CTA barriers are ``bar.sync 1, 32 * num_warps``
  (the producer has left; a whole-CTA barrier would count it);
* ``tma_produce_wait``: with ``refill``, the producer's first lane spins on the stage's
  consumed mbarrier for the phase before this trip's (the compute warps arrived once per
  earlier use of the stage);
* ``tma_consumed``: with ``later``, lane 0 of each compute warp arrives on the consumed
  mbarrier of the stage the previous trip read (its wgmma retired by the dot's wait).
"""
from __future__ import annotations

import llvmlite.ir as ir

from ..passes.layouts import SCALAR
from .llvm_types import I32, inline_asm
from .registry import lowering
from .tma import (consumed_barrier_address, elected_thread, opaque_tid,
                  pair_free_address, peer_address, scalar_i32)


@lowering("producer_warp")
def lower_producer_warp(ctx, op):
    threads = ir.Constant(I32, 32 * op.attrs["num_warps"])
    return [[ctx.builder.icmp_unsigned(">=", opaque_tid(ctx.builder), threads)]]


@lowering("warp_exit")
def lower_warp_exit(ctx, op):
    inline_asm(ctx.builder, "exit;", "", [])


@lowering("consumers_only")
def lower_consumers_only(ctx, op):
    ctx.shared.barrier_threads = 32 * op.attrs["num_warps"]


_WAIT = ("{ .reg .pred done; wait: mbarrier.try_wait.parity.shared::cta.b64 done, [$0], $1; "
         "@!done bra wait; }")


@lowering("tma_produce_wait")
def lower_tma_produce_wait(ctx, op):
    b = ctx.builder
    stage, phase = (scalar_i32(ctx, v) for v in op.operands[:2])
    (refill,) = ctx.regs(op.operands[2], SCALAR)
    with b.if_then(elected_thread(ctx, refill, 32 * op.attrs["num_warps"])):
        parity = b.xor(phase, ir.Constant(I32, 1))
        inline_asm(b, _WAIT, "r,r", [consumed_barrier_address(ctx, op, stage), parity])
        if len(op.operands) > 3:   # a pair (``passes.multicast``)
            pair = scalar_i32(ctx, op.operands[3])
            with b.if_then(b.icmp_unsigned("!=", pair, ir.Constant(I32, 0))):
                # This CTA's side of the stage is free: tell the other producer, then wait
                # for its word (its copies write this CTA's stage too, and ours its).
                address = pair_free_address(ctx, op, stage)
                inline_asm(b, "mbarrier.arrive.shared::cluster.b64 _, [$0];", "r",
                           [peer_address(b, address)])
                inline_asm(b, _WAIT, "r,r", [address, parity])


@lowering("tma_consumed")
def lower_tma_consumed(ctx, op):
    b = ctx.builder
    stage = scalar_i32(ctx, op.operands[0])
    (later,) = ctx.regs(op.operands[1], SCALAR)
    lane = b.and_(ctx.threads.tid, ir.Constant(I32, 31))
    first_lane = b.icmp_unsigned("==", lane, ir.Constant(I32, 0))
    with b.if_then(b.and_(first_lane, later)):
        wrapped = b.icmp_unsigned("==", stage, ir.Constant(I32, 0))
        previous = b.select(wrapped, ir.Constant(I32, op.attrs["stages"] - 1),
                            b.sub(stage, ir.Constant(I32, 1)))
        inline_asm(b, "mbarrier.arrive.shared::cta.b64 _, [$0];", "r",
                   [consumed_barrier_address(ctx, op, previous)])
