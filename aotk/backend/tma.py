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


def consumed_barrier_address(ctx, op, stage):
    """Address (i32) of the stage's mbarrier the compute warps arrive on when done with it
    (``passes.warp_specialize``): after the groups' mbarriers."""
    return _barrier_address(ctx, op, stage, op.attrs["groups"])


def pair_free_address(ctx, op, stage):
    """Address (i32) of the stage's mbarrier the other CTA's producer arrives on when its
    compute warps are done with the stage (``passes.multicast``): after the consumed ones."""
    return _barrier_address(ctx, op, stage, op.attrs["groups"] + 1)


def pair_words_address(ctx, op):
    """Address (i32) of the words the CTAs of a pair compare: after the pair's mbarriers."""
    return _barrier_address(ctx, op, ir.Constant(I32, 0), op.attrs["groups"] + 2)


def cluster_rank(b):
    """This CTA's rank in its cluster (i32)."""
    return inline_asm(b, "mov.u32 $0, %cluster_ctarank;", "=r", [], I32)


def cluster_size(b):
    """How many CTAs its cluster has (i32): 1 where the launch gave none."""
    return inline_asm(b, "mov.u32 $0, %cluster_nctarank;", "=r", [], I32)


def peer_address(b, address):
    """The other CTA's shared::cluster address of this CTA's ``address`` (a pair)."""
    peer = b.xor(cluster_rank(b), ir.Constant(I32, 1))
    return inline_asm(b, "mapa.shared::cluster.u32 $0, $1, $2;", "=r,r,r", [address, peer], I32)


def opaque_tid(b):
    """``tid.x`` read where LLVM does not know its range: the compute warps' ``tid``
    carries [0, 32 * num_warps), which a producer warp's threads are outside of."""
    return inline_asm(b, "mov.u32 $0, %tid.x;", "=r", [], I32, side_effect=False)


def elected_thread(ctx, in_range=None, thread: int = 0):
    """Thread ``thread`` of the CTA, 0 by default (and ``in_range``, an i1, when given)."""
    b = ctx.builder
    tid = ctx.threads.tid if thread == 0 else opaque_tid(b)
    first = b.icmp_unsigned("==", tid, ir.Constant(I32, thread))
    return b.and_(first, in_range) if in_range is not None else first


@lowering("tma_init")
def lower_tma_init(ctx, op):
    b = ctx.builder
    ctx.shared.begin_use()
    proxy_fence(b)
    with b.if_then(elected_thread(ctx)):
        for address in _every_barrier(ctx, op):
            inline_asm(b, "mbarrier.init.shared::cta.b64 [$0], 1;", "r", [address])
        consumers = op.attrs.get("consumers")
        for stage in range(op.attrs["stages"] if consumers else 0):
            inline_asm(b, f"mbarrier.init.shared::cta.b64 [$0], {consumers};", "r",
                       [consumed_barrier_address(ctx, op, ir.Constant(I32, stage))])
        for stage in range(op.attrs["stages"] if op.attrs.get("pair") else 0):
            inline_asm(b, "mbarrier.init.shared::cta.b64 [$0], 1;", "r",
                       [pair_free_address(ctx, op, ir.Constant(I32, stage))])
        inline_asm(b, "fence.mbarrier_init.release.cluster;", "", [])
    ctx.shared.barrier()


@lowering("tma_expect")
def lower_tma_expect(ctx, op):
    b = ctx.builder
    stage = scalar_i32(ctx, op.operands[0])
    (in_range,) = ctx.regs(op.operands[1], SCALAR)
    with b.if_then(elected_thread(ctx, in_range, op.attrs.get("elected", 0))):
        inline_asm(b, "mbarrier.arrive.expect_tx.shared::cta.b64 _, [$0], $1;", "r,r",
             [_barrier_address(ctx, op, stage), ir.Constant(I32, op.attrs["bytes"])])


@lowering("tma_copy")
def lower_tma_copy(ctx, op):
    b = ctx.builder
    pair_bit = op.attrs.get("pair_bit")
    operands = op.operands if pair_bit is None else op.operands[:-1]
    *offsets, stage = (scalar_i32(ctx, v) for v in operands[:-1])
    (in_range,) = ctx.regs(operands[-1], SCALAR)
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
    with b.if_then(elected_thread(ctx, in_range, op.attrs.get("elected", 0))):
        shared_root = b.ptrtoint(ctx.shared.stage_pointer(ir.Constant(I32, 0)), I32)
        slot = b.add(shared_root, staged.stage_base(b, stage))
        barrier = _barrier_address(ctx, op, stage)
        tensor_map = ctx.tensor_map_addresses[op.attrs["tensor_map"]]
        if pair_bit is not None and panels % 2 == 0:
            # Shared with the other CTA of the pair: each copies its half of the panels
            # (rank 0 the first) into both, the same offsets (mbarriers too) in each.
            word = scalar_i32(ctx, op.operands[-1])
            shared = b.icmp_unsigned("!=", b.and_(word, ir.Constant(I32, 1 << pair_bit)),
                                     ir.Constant(I32, 0))
            with b.if_else(shared) as (multicast, alone):
                with multicast:
                    second_half = b.icmp_unsigned("!=", cluster_rank(b), ir.Constant(I32, 0))
                    first = b.select(second_half, ir.Constant(I32, panels // 2),
                                     ir.Constant(I32, 0))
                    both = copy[:-1].replace("::bytes ", "::bytes.multicast::cluster ") + \
                        f", ${3 + rank};"
                    for half_panel in range(panels // 2):
                        _copy_panel(b, both, constraints + ",h", slot,
                                    b.add(first, ir.Constant(I32, half_panel)), rows, column,
                                    box_columns, tensor_map, outer, barrier,
                                    [ir.Constant(ir.IntType(16), 3)])
                with alone:
                    for panel in range(panels):
                        _copy_panel(b, copy, constraints, slot, ir.Constant(I32, panel), rows,
                                    column, box_columns, tensor_map, outer, barrier)
            return
        for panel in range(panels):
            _copy_panel(b, copy, constraints, slot, ir.Constant(I32, panel), rows, column,
                        box_columns, tensor_map, outer, barrier)


def _copy_panel(b, copy, constraints, slot, panel, rows, column, box_columns, tensor_map,
                outer, barrier, extra=()):
    """Panel ``panel`` (i32) of the slot holds columns [panel * box_columns, (panel + 1) *
    box_columns) of the tile."""
    destination = b.add(slot, b.mul(panel, ir.Constant(I32, rows * SWIZZLE_BYTES)))
    first_column = b.add(column, b.mul(panel, ir.Constant(I32, box_columns)))
    inline_asm(b, copy, constraints,
               [destination, tensor_map, first_column, *outer, barrier, *extra])


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
        for stage in range(op.attrs["stages"] if op.attrs.get("consumers") else 0):
            inline_asm(b, "mbarrier.inval.shared::cta.b64 [$0];", "r",
                       [consumed_barrier_address(ctx, op, ir.Constant(I32, stage))])
        for stage in range(op.attrs["stages"] if op.attrs.get("pair") else 0):
            inline_asm(b, "mbarrier.inval.shared::cta.b64 [$0];", "r",
                       [pair_free_address(ctx, op, ir.Constant(I32, stage))])


def tensor_map_parameters(ctx, first_argument: int):
    """Names the kernel's tensor-map arguments and records their generic addresses (i64)."""
    addresses = []
    for index, arg in enumerate(ctx.kernel.args[first_argument:]):
        arg.name = tensor_map_argument(index)
        addresses.append(ctx.builder.ptrtoint(arg, I64, name=arg.name + "_addr"))
    ctx.tensor_map_addresses = addresses
