"""Lowering of the TMA ops of a pipelined loop (``passes.pipeline`` with tensor descriptors):
``tma_init``, ``tma_expect``, ``tma_copy``, ``tma_wait``, ``tma_release``, and the kernel's
tensor-map parameters; ``elected_thread`` and ``scalar_i32`` for the other TMA users
(``backend.descriptors``).

In: the ops with their scalar operands; the loop's stages (``backend.pipeline.StagedBuffer``)
and mbarriers (8 bytes each, after the stages, group after group, each group's one per
stage: ``plan_buffers``). Out:

* the kernel takes each tensor map as a 128-byte ``.param .align 64`` (a grid constant:
  LLVM passes its generic address, ``cvta.param``, which TMA instructions accept);
* ``tma_init``: thread 0 runs ``mbarrier.init`` (count 1) per group and stage and
  ``fence.mbarrier_init``; every thread first fences its earlier generic-proxy use of those
  bytes against the async proxy that TMA writes through; then a CTA barrier;
* ``tma_expect``: thread 0 runs ``mbarrier.arrive.expect_tx`` with the group's bytes (one
  arrival: the count the barrier was made with), so the phase completes when they land;
* ``tma_copy``: thread 0 issues one ``cp.async.bulk.tensor.<rank>d`` per 128-byte panel of
  the tile, coordinates (column, row, leading dims) innermost first, each completing bytes
  on the group's mbarrier;
* ``tma_wait``: every thread spins on ``mbarrier.try_wait.parity`` of the group's mbarrier
  (which also makes the copied bytes visible to it);
* ``tma_release``: a CTA barrier, then thread 0 invalidates the mbarriers.
"""
from __future__ import annotations

import re

import llvmlite.ir as ir

from ..passes.layouts import SCALAR
from ..passes.pipeline_shape import MBARRIER_BYTES
from ..passes.tensor_maps import SWIZZLE_BYTES, TENSOR_MAP_ALIGNMENT, TENSOR_MAP_BYTES
from .llvm_types import I32, I64, inline_asm
from .registry import lowering
from .wgmma import proxy_fence



def tensor_map_argument(index: int) -> str:
    return f"tensor_map_{index}"


def grid_constant_params(llvm_text: str, count: int) -> str:
    """Makes the kernel's tensor-map arguments 128-byte by-value grid constants: the text
    llvmlite cannot spell (``byval`` of an opaque pointer, the ``nvvm.grid_constant``
    attribute)."""
    for index in range(count):
        name = tensor_map_argument(index)
        llvm_text, found = re.subn(
            rf'ptr %"?{name}"?([,)])',
            f'ptr byval([{TENSOR_MAP_BYTES} x i8]) align {TENSOR_MAP_ALIGNMENT} '
            f'"nvvm.grid_constant" %"{name}"\\1', llvm_text, count=1)
        assert found == 1, name
    return llvm_text


def scalar_i32(ctx, value, width=I32):
    """The register of scalar ``value``, truncated to ``width`` where wider."""
    (register,) = ctx.regs(value, SCALAR)
    if register.type != width:
        register = ctx.builder.trunc(register, width)
    return register


def _barrier_address(ctx, op, stage, group=None):
    """Shared-window address (i32) of the stage's mbarrier of ``group`` (default: the op's
    ``group``): a group's mbarriers are consecutive, one per stage."""
    b = ctx.builder
    group = op.attrs["group"] if group is None else group
    base = ctx.pipeline.mbarrier_offsets[op.attrs["loop"]] + \
        group * op.attrs["stages"] * MBARRIER_BYTES
    offset = b.add(ir.Constant(I32, base), b.mul(stage, ir.Constant(I32, MBARRIER_BYTES)))
    return b.ptrtoint(ctx.shared.stage_pointer(offset), I32)


def _every_barrier(ctx, op):
    """The addresses of all the loop's mbarriers (every group's, every stage's)."""
    return [_barrier_address(ctx, op, ir.Constant(I32, stage), group)
            for group in range(op.attrs["groups"])
            for stage in range(op.attrs["stages"])]


def elected_thread(ctx, in_range=None):
    """Thread 0 of the CTA (and ``in_range``, an i1, when given)."""
    b = ctx.builder
    first = b.icmp_unsigned("==", ctx.threads.tid, ir.Constant(I32, 0))
    return b.and_(first, in_range) if in_range is not None else first


@lowering("tma_init")
def lower_tma_init(ctx, op):
    b = ctx.builder
    ctx.shared.begin_use()
    proxy_fence(b)
    with b.if_then(elected_thread(ctx)):
        for address in _every_barrier(ctx, op):
            inline_asm(b, "mbarrier.init.shared::cta.b64 [$0], 1;", "r", [address])
        inline_asm(b, "fence.mbarrier_init.release.cluster;", "", [])
    ctx.shared.barrier()


@lowering("tma_expect")
def lower_tma_expect(ctx, op):
    b = ctx.builder
    stage = scalar_i32(ctx, op.operands[0])
    (in_range,) = ctx.regs(op.operands[1], SCALAR)
    with b.if_then(elected_thread(ctx, in_range)):
        inline_asm(b, "mbarrier.arrive.expect_tx.shared::cta.b64 _, [$0], $1;", "r,r",
             [_barrier_address(ctx, op, stage), ir.Constant(I32, op.attrs["bytes"])])


@lowering("tma_copy")
def lower_tma_copy(ctx, op):
    b = ctx.builder
    *offsets, stage = (scalar_i32(ctx, v) for v in op.operands[:-1])
    (in_range,) = ctx.regs(op.operands[-1], SCALAR)
    staged = ctx.pipeline.staged[op.attrs["buffer"]]
    rows, box_columns = op.attrs["box"]
    assert staged.tile.width == SWIZZLE_BYTES and staged.shape[0] == rows
    panels = staged.shape[1] // box_columns
    rank = len(offsets)
    # Coordinates innermost first: the column, the row, then the leading (size-1) dims.
    coordinates = ", ".join(f"${2 + i}" for i in range(rank))
    copy = (f"cp.async.bulk.tensor.{rank}d.shared::cluster.global.mbarrier::complete_tx::bytes "
            f"[$0], [$1, {{{coordinates}}}], [${2 + rank}];")
    constraints = "r,l," + "r," * rank + "r"
    column, *outer = reversed(offsets)
    with b.if_then(elected_thread(ctx, in_range)):
        shared_root = b.ptrtoint(ctx.shared.stage_pointer(ir.Constant(I32, 0)), I32)
        slot = b.add(shared_root, staged.stage_base(b, stage))
        barrier = _barrier_address(ctx, op, stage)
        tensor_map = ctx.tensor_map_addresses[op.attrs["tensor_map"]]
        for panel in range(panels):
            # Panel p of the slot holds columns [p * box_columns, (p + 1) * box_columns).
            destination = b.add(slot, ir.Constant(I32, panel * rows * SWIZZLE_BYTES))
            first_column = b.add(column, ir.Constant(I32, panel * box_columns))
            inline_asm(b, copy, constraints,
                       [destination, tensor_map, first_column, *outer, barrier])


@lowering("tma_wait")
def lower_tma_wait(ctx, op):
    b = ctx.builder
    stage, phase = (scalar_i32(ctx, v) for v in op.operands)
    # Labels inside braces are local to that scope, so the asm may appear many times.
    wait = ("{ .reg .pred done; wait: mbarrier.try_wait.parity.shared::cta.b64 done, [$0], $1; "
            "@!done bra wait; }")
    inline_asm(b, wait, "r,r", [_barrier_address(ctx, op, stage), phase])


@lowering("tma_release")
def lower_tma_release(ctx, op):
    b = ctx.builder
    ctx.shared.barrier()
    with b.if_then(elected_thread(ctx)):
        for address in _every_barrier(ctx, op):
            inline_asm(b, "mbarrier.inval.shared::cta.b64 [$0];", "r", [address])


def tensor_map_parameters(ctx, first_argument: int):
    """Names the kernel's tensor-map arguments and records their generic addresses (i64)."""
    addresses = []
    for index, arg in enumerate(ctx.kernel.args[first_argument:]):
        arg.name = tensor_map_argument(index)
        addresses.append(ctx.builder.ptrtoint(arg, I64, name=arg.name + "_addr"))
    ctx.tensor_map_addresses = addresses
