"""Lowering of the ops ``passes.pipeline`` introduces: ``async_copy``, ``async_commit``,
``async_wait`` (and where ``shared_read`` tiles live, for the dot that reads them).

In: the ops, the pointers and masks of a copy in their natural blocked layout. Out:

* ``async_copy``: per vector of a thread's contiguous elements (4, 8 or 16 bytes, as axis
  info proved), ``cp.async.{cg,ca}.shared.global [stage + row * pitch + column], [src],
  bytes, src_bytes`` with src_bytes = 0 where the mask is off, which zero-fills. Threads
  that only replicate elements (the layout wraps) issue nothing. Narrower vectors cannot
  use cp.async: they are loaded into registers and stored, which stays correct.
* ``async_commit``: ``cp.async.commit_group``; ``async_wait``: ``cp.async.wait_group N``,
  (with ``proxy_fence``, ``fence.proxy.async``: wgmma reads the stages through the async
  proxy) then a CTA barrier, since other threads' copies must be visible too.
* ``wgmma_wait``: ``wgmma.wait_group N``, the values it retires passed through its asm.

Shared memory: each pipelined loop's buffers are laid out from byte 0, operand after
operand (then, for TMA, one mbarrier per stage and group of tiles: ``backend.tma``), each
``stages`` slots of a tile in the swizzled layout of ``backend.swizzle``
(``passes.pipeline_shape.staged_tile_bytes``: slots start on 128-byte lines, or on 1024-byte
swizzle atoms for wgmma). Other shared memory used inside that loop sits above them
(``SharedMemory.floor``); loops are never live at the same time.
"""
from __future__ import annotations

from dataclasses import dataclass

import llvmlite.ir as ir

from ..ir.kir import walk
from ..passes.layouts import SCALAR
from ..passes.multicast import MAX_PAIR_WORDS
from ..passes.pipeline_shape import MBARRIER_BYTES, plain_tile_bytes, staged_tile_bytes
from .llvm_types import I32, I64, inline_asm, llvm_type
from .memory import emit_load, vector_groups
from .plain_tile import PlainTile
from .registry import lowering
from .swizzle import SWIZZLE_ATOM_BYTES, SwizzledTile
from .wgmma import proxy_fence, wait_for_wgmma


class StagedBuffer:
    """Where one operand's stages live: ``offset`` bytes into the scratch buffer, slots of
    ``stage_bytes``, each a ``SwizzledTile`` (a dot's operand) or, with ``order``, a
    ``PlainTile`` (a block read back into registers)."""

    def __init__(self, offset: int, shape: tuple, element, stages: int, async_proxy: bool,
                 order: tuple | None = None):
        self.offset, self.shape, self.element, self.stages = offset, shape, element, stages
        self.plain = order is not None
        if self.plain:
            self.tile = PlainTile(shape, element, order)
            self.stage_bytes = plain_tile_bytes(shape, element)
        else:
            self.tile = SwizzledTile(shape[0], shape[1], element)
            self.stage_bytes = staged_tile_bytes(shape, element, async_proxy)

    def tile_offset(self, builder, row, column):
        """Byte offset (i32) of element (row, column) inside a slot."""
        return self.tile.element_offset(builder, row, column)

    def stage_base(self, builder, stage):
        """Byte offset (i32) of slot ``stage`` (an i32 register)."""
        return builder.add(ir.Constant(I32, self.offset),
                           builder.mul(stage, ir.Constant(I32, self.stage_bytes)))


@dataclass
class PipelineBuffers:
    """Where the pipelined loops' operand stages and mbarriers sit in the scratch buffer."""
    staged: dict             # buffer id (loop number, operand) -> StagedBuffer
    loop_bytes: dict         # pipelined loop number -> bytes of its stages (and mbarriers)
    mbarrier_offsets: dict   # TMA loop number -> offset of its mbarriers (stage x group)


def plan_buffers(function) -> PipelineBuffers:
    """Lays out every pipelined loop's stages from byte 0, operand after operand, then its
    mbarriers (TMA loops)."""
    found, tma_stages = {}, {}
    for op in walk(function.body):
        if op.opcode == "shared_read":
            shape = op.result.type.shape
            # A transposed read's stage holds the tile as loaded: [K, M] for a [M, K] view.
            found[op.attrs["buffer"]] = (shape[::-1] if op.attrs.get("transposed") else shape,
                                         op.result.element, op.attrs["stages"],
                                         op.attrs.get("async_proxy", False), None)
        if op.opcode == "load" and "staged" in op.attrs:
            # async_proxy: the loop's dots are wgmma (the plain tile itself is not read so).
            found[op.attrs["staged"]] = (op.result.type.shape, op.result.element,
                                         op.attrs["stages"], op.attrs.get("async_proxy", False),
                                         op.attrs["order"])
        if op.opcode == "tma_init":
            # stages x groups of tiles; with a producer warp one more a stage (consumed).
            # A pair: one more a stage (pair free) and the words it compares (16 at most,
            # two to an mbarrier's 8 bytes).
            tma_stages[op.attrs["loop"]] = op.attrs["stages"] * (
                op.attrs["groups"] + (1 if op.attrs.get("consumers") else 0) +
                (1 if op.attrs.get("pair") else 0)) + \
                (MAX_PAIR_WORDS // 2 if op.attrs.get("pair") else 0)
    buffers, totals = {}, {}
    for buffer in sorted(found):
        shape, element, stages, async_proxy, order = found[buffer]
        loop = buffer[0]
        staged = StagedBuffer(totals.get(loop, 0), shape, element, stages, async_proxy,
                              order)
        buffers[buffer] = staged
        totals[loop] = staged.offset + stages * staged.stage_bytes
    mbarriers = {}
    for loop, count in tma_stages.items():   # count: stages x groups of tiles
        mbarriers[loop] = totals[loop]
        totals[loop] += count * MBARRIER_BYTES
    # Tiles the threads store above a wgmma loop's stages start on a swizzle atom
    # (``mma.place_operands``; a descriptor's swizzle follows the address bits), which
    # plain tiles (128-byte lines) may leave the stages short of.
    for buffer, (_, _, _, async_proxy, order) in found.items():
        if async_proxy and order is not None:
            loop = buffer[0]
            totals[loop] = -(-totals[loop] // SWIZZLE_ATOM_BYTES) * SWIZZLE_ATOM_BYTES
    return PipelineBuffers(buffers, totals, mbarriers)


@lowering("async_copy")
def lower_async_copy(ctx, op):
    b = ctx.builder
    pointer = op.operands[0]
    has_mask = op.attrs["has_mask"]
    (stage,) = ctx.regs(op.operands[-1], SCALAR)
    staged = ctx.pipeline.staged[op.attrs["buffer"]]
    # The tile's own layout (layout_facts.copy_layouts), or one along another dim.
    layout = ctx.plan.access.get(op) or ctx.plan.natural(pointer)
    if op.attrs.get("first"):
        # Earlier shared-memory users may still read the bytes the prologue fills.
        ctx.shared.begin_use()
    if staged.plain:
        _copy_plain(ctx, op, staged, stage, layout)
        return
    pointers = ctx.regs(pointer, layout)
    masks = ctx.regs(op.operands[1], layout) if has_mask else None
    element = staged.element
    size = element.itemsize
    indices = ctx.threads.logical_indices(pointer, layout)
    constants = ctx.threads.logical_offsets(pointer, layout)
    owner = ctx.threads.distribution(layout, pointer.type.shape).owner_predicate()
    base = staged.stage_base(b, stage)
    shared_root = b.ptrtoint(ctx.shared.stage_pointer(ir.Constant(I32, 0)), I32)
    stage_root = b.add(shared_root, base)
    # A tile loaded with size-1 dims fills the stage of its two other dims.
    tile_dims = op.attrs.get("tile_dims", (0, 1))
    lanes = []   # (row, column) constants of a group -> its offset in the tile, computed
    for group in vector_groups(ctx, op, layout, len(pointers)):
        row, column = (indices[group[0]][dim] for dim in tile_dims)
        lane, shift = _tile_offset(b, staged, lanes, constants[group[0]], tile_dims, row,
                                   column)
        shift = ir.Constant(I32, shift)
        offset = b.add(b.add(base, lane), shift)
        destination = b.add(b.add(stage_root, lane), shift)
        width_bytes = len(group) * size
        mask = masks[group[0]] if masks is not None else None
        if width_bytes < 4:
            _copy_through_registers(ctx, pointers[group[0]], mask, owner, element,
                                    len(group), offset)
            continue
        _emit_copy(b, destination, pointers[group[0]], width_bytes, mask, owner)


def _copy_plain(ctx, op, staged, stage, layout):
    """``async_copy`` into a ``PlainTile``: one cp.async per vector of the copy's layout
    (along the tile's fastest dim), by the thread owning it; a scalar by thread 0."""
    b = ctx.builder
    pointer = op.operands[0]
    pointers = ctx.regs(pointer, layout)
    masks = ctx.regs(op.operands[1], layout) if op.attrs["has_mask"] else None
    element = staged.element
    indices = ctx.threads.logical_indices(pointer, layout)
    owner = ctx.threads.owner(pointer, layout)
    base = staged.stage_base(b, stage)
    stage_root = b.add(b.ptrtoint(ctx.shared.stage_pointer(ir.Constant(I32, 0)), I32), base)
    for group in vector_groups(ctx, op, layout, len(pointers)):
        offset = staged.tile.element_offset(b, indices[group[0]])
        mask = masks[group[0]] if masks is not None else None
        width_bytes = len(group) * element.itemsize
        if width_bytes < 4:
            _copy_through_registers(ctx, pointers[group[0]], mask, owner, element,
                                    len(group), b.add(base, offset))
            continue
        _emit_copy(b, b.add(stage_root, offset), pointers[group[0]], width_bytes, mask, owner)


def _emit_copy(b, destination, source, width_bytes: int, mask, owner):
    """One ``cp.async`` of ``width_bytes`` (4, 8 or 16) from global ``source`` to shared
    ``destination`` (an i32 address), zero-filled where ``mask`` is off, issued only where
    ``owner`` is on (None: every thread)."""
    source_bytes = ir.Constant(I32, width_bytes)
    if mask is not None:
        source_bytes = b.select(mask, source_bytes, ir.Constant(I32, 0))
    kind = "cg" if width_bytes == 16 else "ca"   # .cg (L2 only) exists for 16 bytes
    copy = f"cp.async.{kind}.shared.global [$0], [$1], {width_bytes}, $2;"
    address = b.ptrtoint(source, I64)
    if owner is None:
        inline_asm(b, copy, "r,l,r", [destination, address, source_bytes])
    else:
        inline_asm(b, "{ .reg .pred p; setp.ne.b32 p, $3, 0; @p " + copy + " }", "r,l,r,r",
                   [destination, address, source_bytes, b.zext(owner, I32)])


def _tile_offset(b, staged, lanes: list, constants, tile_dims, row, column) -> tuple:
    """(offset, shift): the byte offset in the tile of element (``row``, ``column``) is
    ``offset`` + the int ``shift``, where ``offset`` is that of an earlier group of the
    same copy (in ``lanes``) wherever the two differ by a constant (``SwizzledTile.shift``).
    Every group's address is then one register plus an immediate, as the rows a thread
    copies are 8 apart (or whole panels), and only that register lives in the loop."""
    if constants is not None:
        row_constant, column_constant = (constants[dim] for dim in tile_dims)
        for (row_before, column_before), offset in lanes:
            shift = staged.tile.shift(row_constant - row_before,
                                      (column_constant - column_before) *
                                      staged.element.itemsize)
            if shift is not None:
                return offset, shift
    offset = staged.tile_offset(b, row, column)
    if constants is not None:
        lanes.append(((row_constant, column_constant), offset))
    return offset, 0


def _copy_through_registers(ctx, pointer, mask, owner, element, width, offset):
    """A vector too narrow for cp.async: load it (zero where masked) and store it."""
    b = ctx.builder
    values = emit_load(b, pointer, mask, element, width,
                       [ir.Constant(llvm_type(element), 0)] * width, "", "", False)
    for index, value in enumerate(values):
        address = ctx.shared.stage_pointer(
            b.add(offset, ir.Constant(I32, index * element.itemsize)), llvm_type(element))
        if owner is None:
            b.store(value, address)
        else:
            with b.if_then(owner):
                b.store(value, address)


@lowering("async_commit")
def lower_async_commit(ctx, op):
    inline_asm(ctx.builder, "cp.async.commit_group;", "", [])


@lowering("async_wait")
def lower_async_wait(ctx, op):
    inline_asm(ctx.builder, f"cp.async.wait_group {op.attrs['pending']};", "", [])
    if op.attrs.get("proxy_fence"):
        proxy_fence(ctx.builder)
    ctx.shared.barrier()


@lowering("wgmma_wait")
def lower_wgmma_wait(ctx, op) -> list:
    """One ``wgmma.wait_group`` whose asm ties the registers of every value it retires:
    nothing reads them before it."""
    registers = [ctx.regs(value, ctx.plan.homes[result])
                 for value, result in zip(op.operands, op.results)]
    waited = wait_for_wgmma(ctx.builder, [r for group in registers for r in group],
                            op.attrs["pending"])
    results, start = [], 0
    for group in registers:
        results.append(waited[start:start + len(group)])
        start += len(group)
    return results


