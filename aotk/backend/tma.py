"""Lowering of the TMA ops of a pipelined loop (``passes.pipeline`` with tensor descriptors):
``tma_init``, ``tma_expect``, ``tma_copy``, ``tma_wait``, ``tma_release``, and the kernel's
tensor-map parameters.

In: the ops with their scalar operands; the loop's stages (``backend.pipeline.StagedBuffer``)
and mbarriers (8 bytes per stage, after the stages: ``plan_buffers``). Out:

* the kernel takes each tensor map as a 128-byte ``.param .align 64`` (a grid constant:
  LLVM passes its generic address, ``cvta.param``, which TMA instructions accept);
* ``tma_init``: thread 0 runs ``mbarrier.init`` (count 1) per stage and
  ``fence.mbarrier_init``; every thread first fences its earlier generic-proxy use of those
  bytes against the async proxy that TMA writes through; then a CTA barrier;
* ``tma_expect``: thread 0 runs ``mbarrier.arrive.expect_tx`` with the stage's bytes (one
  arrival: the count the barrier was made with), so the phase completes when they land;
* ``tma_copy``: thread 0 issues one ``cp.async.bulk.tensor.2d`` per 128-byte panel of the
  tile, coordinates (column, row) innermost first, each completing bytes on the mbarrier;
* ``tma_wait``: every thread spins on ``mbarrier.try_wait.parity`` (which also makes the
  copied bytes visible to it);
* ``tma_release``: a CTA barrier, then thread 0 invalidates the mbarriers.
"""
from __future__ import annotations

import re

import llvmlite.ir as ir

from ..passes.layouts import SCALAR
from ..passes.pipeline import MBARRIER_BYTES
from ..passes.tensor_maps import SWIZZLE_BYTES, TENSOR_MAP_ALIGNMENT, TENSOR_MAP_BYTES
from .llvm_types import I32, I64
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


def _asm(builder, text, constraints, args):
    function_type = ir.FunctionType(ir.VoidType(), [a.type for a in args])
    builder.call(ir.InlineAsm(function_type, text, constraints, side_effect=True), args)


def _scalar(lowering, value, width=I32):
    (register,) = lowering.regs(value, SCALAR)
    if register.type != width:
        register = lowering.builder.trunc(register, width)
    return register


def _barrier_address(lowering, op, stage):
    """Shared-window address (i32) of the stage's mbarrier."""
    b = lowering.builder
    base = lowering.mbarrier_offsets[op.attrs["loop"]]
    offset = b.add(ir.Constant(I32, base), b.mul(stage, ir.Constant(I32, MBARRIER_BYTES)))
    return b.ptrtoint(lowering.pipeline_pointer(offset), I32)


def _elected(lowering, in_range=None):
    """Thread 0 of the CTA (and ``in_range``, an i1, when given)."""
    b = lowering.builder
    first = b.icmp_unsigned("==", lowering.tid, ir.Constant(I32, 0))
    return b.and_(first, in_range) if in_range is not None else first


def lower_tma_init(lowering, op):
    b = lowering.builder
    lowering.begin_shared_use()
    proxy_fence(b)
    with b.if_then(_elected(lowering)):
        for stage in range(op.attrs["stages"]):
            address = _barrier_address(lowering, op, ir.Constant(I32, stage))
            _asm(b, "mbarrier.init.shared::cta.b64 [$0], 1;", "r", [address])
        _asm(b, "fence.mbarrier_init.release.cluster;", "", [])
    lowering.barrier()


def lower_tma_expect(lowering, op):
    b = lowering.builder
    stage = _scalar(lowering, op.operands[0])
    (in_range,) = lowering.regs(op.operands[1], SCALAR)
    with b.if_then(_elected(lowering, in_range)):
        _asm(b, "mbarrier.arrive.expect_tx.shared::cta.b64 _, [$0], $1;", "r,r",
             [_barrier_address(lowering, op, stage), ir.Constant(I32, op.attrs["bytes"])])


def lower_tma_copy(lowering, op):
    b = lowering.builder
    row, column, stage = (_scalar(lowering, v) for v in op.operands[:3])
    (in_range,) = lowering.regs(op.operands[3], SCALAR)
    staged = lowering.staged_buffers[op.attrs["buffer"]]
    rows, box_columns = op.attrs["box"]
    assert staged.tile.width == SWIZZLE_BYTES and staged.shape[0] == rows
    panels = staged.shape[1] // box_columns
    copy = ("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes "
            "[$0], [$1, {$2, $3}], [$4];")
    with b.if_then(_elected(lowering, in_range)):
        shared_root = b.ptrtoint(lowering.pipeline_pointer(ir.Constant(I32, 0)), I32)
        slot = b.add(shared_root, staged.stage_base(b, stage))
        barrier = _barrier_address(lowering, op, stage)
        tensor_map = lowering.tensor_map_addresses[op.attrs["tensor_map"]]
        for panel in range(panels):
            # Panel p of the slot holds columns [p * box_columns, (p + 1) * box_columns).
            destination = b.add(slot, ir.Constant(I32, panel * rows * SWIZZLE_BYTES))
            first_column = b.add(column, ir.Constant(I32, panel * box_columns))
            _asm(b, copy, "r,l,r,r,r", [destination, tensor_map, first_column, row, barrier])


def lower_tma_wait(lowering, op):
    b = lowering.builder
    stage, phase = (_scalar(lowering, v) for v in op.operands)
    # Labels inside braces are local to that scope, so the asm may appear many times.
    wait = ("{ .reg .pred done; wait: mbarrier.try_wait.parity.shared::cta.b64 done, [$0], $1; "
            "@!done bra wait; }")
    _asm(b, wait, "r,r", [_barrier_address(lowering, op, stage), phase])


def lower_tma_release(lowering, op):
    b = lowering.builder
    lowering.barrier()
    with b.if_then(_elected(lowering)):
        for stage in range(op.attrs["stages"]):
            address = _barrier_address(lowering, op, ir.Constant(I32, stage))
            _asm(b, "mbarrier.inval.shared::cta.b64 [$0];", "r", [address])


TMA_LOWERING = {"tma_init": lower_tma_init, "tma_expect": lower_tma_expect,
                "tma_copy": lower_tma_copy, "tma_wait": lower_tma_wait,
                "tma_release": lower_tma_release}


def tensor_map_parameters(lowering, first_argument: int):
    """Names the kernel's tensor-map arguments and records their generic addresses (i64)."""
    addresses = []
    for index, arg in enumerate(lowering.kernel.args[first_argument:]):
        arg.name = tensor_map_argument(index)
        addresses.append(lowering.builder.ptrtoint(arg, I64, name=arg.name + "_addr"))
    lowering.tensor_map_addresses = addresses
