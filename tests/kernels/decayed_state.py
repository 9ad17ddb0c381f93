"""A chunked recurrence of the shape of fla's chunk_fwd_kernel_h (tests/test_pipeline_staged_loads.py):
its loop carries a [BK, BV] state, saves it every few chunks, decays it by gates loaded
each trip (a scalar and a vector of the chunk's last row, a [BT] vector, a [BK, BT] tile)
and adds k^T @ v, with k^T read from a row-major k as a [BK, BT] tile (contiguous down its
columns) and v (or k^T) scaled by the gates before the dot: every load of the loop reaches
the dot through other ops, and the loop stores."""
import aotk
import aotk.language as tl


@aotk.jit
def decayed_state_kernel(k_ptr, v_ptr, g_ptr, gk_ptr, states_ptr, final_ptr, T,
                         K: tl.constexpr, V: tl.constexpr, BT: tl.constexpr,
                         BK: tl.constexpr, BV: tl.constexpr, SAVE_EVERY: tl.constexpr,
                         SCALAR_GATE: tl.constexpr, VECTOR_GATE: tl.constexpr):
    """k [T, K], v [T, V] (16-bit), g [T], gk [T, K] (fp32). For each chunk t of BT rows:
    states[t // SAVE_EVERY] = state when t % SAVE_EVERY == 0; then, with last the chunk's
    last row, state *= exp(g[last]) and v rows *= exp(g[last] - g[row]) (SCALAR_GATE),
    state rows *= exp(gk[last]) and k *= exp(gk[last] - gk) (VECTOR_GATE); then
    state += k_chunk^T @ v_chunk. final = state after the last chunk. Program (i, j)
    computes the [BK, BV] block (i, j) of the [K, V] state."""
    o_k = tl.program_id(0) * BK + tl.arange(0, BK)
    o_v = tl.program_id(1) * BV + tl.arange(0, BV)
    state = tl.zeros([BK, BV], dtype=tl.float32)
    for t in range(tl.cdiv(T, BT)):
        o_t = t * BT + tl.arange(0, BT)
        in_t = o_t < T
        if t % SAVE_EVERY == 0:
            saved = states_ptr + (t // SAVE_EVERY) * K * V + o_k[:, None] * V + o_v[None, :]
            tl.store(saved, state.to(states_ptr.dtype.element_ty))
        k_tile = tl.load(k_ptr + o_t[None, :] * K + o_k[:, None], mask=in_t[None, :],
                         other=0.0)
        v_tile = tl.load(v_ptr + o_t[:, None] * V + o_v[None, :], mask=in_t[:, None],
                         other=0.0)
        last = tl.minimum((t + 1) * BT, T) - 1
        if SCALAR_GATE:
            g_last = tl.load(g_ptr + last)
            g = tl.load(g_ptr + o_t, mask=in_t, other=0.0)
            state *= tl.exp(g_last)
            v_tile = (v_tile * tl.exp(g_last - g)[:, None]).to(v_tile.dtype)
        if VECTOR_GATE:
            gk_last = tl.load(gk_ptr + last * K + o_k)
            gk = tl.load(gk_ptr + o_t[None, :] * K + o_k[:, None], mask=in_t[None, :],
                         other=0.0)
            state *= tl.exp(gk_last)[:, None]
            k_tile = (k_tile * tl.exp(gk_last[:, None] - gk)).to(k_tile.dtype)
        state = tl.dot(k_tile, v_tile, state)
    tl.store(final_ptr + o_k[:, None] * V + o_v[None, :], state)


@aotk.jit
def accumulate_in_place_kernel(a_ptr, b_ptr, c_ptr, K, BLOCK: tl.constexpr):
    """c[:, :BLOCK] += a @ b chunk by chunk, where each trip also rewrites the a tile it
    read (a[:, k:k+BLOCK] *= 2): a later trip's a is then no longer what was there before
    the loop, so a's loads may not be copied ahead of the stores; b's may."""
    rows = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK, BLOCK], tl.float32)
    for k in range(0, K, BLOCK):
        a_tile = a_ptr + rows[:, None] * K + k + rows[None, :]
        a = tl.load(a_tile)
        b = tl.load(b_ptr + (k + rows[:, None]) * BLOCK + rows[None, :])
        acc = tl.dot(a, b, acc)
        tl.store(a_tile, a * 2)
    tl.store(c_ptr + rows[:, None] * BLOCK + rows[None, :], acc)


@aotk.jit
def scaled_by_a_wide_gate_kernel(a_ptr, b_ptr, gate_ptr, c_ptr, K, BM: tl.constexpr,
                                 BN: tl.constexpr, BK: tl.constexpr, GATE_ROWS: tl.constexpr):
    """c = sum over K chunks of a @ b, each chunk's product scaled by the sum of a
    [GATE_ROWS, BN] fp32 gate tile read through a pointer the loop advances
    (gate += GATE_ROWS * BN a trip): a plain tile too large to stage beside the dot's."""
    rows = tl.arange(0, BM)
    cols = tl.arange(0, BN)
    depth = tl.arange(0, BK)
    gate_rows = tl.arange(0, GATE_ROWS)
    gates = gate_ptr + gate_rows[:, None] * BN + cols[None, :]
    acc = tl.zeros([BM, BN], tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rows[:, None] * K + k + depth[None, :])
        b = tl.load(b_ptr + (k + depth[:, None]) * BN + cols[None, :])
        scale = tl.sum(tl.load(gates), 0)
        acc += tl.dot(a, b) * scale[None, :]
        gates += GATE_ROWS * BN
    tl.store(c_ptr + rows[:, None] * BN + cols[None, :], acc)
