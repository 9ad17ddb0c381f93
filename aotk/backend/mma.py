"""Lowering of ``dot`` on tensor cores with ``mma.sync`` (sm_80+): fp16/bf16 inputs with fp32
accumulation (m16n8k16), fp32 inputs as tf32 (m16n8k8), int8 into int32 (m16n8k32). On
Turing (sm_75, fp16 only: ``passes.mma_layout``) each m16n8k16 is two m16n8k8, whose
fragments are the m16n8k16 ones split at k = 8, so everything else is shared.

In: a [M, K] and b [K, N] in their natural blocked layouts, the accumulator in its ``Mma``
layout (``passes.mma_layout.choose_mma``). Out: the result's registers in that ``Mma`` layout.

1. a and b are in shared memory in the swizzled layout of ``backend.swizzle`` (the eight
   16-byte rows one ``ldmatrix`` matrix reads fall in eight different bank groups): a
   pipelined loop (``passes.pipeline``) put them there with cp.async, else the threads
   store them in vector stores of their contiguous elements, then one barrier. An
   operand read down its columns (``plan.stored_transposed``) is stored into its
   transposed tile, B as [N, K], a 16-bit A as [K, M], each thread's run down a column in
   one vector.
2. For each instruction-deep slice of K, each warp loads its A fragments (one
   ``ldmatrix.x4`` per 16-row tile: four 8-row x 16-byte matrices, whatever the element
   size; ``ldmatrix.x4.trans`` from an [K, M] tile) and B fragments (16-bit elements:
   ``ldmatrix.x4.trans`` per pair of 8-column tiles, as B is stored [K, N] and mma wants
   it column-major; from an [N, K] tile plain ``ldmatrix``, any element size; else for tf32
   and int8: element loads, since ldmatrix only transposes 16-bit elements), then issues one ``mma.sync``
   per (row tile, column tile).
An A computed in the accumulator fragments of a dot laid out as this one (``a_in_registers``:
fla's triangular solves chain dots, attention's p on mma.sync) is never stored: its
fragments are its registers, paired for 16-bit elements, gathered within each lane quad
with shuffles for tf32 (``a_register_fragments``).
An fp16 accumulator (out_dtype=float16) is widened to fp32 around the products.
"""
from __future__ import annotations

import llvmlite.ir as ir

from ..passes.layouts import SCALAR, Layout
from ..passes.mma_layout import MMA_TILE, Mma
from ..targets import has_ampere_mma
from .llvm_types import I32, inline_asm, llvm_type, register_struct
from .register_operands import (a_in_registers, a_register_fragments, b_in_registers,
                               b_register_fragments, staged)
from .swizzle import (CHUNK_BYTES, SWIZZLE_ATOM_BYTES, SwizzledTile, aligned_tile_bytes,
                      tile_of)

F32 = ir.FloatType()
MMA_K = 16
# Where a dot stores an operand beside a staged one: wgmma reads tiles from swizzle atoms.
SCRATCH_TILE_ALIGNMENT = SWIZZLE_ATOM_BYTES


def shared_bytes_needed(plan, op) -> int:
    a, b = op.operands[:2]
    in_registers_a, in_registers_b = a_in_registers(plan, op), b_in_registers(plan, op)
    if in_registers_a and in_registers_b:
        return 0
    if in_registers_a:
        return 0 if staged(b) else SCRATCH_TILE_ALIGNMENT + tile_of(b).bytes
    if in_registers_b:
        return 0 if staged(a) else SCRATCH_TILE_ALIGNMENT + tile_of(a).bytes
    if staged(a) and staged(b):
        return 0
    if staged(a) or staged(b):
        # The other operand above the stages, at the next tile boundary (``place_operands``).
        return SCRATCH_TILE_ALIGNMENT + tile_of(b if staged(a) else a).bytes
    return aligned_tile_bytes(tile_of(a)) + tile_of(b).bytes


def store_tile(ctx, value, byte_base: int, offset_of, by_columns: bool = False,
               layout=None):
    """Writes a 2-d block into shared memory at ``byte_base``, in vector stores of up to 16
    bytes of each thread's contiguous run; ``offset_of(builder, row, column)`` gives an
    element's byte offset (i32) in the tile. The block is read in its natural layout, or in
    the accumulator fragments it was computed in (``passes.mma_residency``: flash
    attention's p), two adjacent columns a store, with no conversion first.
    ``by_columns``: the tile holds the block transposed (consecutive rows of a column are
    adjacent in memory): the runs are a thread's consecutive rows (``_store_by_columns``),
    read in ``layout`` (default: the accumulator fragments the block is resident in, else
    its natural layout)."""
    home = ctx.plan.homes.get(value)
    resident = home if isinstance(home, Layout) and isinstance(home.blocked, Mma) and \
        not home.sliced else None
    if by_columns:
        _store_by_columns(ctx, value, byte_base, offset_of,
                          layout or resident or ctx.plan.natural(value))
        return
    b = ctx.builder
    layout = resident or ctx.plan.natural(value)
    element = value.element
    registers = ctx.regs(value, layout)
    indices = ctx.threads.logical_indices(value, layout)
    run = min(layout.blocked.size_per_thread[1], value.type.shape[1])
    piece = max(1, min(run, 16 // element.itemsize))
    for start in range(0, len(registers), piece):
        row, column = indices[start]
        offset = b.add(ir.Constant(I32, byte_base), offset_of(b, row, column))
        if piece == 1:
            b.store(registers[start], ctx.shared.pointer(offset, llvm_type(element)))
            continue
        vector_type = ir.VectorType(llvm_type(element), piece)
        vector = ir.Constant(vector_type, None)
        for lane in range(piece):
            vector = b.insert_element(vector, registers[start + lane], ir.Constant(I32, lane))
        b.store(vector, ctx.shared.pointer(offset, vector_type),
                align=piece * element.itemsize)


def _store_by_columns(ctx, value, byte_base: int, offset_of, layout):
    """``store_tile`` of a block whose tile is its transpose, from ``layout``: a thread's
    rows come in runs of ``size_per_thread[0]`` consecutive ones, or all of its rows when
    one thread covers the whole column height (liger's int8 x int2 B: each thread holds all
    64 rows of one column), stored 16 bytes at most a vector. A run starts at a multiple of
    its length (the thread's first row is a multiple of size_per_thread[0]). From the
    layout a column-major load reads in (``layout_facts.k_major_b_loads``), runs are that
    load's vectors. Rows that are not consecutive (a value left in a dot's accumulator
    fragments: a thread's rows r and r + 8) are stored one element a store."""
    b = ctx.builder
    blocked = layout.blocked
    row_axis, column_axis = layout.parent_axis(0), layout.parent_axis(1)
    element = value.element
    rows = value.type.shape[0]
    dist = ctx.threads.distribution(layout, value.type.shape)
    held = blocked.size_per_thread[row_axis]
    run = rows if blocked.tile(row_axis) == held else min(held, rows)
    piece = max(1, min(run, 16 // element.itemsize))
    registers = ctx.regs(value, layout)
    indices = ctx.threads.logical_indices(value, layout)
    # Registers by column slot, each column's rows in order of their offset.
    by_column: dict = {}
    for register, slot, index in zip(registers, dist.slots(), indices):
        by_column.setdefault(slot[column_axis], []).append(
            (dist.slot_offsets[row_axis][slot[row_axis]], register, index))
    for column in by_column.values():
        column.sort(key=lambda entry: entry[0])
        for start in range(0, len(column), piece):
            group = column[start:start + piece]
            if piece > 1 and [entry[0] - group[0][0] for entry in group] != \
                    list(range(piece)):
                # Rows that are not one run (an accumulator fragment's rows r and r + 8):
                # one store each.
                for _, register, (row, col) in group:
                    offset = b.add(ir.Constant(I32, byte_base), offset_of(b, row, col))
                    b.store(register, ctx.shared.pointer(offset, llvm_type(element)))
                continue
            _, first, (row, col) = column[start]
            offset = b.add(ir.Constant(I32, byte_base), offset_of(b, row, col))
            if piece == 1:
                b.store(first, ctx.shared.pointer(offset, llvm_type(element)))
                continue
            vector_type = ir.VectorType(llvm_type(element), piece)
            vector = ir.Constant(vector_type, None)
            for lane in range(piece):
                vector = b.insert_element(vector, column[start + lane][1],
                                          ir.Constant(I32, lane))
            b.store(vector, ctx.shared.pointer(offset, vector_type),
                    align=piece * element.itemsize)


class OperandTiles:
    """The shared-memory tiles a tensor-core dot reads its operands from, for ``mma.sync``
    and ``wgmma`` alike: each operand's tile as it is ([M, K], [K, N]) or its transpose. A
    pipelined loop may stage B as [N, K] and a 16-bit A as [K, M] (``shared_read`` with
    ``transposed``); the threads store a B read down its columns the same way, and a
    16-bit A read down its columns M-major, [K, M] (``plan.stored_transposed``), from the
    layout its loads read; ``b_k_major``: wgmma's int8 or fp32 (tf32) B, which has no
    transpose, is stored K-major as well."""

    def __init__(self, plan, op, b_k_major: bool = False):
        a, b = op.operands[:2]
        (m, k), (_, n) = a.type.shape, b.type.shape
        self.op = op
        self.b_stored_k_major = plan.k_major_b(op) is not None or \
            b_k_major and not staged(b)
        # A transposed view of a value in accumulator fragments (``plan.a_view_source``)
        # reads that value's own row-major tile: A's [K, M].
        self.a_view_source = plan.a_view_source(op)
        self.m_major_a = plan.m_major_a(op) is not None or self.a_view_source is not None or \
            staged(a) and a.owner.attrs.get("transposed", False)
        self.k_major_b = self.b_stored_k_major or \
            staged(b) and b.owner.attrs.get("transposed", False)
        self.a = SwizzledTile(k, m, a.element) if self.m_major_a else tile_of(a)
        self.b = SwizzledTile(n, k, b.element) if self.k_major_b else tile_of(b)

    def place(self, ctx, a, b_base: int, before_barrier=None, b_in_registers=False):
        """``place_operands`` for these tiles (``a`` None: A stays in registers; so does B
        with ``b_in_registers``)."""
        resident = ctx.shared.resident_slots
        a_offset_of = transposed_offsets(self.a, self.m_major_a)
        if a is not None and self.a_view_source is not None:
            # The view's source stored as it is, from its fragments: A's [K, M] tile.
            a, a_offset_of = self.a_view_source, self.a.element_offset
        return place_operands(ctx, a, None if b_in_registers else self.op.operands[1], b_base,
                              a_offset_of,
                              transposed_offsets(self.b, self.b_stored_k_major),
                              before_barrier, b_by_columns=self.b_stored_k_major,
                              b_layout=ctx.plan.k_major_b(self.op),
                              a_by_columns=ctx.plan.m_major_a(self.op) is not None,
                              a_layout=ctx.plan.m_major_a(self.op),
                              resident=(resident.get((self.op, 0)), resident.get((self.op, 1))))


def transposed_offsets(tile: SwizzledTile, transposed: bool):
    """``offset_of(builder, row, column)`` of an operand's element in ``tile``: the tile
    as it is, or, ``transposed``, holding the operand's transpose (a B stored K-major, an A
    M-major: element (row, column) at row ``column``, column ``row``)."""
    if transposed:
        return lambda builder, row, column: tile.element_offset(builder, column, row)
    return tile.element_offset


def place_operands(ctx, a, b, b_base: int, a_offset_of, b_offset_of, before_barrier=None,
                   b_by_columns: bool = False, b_layout=None, a_by_columns: bool = False,
                   a_layout=None, resident=(None, None)):
    """Where a tensor-core dot's operands sit in shared memory: (root, a base, b base), the
    scratch buffer's 32-bit shared-window address and i32 byte offsets from it. Operands
    that a pipelined loop staged (``shared_read``) are in its stage, made visible by its
    ``async_wait``; operands with a tile of their own (``resident``: ``operand_tiles``, one
    per operand or None) are there, published by a barrier if they were just written;
    others the threads store (``store_tile`` with each offset function): both at 0 and
    ``b_base`` of the scratch space, or, beside a staged or resident one, alone at the
    first tile boundary above the loop's stages. Then ``before_barrier`` (if any) and a
    barrier. ``a`` None: A stays in registers (``a_in_registers``), b is placed as
    beside a staged A, and A's base is None; ``b`` None the same for B (both None: no
    shared memory at all). ``b_by_columns``: B's tile is its transpose, stored from
    ``b_layout`` (``store_tile``); ``a_by_columns`` and ``a_layout`` the same for A."""
    builder = ctx.builder
    c = lambda v: ir.Constant(I32, v)   # noqa: E731
    if a is None and b is None:
        return None, None, None
    if a is None or b is None or staged(a) or staged(b) or any(resident):
        root = builder.ptrtoint(ctx.shared.stage_pointer(c(0)), I32)
        bases = [None, None]
        operands = ((a, a_offset_of, a_by_columns, a_layout), (b, b_offset_of, b_by_columns,
                                                               b_layout))
        for index, (value, offset_of, by_columns, layout) in enumerate(operands):
            if value is None or resident[index] is not None:
                continue
            if staged(value):
                bases[index] = ctx.pipeline.staged[value.owner.attrs["buffer"]].stage_base(
                    builder, ctx.regs(value.owner.operands[0], SCALAR)[0])
                continue
            # ``pointer`` offsets count from the floor (the stages' and the resident tiles'
            # end); tiles start on SCRATCH_TILE_ALIGNMENT boundaries of the buffer
            # (wgmma's swizzle atoms).
            above_floor = -ctx.shared.floor % SCRATCH_TILE_ALIGNMENT
            ctx.shared.begin_use()
            store_tile(ctx, value, above_floor, offset_of, by_columns, layout)
            if before_barrier is not None:
                before_barrier(builder)
            ctx.shared.barrier()
            bases[index] = c(ctx.shared.floor + above_floor)
        # After any store's barrier, which publishes a resident tile written before it.
        for index, tile in enumerate(resident):
            if tile is not None and operands[index][0] is not None:
                bases[index] = c(ctx.shared.read_resident(tile.value))
        return (root,) + tuple(bases)
    ctx.shared.begin_use()
    store_tile(ctx, a, 0, a_offset_of, a_by_columns, a_layout)
    store_tile(ctx, b, b_base, b_offset_of, b_by_columns, b_layout)
    if before_barrier is not None:
        before_barrier(builder)
    ctx.shared.barrier()
    return builder.ptrtoint(ctx.shared.pointer(c(0), ir.IntType(8)), I32), c(0), c(b_base)


def _ldmatrix(ctx, address, transpose: bool):
    """Four 8x8 b16 matrices; lane l supplies the address of row l % 8 of matrix l / 8.

    The asm reads shared memory, which LLVM cannot see in an asm's operands: declared
    without side effects, it counts as a pure function of the address, so LLVM merged the
    ldmatrix of two dots whose tiles sit at the same offsets (the second dot read the first
    one's operand) and could move it above the barrier that publishes the tile."""
    text = ("ldmatrix.sync.aligned.m8n8.x4" + (".trans" if transpose else "") +
            ".shared.b16 {$0, $1, $2, $3}, [$4];")
    result = inline_asm(ctx.builder, text, "=r,=r,=r,=r,r", [address],
                        register_struct(ctx.builder, [I32] * 4), side_effect=True)
    return [ctx.builder.extract_value(result, i) for i in range(4)]


# Turing's fp16 shape: A's registers 0-1 and B's register 0 of an m16n8k16 fragment hold
# k 0-7, A's 2-3 and B's 1 hold k 8-15.
TURING_MMA = ("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 "
              "{$0, $1, $2, $3}, {$4, $5}, {$6}, {$7, $8, $9, $10};")
TURING_CONSTRAINTS = ",".join(["=f"] * 4 + ["r"] * 3 + ["f"] * 4)


def _turing_mma(builder, a_registers, b_registers, accumulators) -> list:
    """One m16n8k16 fp16 product as two m16n8k8 (sm_75): the accumulators after both."""
    for half in (0, 1):
        operands = a_registers[2 * half:2 * half + 2] + [b_registers[half]] + accumulators
        result = inline_asm(builder, TURING_MMA, TURING_CONSTRAINTS, operands,
                            register_struct(builder, [F32] * 4), side_effect=False)
        accumulators = [builder.extract_value(result, i) for i in range(4)]
    return accumulators


def _k_major_b_fragments(ctx, tile_b, b_root, layout, warp_col, kk: int,
                         chunk_elements: int) -> list:
    """B's fragments at depth kk, per column tile, from a K-major [N, K] stage: each
    8-column x 16-byte matrix is what the mma wants (one row of K per column), so plain
    ``ldmatrix.x4`` serves every element size. Lanes 0-15 address column tile tn (its two
    16-byte halves of the K slice: lanes 0-7 and 8-15), lanes 16-31 tile tn + 1."""
    b = ctx.builder
    c = lambda v: ir.Constant(I32, v)   # noqa: E731
    lane = ctx.threads.lane
    tiles_n = max(1, tile_b.rows // layout.tile(1))
    pair = 1 if tiles_n > 1 else 0
    lane_row = b.add(b.add(warp_col, b.urem(lane, c(8))),
                     b.mul(b.udiv(lane, c(16)), c(pair * layout.tile(1))))
    lane_chunk = b.urem(b.udiv(lane, c(8)), c(2))
    fragments = []
    for tn in range(0, tiles_n, 2):
        offset = tile_b.split_offset(b, lane_row, lane_chunk, tn * layout.tile(1),
                                     kk // chunk_elements)
        registers = _ldmatrix(ctx, b.add(b_root, offset), False)
        fragments.append(registers[0:2])
        if pair:
            fragments.append(registers[2:4])
    return fragments


def _instruction(element) -> tuple:
    """(k depth, mma.sync text, accumulator asm constraint) for operands of ``element``."""
    operands = "{$0, $1, $2, $3}, {$4, $5, $6, $7}, {$8, $9}, {$10, $11, $12, $13};"
    if element.is_fp32():
        return 8, "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 " + operands, "f"
    if element.is_int():
        return 32, "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 " + operands, "r"
    kind = "bf16" if element.is_bf16() else "f16"
    return 16, f"mma.sync.aligned.m16n8k16.row.col.f32.{kind}.{kind}.f32 " + operands, "f"


def lower_mma(ctx, op) -> list:
    b = ctx.builder
    a, b_operand, acc = op.operands
    layout = ctx.plan.mma[op]
    wm, wn = layout.warps_per_cta
    (m, k), (_, n) = a.type.shape, b_operand.type.shape
    element = a.element
    size = element.itemsize
    tiles = OperandTiles(ctx.plan, op)
    tile_a, tile_b, m_major_a, k_major_b = tiles.a, tiles.b, tiles.m_major_a, tiles.k_major_b
    registers_a, registers_b = a_in_registers(ctx.plan, op), b_in_registers(ctx.plan, op)
    root, a_base, b_base = tiles.place(ctx, None if registers_a else a,
                                       aligned_tile_bytes(tile_a), b_in_registers=registers_b)
    # 32-bit shared-window addresses: ldmatrix takes them, and they cost half the adds.
    a_root = None if registers_a else b.add(root, a_base)
    b_root = None if registers_b else b.add(root, b_base)

    c = lambda v: ir.Constant(I32, v)   # noqa: E731
    lane, warp = ctx.threads.lane, ctx.threads.warp
    warp_row = b.mul(b.urem(warp, c(wm)), c(MMA_TILE[0]))
    warp_col = b.mul(b.udiv(warp, c(wm)), c(MMA_TILE[1]))
    # Warps beyond the block's tiles (choose_mma) repeat the first ones' tiles.
    if layout.tile(0) > m:
        warp_row = b.urem(warp_row, c(m))
    if layout.tile(1) > n:
        warp_col = b.urem(warp_col, c(n))
    row_in_tile = b.urem(lane, c(16))        # ldmatrix: row supplied by this lane
    half = b.udiv(lane, c(16))               # which 16-byte half this lane's row starts at
    group, thread_in_group = b.udiv(lane, c(4)), b.urem(lane, c(4))
    tiles_m, tiles_n = max(1, m // layout.tile(0)), max(1, n // layout.tile(1))
    depth, mma_text, accumulator_kind = _instruction(element)
    if registers_a:
        fragments_of_a = a_register_fragments(ctx, a, layout, tiles_m, k // depth)
    if registers_b:
        fragments_of_b = b_register_fragments(ctx, b_operand, layout, tiles_n, k // depth)
    if m_major_a:
        m_major_row = b.add(b.urem(lane, c(8)), b.mul(half, c(8)))
        m_major_chunk = b.add(b.udiv(warp_row, c(CHUNK_BYTES // size)),
                              b.urem(b.udiv(lane, c(8)), c(2)))
    ampere = has_ampere_mma(ctx.target)
    per_register = 4 // size                 # elements of one operand register
    chunk_elements = CHUNK_BYTES // size

    def b_fragment(kk, tn):
        """The two registers of B's column tile tn at depth kk, element by element: the
        mma wants per_register consecutive k of one column in each register, which
        ldmatrix.trans can only gather for 16-bit elements."""
        column = b.add(warp_col, b.add(c(tn * layout.tile(1)), group))
        registers = []
        for j in (0, 1):
            values = []
            for r in range(per_register):
                row = b.add(c(kk + j * depth // 2 + r),
                            b.mul(thread_in_group, c(per_register)))
                address = b.add(b_root, tile_b.element_offset(b, row, column))
                pointer = b.inttoptr(address, llvm_type(element).as_pointer(3))
                values.append(b.load(pointer))
            if per_register == 1:
                registers.append(b.bitcast(values[0], I32))
                continue
            vector = ir.Constant(ir.VectorType(llvm_type(element), per_register), None)
            for r, value in enumerate(values):
                vector = b.insert_element(vector, value, c(r))
            registers.append(b.bitcast(vector, I32))
        return registers

    def m_major_tf32_a(kk, tm):
        """The four registers of A's row tile tm at depth kk from an [K, M] tile, element
        by element (ldmatrix.trans gathers 16-bit elements only): register r holds row
        group + 8 (r % 2) of the tile, k thread_in_group + 4 (r / 2) (the PTX ISA's
        m16n8k8 tf32 A fragment)."""
        registers = []
        for r in range(4):
            row = b.add(warp_row, b.add(c(tm * layout.tile(0) + 8 * (r % 2)), group))
            depth_index = b.add(c(kk + depth // 2 * (r // 2)), thread_in_group)
            address = b.add(a_root, tile_a.element_offset(b, depth_index, row))
            pointer = b.inttoptr(address, llvm_type(element).as_pointer(3))
            registers.append(b.bitcast(b.load(pointer), I32))
        return registers

    accumulator_regs = ctx.regs(acc, Layout(layout))
    widen = acc.element.bits == 16
    accumulators = [b.fpext(r, F32) if widen else r for r in accumulator_regs]
    accumulator_type = accumulators[0].type
    columns_per_thread_row = 2 * tiles_n     # acc registers per slot row in the Mma layout
    constraints = ",".join([f"={accumulator_kind}"] * 4 + ["r"] * 6 + [accumulator_kind] * 4)
    # A dot that reads the resident tile (``operand_tiles``) the dot before it read, the
    # same way and in the same block, takes that dot's fragments instead of loading them
    # again (fla's k k^T blocks: two dots of one transposed k tile, one after the other).
    shape_key = (repr(layout), m, n, k, op.attrs.get("precision"))
    resident = ctx.shared.resident_slots
    previous = ctx.last_tile_fragments
    keys = [None if in_registers or resident.get((op, index)) is None else
            (b.block, resident[(op, index)].value, transposed, shape_key)
            for index, (in_registers, transposed) in enumerate(
                ((registers_a, m_major_a), (registers_b, k_major_b)))]
    reused = [previous[index][1] if keys[index] is not None and previous[index] is not None
              and previous[index][0] == keys[index] else None for index in (0, 1)]
    read = [{}, {}]
    for kk in range(0, k, depth):
        # Fragment addresses split into the lanes' part and constants (swizzle.split_offset):
        # warps and the 16 rows / two 16-byte halves a lane addresses vary by register;
        # tiles and K steps move by whole 8-row groups and by chunk bits above those.
        a_fragments = list(reused[0][kk]) if reused[0] is not None else []
        lane_row = b.add(warp_row, row_in_tile)
        for tm in range(tiles_m if reused[0] is None else 0):
            if registers_a:
                a_fragments.append(fragments_of_a[tm][kk // depth])
                continue
            if m_major_a and size == 4:
                a_fragments.append(m_major_tf32_a(kk, tm))
                continue
            if m_major_a:
                # [K, M]: matrix j of ldmatrix.x4.trans is rows m 8 (j % 2) + 0..7 at k
                # 8 (j / 2) + 0..7 of the fragment; lane l gives k row l % 8 + 8 (l / 16)
                # of m chunk (l / 8) % 2, and .trans hands out the [m][k] fragment.
                offset = tile_a.split_offset(b, m_major_row, m_major_chunk, kk,
                                             tm * layout.tile(0) // chunk_elements)
                a_fragments.append(_ldmatrix(ctx, b.add(a_root, offset), True))
                continue
            offset = tile_a.split_offset(b, lane_row, half, tm * layout.tile(0),
                                         kk // chunk_elements)
            a_fragments.append(_ldmatrix(ctx, b.add(a_root, offset), False))
        read[0][kk] = a_fragments
        if reused[1] is not None:
            b_fragments = list(reused[1][kk])
        elif registers_b:
            b_fragments = [fragments_of_b[tn][kk // depth] for tn in range(tiles_n)]
        elif k_major_b:
            b_fragments = _k_major_b_fragments(ctx, tile_b, b_root, layout, warp_col, kk,
                                               chunk_elements)
        elif size != 2:
            b_fragments = [b_fragment(kk, tn) for tn in range(tiles_n)]
        else:
            b_fragments = []
            pair = 1 if tiles_n > 1 else 0
            # Lanes 0-15 address the first column tile (k rows 0-15), lanes 16-31 the next.
            lane_column = b.add(warp_col, b.mul(half, c(pair * layout.tile(1))))
            lane_chunk = b.udiv(lane_column, c(chunk_elements))
            for tn in range(0, tiles_n, 2):
                offset = tile_b.split_offset(b, row_in_tile, lane_chunk, kk,
                                             tn * layout.tile(1) // chunk_elements)
                regs = _ldmatrix(ctx, b.add(b_root, offset), True)
                b_fragments.append(regs[0:2])
                if pair:
                    b_fragments.append(regs[2:4])
        read[1][kk] = b_fragments
        for tm in range(tiles_m):
            for tn in range(tiles_n):
                slots = [(2 * tm + i) * columns_per_thread_row + 2 * tn + j
                         for i in (0, 1) for j in (0, 1)]
                if not ampere:
                    products = _turing_mma(b, a_fragments[tm], b_fragments[tn],
                                           [accumulators[s] for s in slots])
                    for slot, product in zip(slots, products):
                        accumulators[slot] = product
                    continue
                result = inline_asm(b, mma_text, constraints,
                                    a_fragments[tm] + b_fragments[tn] +
                                    [accumulators[s] for s in slots],
                                    register_struct(b, [accumulator_type] * 4),
                                    side_effect=False)
                for index, slot in enumerate(slots):
                    accumulators[slot] = b.extract_value(result, index)
    ctx.last_tile_fragments = [(keys[index], read[index]) if keys[index] is not None else None
                               for index in (0, 1)]
    if widen:
        return [b.fptrunc(r, llvm_type(acc.element)) for r in accumulators]
    return accumulators
