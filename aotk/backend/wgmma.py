"""Lowering of ``dot`` on Hopper tensor cores with ``wgmma.mma_async`` (sm_90a): fp16 / bf16
inputs, or fp32 ones read as tf32, fp32 accumulation, or int8 inputs with int32
accumulation; B read by the tensor cores from shared memory, A too unless it stays in
registers: a 16-bit A computed in the accumulator fragments of a dot with this one's warps
(flash attention's p, ``a_in_registers``) is already in wgmma's A register fragments, and
goes in as four 32-bit registers per k16 slice.

In: a [M, K] and b [K, N] (already in shared memory when a pipelined loop staged them, else
in their natural blocked layouts), the accumulator in its ``Mma`` layout with warps
(num_warps, 1), or (4, warpgroups) where a 64-row dot splits N into one contiguous slice
per warpgroup (``Mma.warp_columns``; ``passes.mma_layout.choose_mma``). Out: the result's
registers in that layout.

Shared memory: both operands in the swizzled layout of ``backend.swizzle``, whose rows here
are whole 128-byte panels or one 64- or 32-byte row (``mma_layout.wgmma_row_fits``): the
hardware's 128B, 64B and 32B swizzles, which each descriptor names by its operand's panel
width W. Tiles start on 1024-byte boundaries (the widest swizzle atom, 8 rows of 128 bytes),
so the descriptors' base offset is 0.

Each warpgroup (4 warps) owns 64-row slices of C, and for every 32-byte slice of K (16
fp16 / bf16 elements, 8 tf32 ones) issues one ``wgmma.mma_async.m64nNk16`` (``k8`` for
tf32) per slice and N-chunk (N up to 256):
* A is K-major: the descriptor starts at the slice's row in the panel holding k, stride
  between 8-row groups (SBO) 8 W bytes; each k step moves 32 bytes along the row. A 16-bit
  A read down its columns is stored M-major, its [K, M] tile (``plan.stored_transposed``),
  and read as an N-major B is (imm-trans-a = 1): panels of 64 rows of C, K * W apart.
* B is N-major (imm-trans-b = 1): the descriptor starts at the N-chunk's first panel, the
  stride between panels (LBO) is K * W bytes, between 8-row groups of K (SBO) 8 W; each
  k16 step moves 16 rows = 16 W bytes. A pipelined loop that staged B as loaded through a
  transpose (``shared_read`` with ``transposed``: an [N, K] tile) has it K-major, read as
  A is (imm-trans-b = 0), the N-chunk starting at its row. tf32 has no imm-trans operands
  and takes K-major operands only: fp32 dots come here only with such a B
  (``mma_layout.wgmma_fits``). The descriptors are the same bytes as fp16's: a K-major
  swizzled layout is defined in 16-byte units whatever the element size.
* int8 (``.s32.s8.s8``, k32 per instruction: 32 bytes as well) has no transpose either: its
  B is staged K-major, or the threads store it K-major (its [N, K] tile) from registers,
  a thread's consecutive rows in one vector (``mma.store_tile`` by columns): liger's
  int8 x int2 matmul unpacks B in registers, each thread holding a column of 64 bytes,
  stored as 4 16-byte vectors, as Triton stores it.
Order: ``wgmma.fence`` (accumulator registers were written by ordinary instructions), the
instructions, ``wgmma.commit_group``, then ``wgmma.wait_group 0`` whose asm ties every
accumulator register, so nothing reads them before the tensor cores are done (a dot with
``wgmma_deferred`` leaves that to a later ``wgmma_wait``, ``passes.pipeline``). A pipelined
loop's dot (attribute ``wgmma_in_flight`` = 1, ``passes.pipeline``) waits only for the
previous trip's group, so the tensor cores work while the next copies are issued; the
loop's exit waits for the last (``wgmma_in_flight`` on the ``for``). With n dots per trip
none waits on its own (``wgmma_deferred``): a ``wgmma_wait`` after the last, until n groups
are left (this trip's), and a barrier before the stages are refilled. Operands
written by ordinary stores (or cp.async) reach the tensor cores through the async proxy:
the writers run ``fence.proxy.async.shared::cta`` before the barrier that publishes them.
"""
from __future__ import annotations

import llvmlite.ir as ir

from ..passes.layouts import Layout
from ..passes.mma_layout import WGMMA_ROWS, is_int8, threads_store_b_k_major
from .llvm_types import I32, I64, inline_asm, llvm_type, register_struct
from .mma import OperandTiles
from .register_operands import a_in_registers as _in_registers_or_tf32
from .register_operands import a_register_fragments, staged
from .swizzle import PHASE_ROWS, SWIZZLE_ATOM_BYTES

F32 = ir.FloatType()
K_STEP_BYTES = 32        # bytes of K per instruction: k16 of fp16 / bf16, k8 of tf32
MAX_N = 256
PROXY_FENCE = "fence.proxy.async.shared::cta;"
# A descriptor's layout type (bits 62-63) per swizzle width in bytes.
SWIZZLE_MODES = {128: 1, 64: 2, 32: 3}


def tile_bytes(value) -> int:
    rows, columns = value.type.shape
    return rows * columns * value.element.itemsize


def a_in_registers(plan, op) -> bool:
    """Whether A stays in the registers it was computed in: a 16-bit block resident in
    the accumulator fragments of a dot whose warps tile M as this one's do (flash
    attention's p), which are A's register fragments of wgmma as they are (one 16x8 tile
    pair per k16 slice), so no shared memory is needed for it (``register_operands``'s test
    without tf32: wgmma's tf32 A from registers is not used)."""
    return _in_registers_or_tf32(plan, op, tf32=False)


def shared_bytes_needed(plan, op) -> int:
    a, b = op.operands[:2]
    if a_in_registers(plan, op):
        return 0 if staged(b) else SWIZZLE_ATOM_BYTES + tile_bytes(b)
    if staged(a) and staged(b):
        return 0
    if staged(a) or staged(b):
        # The other operand above the stages, on a swizzle atom (``mma.place_operands``).
        return SWIZZLE_ATOM_BYTES + tile_bytes(b if staged(a) else a)
    return tile_bytes(a) + tile_bytes(b)


def proxy_fence(builder):
    """Orders this thread's generic-proxy shared-memory writes before async-proxy reads."""
    inline_asm(builder, PROXY_FENCE, "", [])


def wait_for_wgmma(builder, accumulators: list, in_flight: int) -> list:
    """``wgmma.wait_group in_flight``: all but the last ``in_flight`` committed groups are
    done. The asm ties every accumulator register (fp32, or int32 for int8 dots), so that
    LLVM moves no use of them above it; the registers of groups still in flight are only
    passed through."""
    total = len(accumulators)
    integer = bool(accumulators) and accumulators[0].type == I32
    waited = inline_asm(builder, f"wgmma.wait_group.sync.aligned {in_flight};",
                        ",".join(["=r" if integer else "=f"] * total +
                                 [str(i) for i in range(total)]),
                        accumulators, register_struct(builder, [I32 if integer else F32] * total))
    return [builder.extract_value(waited, i) for i in range(total)]


def _descriptor_high(leading_bytes: int, stride_bytes: int, width: int) -> int:
    """Bits 16-63 of a wgmma shared-memory matrix descriptor: leading and stride byte
    offsets (in 16-byte units), base offset 0, the layout type of a ``width``-byte
    swizzle."""
    return ((leading_bytes >> 4) << 16) | ((stride_bytes >> 4) << 32) | \
        (SWIZZLE_MODES[width] << 62)


def _descriptor(builder, address, high: int):
    """i64 descriptor of the matrix at shared-window ``address`` (i32): its 14-bit start
    field is address / 16; offsets added later stay inside it (shared memory < 256 KB)."""
    start = builder.and_(builder.lshr(address, ir.Constant(I32, 4)), ir.Constant(I32, 0x3FFF))
    return builder.or_(builder.zext(start, I64), ir.Constant(I64, high))


def _n_chunk(n: int) -> int:
    """Columns of C per instruction: all of N when it fits, else the largest multiple of 64
    up to 256 that divides N."""
    if n <= MAX_N:
        return n
    return next(w for w in range(MAX_N, 0, -64) if n % w == 0)


def lower_wgmma(ctx, op) -> list:
    b = ctx.builder
    a, b_operand, acc = op.operands
    layout = ctx.plan.mma[op]
    (m, k), (_, n) = a.type.shape, b_operand.type.shape
    element = a.element
    size = element.itemsize
    c = lambda v: ir.Constant(I32, v)   # noqa: E731

    integer = is_int8(element)
    # Operand tiles (``mma.OperandTiles``); an int8 or fp32 (tf32) B that the threads store
    # goes K-major (neither has a transpose on wgmma). Staged operands were fenced for the
    # async proxy by their loop's async_wait.
    tiles = OperandTiles(ctx.plan, op, b_k_major=threads_store_b_k_major(element))
    tile_a, tile_b, m_major_a, k_major_b = tiles.a, tiles.b, tiles.m_major_a, tiles.k_major_b
    registers_a = a_in_registers(ctx.plan, op)
    root, a_base, b_base = tiles.place(ctx, None if registers_a else a, tile_bytes(a),
                                       proxy_fence)

    warpgroup = ctx.threads.warpgroup
    block_rows = layout.tile(0)
    # Panel widths: A's rows hold K (M-major: M), B's hold N (N-major) or K (K-major).
    width_a, width_b = tile_a.width, tile_b.width
    groups_n = layout.warps_per_cta[1]
    desc_a = None
    if not registers_a:
        a_start = b.add(root, a_base)
        if groups_n == 1:
            # Warpgroup g's slices of C start at row 64 g of each block of 64 * warpgroups
            # rows: that many rows of a K-major A, panels of an M-major one.
            first = WGMMA_ROWS * size // width_a * k * width_a if m_major_a \
                else WGMMA_ROWS * width_a
            a_start = b.add(a_start, b.mul(warpgroup, c(first)))
        # An M-major A is read as an N-major B is: panels K * W bytes apart.
        desc_a = _descriptor(b, a_start, _descriptor_high(k * width_a if m_major_a else 16,
                                                          PHASE_ROWS * width_a, width_a))
    b_start = b.add(root, b_base)
    columns = n // groups_n              # this warpgroup's columns of C
    if groups_n > 1:
        # One 64-row block; warpgroup g computes columns [g, g + 1) * columns of C
        # (``Mma.warp_columns``): a K-major B's rows from there, an N-major B's panels
        # (whole ones: ``mma_layout.wgmma_warps``).
        assert layout.warp_columns == columns, layout
        first = columns * width_b if k_major_b else columns * size // width_b * k * width_b
        b_start = b.add(b_start, b.mul(warpgroup, c(first)))
    desc_b = _descriptor(b, b_start,
                         _descriptor_high(16 if k_major_b else k * width_b,
                                          PHASE_ROWS * width_b, width_b))

    accumulator_regs = ctx.regs(acc, Layout(layout))
    widen = acc.element.bits == 16
    accumulators = [b.fpext(r, F32) if widen else r for r in accumulator_regs]
    chunk = _n_chunk(columns)
    per_row = 2 * (columns // 8)         # accumulator registers per slot row (Mma layout)
    k_step = K_STEP_BYTES // size
    count = chunk // 2                   # accumulator registers of one instruction
    outputs = ", ".join(f"${i}" for i in range(count))
    # A: a descriptor, or its four registers of two f16 / bf16 each
    # (``register_operands.a_register_fragments``).
    a_text, a_constraints = (f"{{${count}, ${count + 1}, ${count + 2}, ${count + 3}}}",
                             ["r"] * 4) if registers_a else (f"${count}", ["l"])
    after_a = count + len(a_constraints)
    # scale-d is a predicate operand (true: D = A*B + D), as ptxas wants for chaining.
    operands = f"{{{outputs}}}, {a_text}, ${after_a}, ${after_a + 1}, 1, 1"
    if integer:
        # Integer forms take neither scale nor transpose immediates.
        text = (f"wgmma.mma_async.sync.aligned.m64n{chunk}k{k_step}.s32.s8.s8 "
                f"{{{outputs}}}, {a_text}, ${after_a}, ${after_a + 1};")
    elif element.is_fp32():
        text = f"wgmma.mma_async.sync.aligned.m64n{chunk}k{k_step}.f32.tf32.tf32 {operands};"
    else:
        kind = "bf16" if element.is_bf16() else "f16"
        # A from registers has no transpose operand (imm-trans-a).
        transposes = f"{int(not k_major_b)}" if registers_a else \
            f"{int(m_major_a)}, {int(not k_major_b)}"
        text = (f"wgmma.mma_async.sync.aligned.m64n{chunk}k{k_step}.f32.{kind}.{kind} "
                f"{operands}, {transposes};")
    register = "=r" if integer else "=f"
    constraints = ",".join([register] * count + a_constraints + ["l", "b"] +
                           [str(i) for i in range(count)])
    result_type = register_struct(b, [I32 if integer else F32] * count)
    accumulate = ir.Constant(ir.IntType(1), 1)

    def slots(tm, first_column):
        """Mma-layout register indices, in the instruction's register order."""
        return [(2 * tm + ((i >> 1) & 1)) * per_row + 2 * (first_column // 8 + (i >> 2)) + (i & 1)
                for i in range(count)]

    def offset(descriptor, byte_offset: int):
        return b.add(descriptor, ir.Constant(I64, byte_offset >> 4)) if byte_offset else descriptor

    if registers_a:
        a_fragments = a_register_fragments(ctx, a, layout, m // block_rows, k // k_step)
    inline_asm(b, "wgmma.fence.sync.aligned;", "", [])
    # One accumulator's whole chain over K, then the next (the order Triton issues them in).
    for tm in range(m // block_rows):
        for first_column in range(0, columns, chunk):
            indices = slots(tm, first_column)
            panel = first_column * size // width_b
            for kk in range(0, k, k_step):
                k_bytes = kk * size
                if registers_a:
                    a_operands = a_fragments[tm][kk // k_step]
                elif m_major_a:
                    a_panel = tm * block_rows * size // width_a
                    a_operands = [offset(desc_a, a_panel * k * width_a + kk * width_a)]
                else:
                    a_k = (k_bytes // width_a) * m * width_a + k_bytes % width_a
                    a_operands = [offset(desc_a, a_k + tm * block_rows * width_a)]
                if k_major_b:
                    b_k = (k_bytes // width_b) * n * width_b + k_bytes % width_b
                    descriptor_b = offset(desc_b, b_k + first_column * width_b)
                else:
                    descriptor_b = offset(desc_b, panel * k * width_b + kk * width_b)
                result = inline_asm(b, text, constraints,
                                    a_operands + [descriptor_b, accumulate] +
                                    [accumulators[i] for i in indices], result_type)
                for position, index in enumerate(indices):
                    accumulators[index] = b.extract_value(result, position)
    inline_asm(b, "wgmma.commit_group.sync.aligned;", "", [])
    if op.attrs.get("wgmma_deferred"):
        # Still being written: a later ``wgmma_wait`` retires the group before any use.
        return accumulators
    in_flight = op.attrs.get("wgmma_in_flight", 0)
    accumulators = wait_for_wgmma(b, accumulators, in_flight)
    if in_flight and not op.attrs.get("warp_specialized"):
        # Each warp waits for its own share of the previous group: all are done before
        # anyone overwrites their stages (a producer warp hears it from each warp instead).
        ctx.shared.barrier()
    if widen:
        return [b.fptrunc(r, llvm_type(acc.element)) for r in accumulators]
    return accumulators
