"""Strided 2D copy: one BLOCK_M x BLOCK_N tile per program."""
import aotk
import aotk.language as tl


@aotk.jit
def copy2d_kernel(src, dst, M, N, stride_src, stride_dst, BLOCK_M: tl.constexpr,
                  BLOCK_N: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    tile = tl.load(src + rows[:, None] * stride_src + cols[None, :], mask=mask)
    tl.store(dst + rows[:, None] * stride_dst + cols[None, :], tile, mask=mask)
