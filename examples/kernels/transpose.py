"""Out-of-place matrix transpose: out[N, M] = x[M, N].T, one BLOCK_M x BLOCK_N tile per
program. ``tl.trans`` moves the tile through shared memory, so both the load and the store
stay coalesced along rows."""
import aotk
import aotk.language as tl


@aotk.jit
def transpose_kernel(x_ptr, out_ptr, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    tile = tl.load(x_ptr + rows[:, None] * N + cols[None, :], mask=mask)
    tl.store(out_ptr + cols[:, None] * M + rows[None, :], tl.trans(tile), mask=tl.trans(mask))
