"""Lowering of the descriptor ops that reach the backend: the ``descriptor_store``s kept for
TMA (``passes.tma_stores``; every other descriptor op is a pointer load or store by now,
``passes.descriptors``, or a pipelined loop's TMA copy, ``backend.tma``).

In: the store, its 2-d value in the registers of its layout, the tensor map's index. Out:
the threads write the tile into scratch shared memory in the 128B-swizzled panels a
``tma_copy`` fills (``backend.swizzle``), from the registers they hold it in (accumulator
fragments included: ``mma.store_tile``), fence the async proxy and meet at a barrier;
thread 0 then issues one ``cp.async.bulk.tensor`` store per panel (the hardware drops what
is outside the tensor, which is the store's definition), commits them as one bulk group
and waits until they have read the tile (``cp.async.bulk.wait_group.read``), so that the
next user of the scratch buffer, which starts with a barrier, cannot overwrite it early.

Two things the hardware does not do as the store is defined, both measured on the H200:
a box that starts before the tensor (a negative offset) stops the kernel with an illegal
instruction, although loads take such boxes; and a store writes whole 16-byte chunks, so
where a row of the tensor does not end on 16 bytes it overwrites the elements after the
row's end up to the next 16 bytes (Triton documents this as a caveat of its descriptor
stores, triton-lang/triton#11583). Both depend on the program's scalars only, so the whole
CTA takes one side of a branch once the tile is in shared memory: the TMA store where every
offset is >= 0 and the innermost extent is a whole number of 16 bytes, else the threads
copy the tile out 16 bytes at a time, each element stored where it falls inside the
tensor (a cold path where shapes are multiples of 8 fp16 elements and tiles start inside).
The copy reads only shared memory and the thread index: storing from the registers
instead kept the tile's index math live beside the TMA path (liger's SwiGLU forward: 254
registers instead of 168).
"""
from __future__ import annotations

import llvmlite.ir as ir

from ..ir.kir import descriptor_operands
from ..passes.layouts import SCALAR
from ..passes.tensor_maps import SWIZZLE_BYTES
from .llvm_types import I32, I64, inline_asm, llvm_type
from .memory import emit_store
from .mma import store_tile
from .registry import lowering, scratch
from .swizzle import CHUNK_BYTES, SWIZZLE_ATOM_BYTES, tile_of
from .tma import elected_thread, scalar_i32
from .wgmma import proxy_fence


@scratch("descriptor_store")
def tma_store_bytes(plan, op) -> int:
    """The stored tile, starting on a swizzle atom above the floor."""
    return SWIZZLE_ATOM_BYTES + tile_of(op.operands[-1]).bytes


@lowering("descriptor_store")
def lower_tma_store(ctx, op):
    b = ctx.builder
    value = op.operands[-1]
    tile = tile_of(value)
    assert tile.width == SWIZZLE_BYTES, "a TMA store's rows are whole 128-byte panels"
    shared = ctx.shared
    above_floor = -shared.floor % SWIZZLE_ATOM_BYTES
    shared.begin_use()
    store_tile(ctx, value, above_floor, tile.element_offset)
    proxy_fence(b)
    shared.barrier()
    _, shapes, _, offsets, _ = descriptor_operands(op)
    zero = ir.Constant(I64, 0)
    row_bytes = b.mul(_wide(ctx, shapes[-1]), ir.Constant(I64, value.element.itemsize))
    as_defined = b.icmp_unsigned("==", b.and_(row_bytes, ir.Constant(I64, CHUNK_BYTES - 1)),
                                 zero)
    for offset in offsets:
        as_defined = b.and_(as_defined, b.icmp_signed(">=", _wide(ctx, offset), zero))
    with b.if_else(as_defined) as (tma, elements):
        with tma:
            _bulk_store(ctx, op, tile, above_floor)
        with elements:
            _copy_out(ctx, op, tile, above_floor)


def _wide(ctx, value):
    """Scalar ``value``'s register as i64 (sign-extended)."""
    (register,) = ctx.regs(value, SCALAR)
    return ctx.builder.sext(register, I64) if register.type.width < 64 else register


def _bulk_store(ctx, op, tile, above_floor: int):
    """Thread 0: one TMA store per 128-byte panel of the tile, then waits for their reads."""
    b = ctx.builder
    shared = ctx.shared
    _, _, _, offsets, value = descriptor_operands(op)
    rank = len(offsets)
    column, *outer = reversed([scalar_i32(ctx, v) for v in offsets])
    # Coordinates innermost first: the column, the row, then the leading (size-1) dims.
    coordinates = ", ".join(f"${1 + i}" for i in range(rank))
    store = (f"cp.async.bulk.tensor.{rank}d.global.shared::cta.bulk_group "
             f"[$0, {{{coordinates}}}], [${1 + rank}];")
    constraints = "l," + "r," * rank + "r"
    box_columns = SWIZZLE_BYTES // value.element.itemsize
    with b.if_then(elected_thread(ctx)):
        shared_root = b.ptrtoint(shared.stage_pointer(ir.Constant(I32, 0)), I32)
        slot = b.add(shared_root, ir.Constant(I32, shared.floor + above_floor))
        tensor_map = ctx.tensor_map_addresses[op.attrs["tensor_map"]]
        for panel in range(tile.columns // box_columns):
            source = b.add(slot, ir.Constant(I32, panel * tile.rows * SWIZZLE_BYTES))
            first_column = b.add(column, ir.Constant(I32, panel * box_columns))
            inline_asm(b, store, constraints, [tensor_map, first_column, *outer, source])
        inline_asm(b, "cp.async.bulk.commit_group;", "", [])
        inline_asm(b, "cp.async.bulk.wait_group.read 0;", "", [])


def _copy_out(ctx, op, tile, above_floor: int):
    """Every thread: chunks tid, tid + threads, ... of the tile's 16-byte chunks (row-major)
    from shared memory to the tensor, each element stored where it falls inside it."""
    b = ctx.builder
    base, shapes, strides, offsets, value = descriptor_operands(op)
    element = value.element
    per_chunk = CHUNK_BYTES // element.itemsize
    chunks_per_row = tile.columns // per_chunk
    zero = ir.Constant(I64, 0)
    (address,) = ctx.regs(base, SCALAR)
    # The leading dimensions' block is 1: their offsets pick one slice, inside or not.
    first = zero
    inside = ir.Constant(ir.IntType(1), 1)
    for offset, shape, stride in zip(offsets[:-2], shapes[:-2], strides[:-2]):
        at = _wide(ctx, offset)
        inside = b.and_(inside, b.and_(b.icmp_signed(">=", at, zero),
                                       b.icmp_signed("<", at, _wide(ctx, shape))))
        first = b.add(first, b.mul(at, _wide(ctx, stride)))
    row_offset, column_offset = (_wide(ctx, v) for v in offsets[-2:])
    rows, columns = (_wide(ctx, v) for v in shapes[-2:])
    row_stride = _wide(ctx, strides[-2])
    memory_type = llvm_type(element)
    chunk_type = ir.VectorType(memory_type, per_chunk)
    before = b.block
    header = b.append_basic_block("copy_out")
    body = b.append_basic_block("copy_out_chunk")
    done = b.append_basic_block("copy_out_done")
    b.branch(header)
    b.position_at_end(header)
    index = b.phi(I32)
    index.add_incoming(ctx.threads.tid, before)
    b.cbranch(b.icmp_unsigned("<", index, ir.Constant(I32, tile.rows * chunks_per_row)),
              body, done)
    b.position_at_end(body)
    row = b.udiv(index, ir.Constant(I32, chunks_per_row))
    chunk = b.urem(index, ir.Constant(I32, chunks_per_row))
    byte = b.mul(chunk, ir.Constant(I32, CHUNK_BYTES))
    at = b.add(ir.Constant(I32, above_floor), tile.offset(b, row, byte))
    loaded = b.load(ctx.shared.pointer(at, chunk_type), typ=chunk_type, align=CHUNK_BYTES)
    global_row = b.add(row_offset, b.zext(row, I64))
    row_inside = b.and_(inside, b.and_(b.icmp_signed(">=", global_row, zero),
                                       b.icmp_signed("<", global_row, rows)))
    row_start = b.add(first, b.mul(global_row, row_stride))
    first_column = b.add(column_offset, b.zext(b.mul(chunk, ir.Constant(I32, per_chunk)), I64))
    for lane in range(per_chunk):
        column = b.add(first_column, ir.Constant(I64, lane))
        predicate = b.and_(row_inside, b.and_(b.icmp_signed(">=", column, zero),
                                              b.icmp_signed("<", column, columns)))
        target = b.add(address, b.mul(b.add(row_start, column),
                                      ir.Constant(I64, element.itemsize)))
        emit_store(b, target, predicate, element,
                   [b.extract_element(loaded, ir.Constant(I32, lane))])
    index.add_incoming(b.add(index, ir.Constant(I32, ctx.threads.threads)), b.block)
    b.branch(header)
    b.position_at_end(done)
