"""A dot whose A is computed from two loads (fla's gated keys, ``chunk_fwd_kernel_h``):
``acc += (k * exp2(g_last[:, None] - g)) @ v`` over a loop of chunks, the loads staged by
the pipeline (num_stages > 1)."""
import aotk
import aotk.language as tl


@aotk.jit
def gated_dot_kernel(k_ptr, g_ptr, g_last_ptr, v_ptr, out_ptr, CHUNKS,
                     M: tl.constexpr, K: tl.constexpr, N: tl.constexpr):
    rows, inner, columns = tl.arange(0, M), tl.arange(0, K), tl.arange(0, N)
    g_last = tl.load(g_last_ptr + rows)
    acc = tl.zeros([M, N], dtype=tl.float32)
    for chunk in range(CHUNKS):
        tile = chunk * M * K + rows[:, None] * K + inner[None, :]
        k = tl.load(k_ptr + tile)
        g = tl.load(g_ptr + tile)
        gated = (k * tl.exp2(g_last[:, None] - g)).to(k.dtype)
        v = tl.load(v_ptr + chunk * K * N + inner[:, None] * N + columns[None, :])
        acc = tl.dot(gated, v, acc)
    tl.store(out_ptr + rows[:, None] * N + columns[None, :], acc)


@aotk.jit
def gated_dot_bt_kernel(k_ptr, g_ptr, v_ptr, out_ptr, CHUNKS,
                        M: tl.constexpr, K: tl.constexpr, N: tl.constexpr):
    """``acc += (k * exp2(g)) @ v^T``: B read K-major, as wgmma's tf32 dots need it."""
    rows, inner, columns = tl.arange(0, M), tl.arange(0, K), tl.arange(0, N)
    acc = tl.zeros([M, N], dtype=tl.float32)
    for chunk in range(CHUNKS):
        tile = chunk * M * K + rows[:, None] * K + inner[None, :]
        k = tl.load(k_ptr + tile)
        gated = (k * tl.exp2(tl.load(g_ptr + tile))).to(k.dtype)
        v = tl.load(v_ptr + chunk * K * N + columns[:, None] * K + inner[None, :])
        acc = tl.dot(gated, tl.trans(v), acc)
    tl.store(out_ptr + rows[:, None] * N + columns[None, :], acc)
