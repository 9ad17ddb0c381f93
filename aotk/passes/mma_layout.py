"""Tensor-core accumulator layouts: which instruction computes a ``dot`` and where its
result's elements live.

In: a kir ``dot`` op, ``num_warps``, whether the target has Hopper's ``wgmma`` and
Ampere's ``mma.sync`` shapes (``targets.has_ampere_mma``; Turing has fp16 only). Out: an
``Mma`` layout naming the instruction (``wgmma`` or ``mma.sync``) and how warps tile the
result, or None when the dot runs on CUDA cores. ``passes.layouts`` gives the dot's result
(and a loop's accumulator) this layout; ``passes.pipeline`` stages the operands for the
instruction it names.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..ir.kir import ELEMENTWISE_OPS

MMA_TILE = (16, 8)   # rows x columns of one mma.sync m16n8kK accumulator tile


@dataclass(frozen=True)
class Mma:
    """The accumulator fragments of ``mma.sync`` m16n8: in each 16x8 tile, lane l holds rows
    l/4 and l/4 + 8 at columns 2*(l%4) and 2*(l%4) + 1. Warps tile [M, N] as
    ``warps_per_cta`` (warp w sits at (w % wm, w / wm)); the CTA tile repeats over the block.

    Hopper's ``wgmma`` m64nN accumulator is this same layout with warps (num_warps, 1): warp
    w of a warpgroup holds rows 16w..16w+15 of the group's 64, in the same 16x8 fragments.
    ``instruction`` says which one computes the dot; it does not change where elements live,
    so two layouts that differ only there are equal.

    ``warp_columns``: each warp column holds that many consecutive columns (0: warp columns
    interleave 8-column tiles, as mma.sync's warps do). wgmma with N split over warpgroups
    (warps (4, g), a 64-row dot on 8 warps) gives each warpgroup's instruction its own
    slice of N, as Triton's [4, 2] does: B's descriptor then starts at the slice, whether
    B is N-major or K-major."""
    warps_per_cta: tuple    # (along M, along N)
    instruction: str = field(default="mma.sync", compare=False)
    warp_columns: int = 0
    rank = 2

    def tile(self, dim: int) -> int:
        if dim == 1 and self.warp_columns:
            return self.warp_columns * self.warps_per_cta[1]
        return MMA_TILE[dim] * self.warps_per_cta[dim]

    # What a reduction across the fragments needs, named as ``layouts.Blocked`` names it:
    # per 16x8 tile a lane holds 2 rows (8 apart) and 2 adjacent columns; lanes split the
    # rows 8 ways (lane / 4) and the columns 4 ways (lane % 4).
    size_per_thread = (2, 2)
    threads_per_warp = (8, 4)
    order = (1, 0)   # a lane's two adjacent columns: consecutive registers

    def lane_step(self, axis: int) -> int:
        """Elements along ``axis`` between the first elements of neighbouring lanes: rows
        l/4, columns 2*(l%4)."""
        return 1 if axis == 0 else 2

    def strides(self, axis: int) -> tuple:
        """(lane, warp) id distance between neighbours along ``axis``."""
        return (4, 1) if axis == 0 else (1, self.warps_per_cta[0])

    def slot_offsets(self, axis: int, size: int) -> list:
        if size == 1:
            return [0]
        pair = (0, 8) if axis == 0 else (0, 1)
        if axis == 1 and self.warp_columns:
            # The warp's own columns, 8-column tiles one after the other (its base is
            # warp column * warp_columns: ``backend.geometry``); the block is one tile.
            assert size == self.tile(1), (size, self)
            return [r * MMA_TILE[1] + p for r in range(self.warp_columns // MMA_TILE[1])
                    for p in pair]
        return [r * self.tile(axis) + p for r in range(max(1, size // self.tile(axis)))
                for p in pair]

    def __str__(self) -> str:
        columns = f" warp_columns={self.warp_columns}" if self.warp_columns else ""
        return f"#mma<m16n8 wpc={list(self.warps_per_cta)}{columns} {self.instruction}>"


WGMMA_ROWS = 64          # rows of C one warpgroup's wgmma computes
SWIZZLE_BYTES = 128      # the widest swizzle: operand rows cut into 128-byte panels
# Row widths of an operand tile that one of wgmma's swizzle modes reads (``backend.swizzle``
# lays such rows out as the hardware's 32B / 64B / 128B swizzle): a whole number of
# 128-byte panels, or one narrower row (Triton's K = 32 fp16 tiles are 64-byte rows).
NARROW_SWIZZLES = (32, 64)


def wgmma_row_fits(row_bytes: int) -> bool:
    """Whether an operand tile with rows of ``row_bytes`` has a wgmma swizzle mode."""
    return row_bytes % SWIZZLE_BYTES == 0 or row_bytes in NARROW_SWIZZLES


def k_major_staged(op) -> bool:
    """Whether a pipelined loop staged both operands of ``op`` K-major: A as loaded
    ([M, K]) and B through a transpose (``shared_read`` with ``transposed``: an [N, K]
    stage)."""
    a, b = (value.owner for value in op.operands[:2])
    return a is not None and a.opcode == "shared_read" and not a.attrs.get("transposed") \
        and b is not None and b.opcode == "shared_read" and b.attrs.get("transposed", False)


def is_int8(element) -> bool:
    """Signed 8-bit integers: the operands of an int8 dot (s8 x s8 -> s32)."""
    return element.is_int() and element.is_int_signed() and element.bits == 8


def staged_k_major(op, a_stage, b_stage) -> bool:
    """Whether an int8 or fp32 (tf32) dot ``op`` has what wgmma, with no transpose for
    them, reads: its operands K-major. A stage is None where the threads store the operand,
    else whether the operand is staged transposed. int8: B staged through a transpose or
    stored by the threads (K-major, ``threads_store_b_k_major``). tf32: that B, and A
    staged as loaded ([M, K]) or stored by the threads (row by row), but not a B the
    threads store beside an A that is another dot's result (``a_from_dot``). Asked before
    a loop is staged (``passes.pipeline_shape``) and after (``k_major_operands``)."""
    b_k_major = b_stage is None or b_stage
    if is_int8(op.operands[0].element):
        return b_k_major
    return b_k_major and not a_stage and not (b_stage is None and a_from_dot(op))


def _stage(value):
    owner = value.owner
    if owner is None or owner.opcode != "shared_read":
        return None
    return bool(owner.attrs.get("transposed", False))


def k_major_operands(op) -> bool:
    """``staged_k_major`` of ``op`` as its operands are staged (``shared_read``) or not."""
    return staged_k_major(op, _stage(op.operands[0]), _stage(op.operands[1]))


def a_from_dot(op) -> bool:
    """Whether the A of ``op`` is another dot's result, through elementwise ops: mma.sync
    takes such an fp32 A from the registers it was computed in, where tf32 wgmma reads it
    from shared memory. With a B the threads store, that dot stays on mma.sync: on wgmma
    fla's chunk_fwd_kernel_o (A = q k^T, masked) took 217 registers, 165 on mma.sync
    (Triton 175)."""
    work, seen = [op.operands[0]], set()
    while work:
        owner = work.pop().owner
        if owner is None or id(owner) in seen:
            continue
        seen.add(id(owner))
        if owner.opcode == "dot":
            return True
        if owner.opcode in ELEMENTWISE_OPS:
            work.extend(owner.operands)
    return False


def threads_store_b_k_major(element) -> bool:
    """Whether wgmma reads a B of ``element`` that the threads store (not staged) K-major:
    int8 and fp32 (tf32) operands, which have no transpose on wgmma."""
    return is_int8(element) or element.is_fp32()


def wgmma_warps(op, num_warps: int, k_major: bool | None = None,
                b_stored_k_major: bool = False, a_stored_m_major: bool = False) -> tuple | None:
    """How warps tile the result when Hopper's ``wgmma`` can compute this dot, else None:
    fp16 / bf16 operands (the only ones whose B may be N-major, as it is staged), fp32
    ones read as tf32 when both reach it K-major, or int8 ones whose B does
    (``k_major_operands``: wgmma has no transpose for either); whole warpgroups, K (A's
    rows) and N (B's rows) rows of a swizzle mode (``wgmma_row_fits``).
    Warpgroups stack along M, 64 rows each, (num_warps, 1); a dot with fewer rows than
    that splits N among them, (4, num_warps / 4), each warpgroup a contiguous slice
    (``Mma.warp_columns``) whose B descriptor starts at its first row (K-major B) or, for
    an N-major B, its first panel: the slice must then be whole panels (Triton's [4, 2];
    fla's chunked kernels on 8 warps, BT = 64). Not for int8.
    ``k_major``: whether the operands are (``passes.pipeline``, before it stages them, says
    whether it will); None: ``k_major_operands`` for tf32 and int8,
    ``k_major_staged`` for 16-bit operands.
    ``b_stored_k_major``: the threads store B K-major (``layout_facts.column_read_operands``);
    A, not staged, is stored K-major, or M-major with ``a_stored_m_major`` (16-bit only:
    wgmma's imm-trans-a)."""
    a, b = op.operands[:2]
    if len(op.result.type.shape) != 2 or a.element != b.element or num_warps % 4:
        return None
    tf32 = a.element.is_fp32()
    if a_stored_m_major and a.element.itemsize != 2:
        return None
    if tf32:
        # input_precision "ieee" and "tf32x3" stay off tensor cores' single tf32 product.
        if op.attrs.get("precision") != "tf32" or not (
                b_stored_k_major or (k_major_operands(op) if k_major is None else k_major)):
            return None
        b_is_k_major = True
    elif is_int8(a.element):
        if not (b_stored_k_major or (k_major_operands(op) if k_major is None else k_major)):
            return None
        b_is_k_major = True
    elif not (a.element.is_fp16() or a.element.is_bf16()):
        return None
    else:
        b_is_k_major = b_stored_k_major or (k_major_staged(op) if k_major is None else k_major)
    (m, k), (_, n) = a.type.shape, b.type.shape
    size = a.element.itemsize
    if not wgmma_row_fits(k * size) or not wgmma_row_fits(n * size):
        return None
    warpgroups = num_warps // 4
    if m % (WGMMA_ROWS * warpgroups) == 0:
        return (num_warps, 1)
    columns = n // warpgroups
    n_major_panel = min(n * size, SWIZZLE_BYTES)
    if not is_int8(a.element) and m % WGMMA_ROWS == 0 and columns % MMA_TILE[1] == 0 and \
            n % warpgroups == 0 and (b_is_k_major or columns * size % n_major_panel == 0):
        return (4, warpgroups)
    return None


def wgmma_fits(op, num_warps: int, k_major: bool | None = None) -> bool:
    """Whether Hopper's ``wgmma`` can compute this dot (``wgmma_warps``)."""
    return wgmma_warps(op, num_warps, k_major) is not None


def choose_mma(op, num_warps: int, wgmma: bool = False, ampere_mma: bool = True,
               k_major: bool | None = None, b_stored_k_major: bool = False,
               a_stored_m_major: bool = False):
    """The accumulator layout of a ``dot`` that tensor cores can compute, else None (the dot
    then runs on CUDA cores). With ``wgmma`` (an sm_90 target) and a dot ``wgmma_fits``,
    warps as ``wgmma_warps`` places them. Otherwise mma.sync (fp16 / bf16, fp32 as tf32,
    int8; K a multiple of the instruction's depth; fp16 alone without ``ampere_mma``), its
    warps splitting M and N as evenly as the tile counts allow (Triton's rule), repeating
    tiles where there are more warps than tiles. ``k_major``:
    ``b_stored_k_major`` and ``a_stored_m_major`` as ``wgmma_warps`` takes them."""
    warps = wgmma_warps(op, num_warps, k_major, b_stored_k_major,
                        a_stored_m_major) if wgmma else None
    if warps is not None:
        n = op.result.type.shape[1]
        return Mma(warps, "wgmma", n // warps[1] if warps[1] > 1 else 0)
    a, b = op.operands[:2]
    if len(op.result.type.shape) != 2 or a.element != b.element:
        return None
    element = a.element
    if not ampere_mma and not element.is_fp16():
        return None
    if element.is_fp16() or element.is_bf16():
        depth = 16
    elif element.is_fp32() and op.attrs.get("precision") == "tf32":
        depth = 8
    elif is_int8(element):
        depth = 32
    else:
        return None
    if a.type.shape[1] % depth:
        return None
    m, n = op.result.type.shape
    if m < MMA_TILE[0] or n < MMA_TILE[1]:
        return None
    warps = [1, 1]
    while warps[0] * warps[1] < num_warps:
        if m // (MMA_TILE[0] * warps[0]) >= n // (MMA_TILE[1] * warps[1]) and \
                warps[0] < m // MMA_TILE[0]:
            warps[0] *= 2
        else:
            warps[1] *= 2
    # More warps than the block has tiles (16 x 16 on 4 warps): the extra warps repeat
    # the first ones' tiles along N (or M), as Triton's warpsPerTileV2 places them; the
    # block still runs on tensor cores. Where the block has tiles enough, this is the
    # arrangement it always had.
    return Mma(tuple(warps))
