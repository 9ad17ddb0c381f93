"""Dot loops whose operand loads the pipeline stages beyond one dot of two plain loads
(tests/test_pipeline_shapes.py): two dots sharing a tile, a transposed B, a 3-d descriptor
tile reshaped to 2-d, and liger-kernel's fused SwiGLU forward, which has all three."""
import aotk
import aotk.language as tl


@aotk.jit
def two_dots_kernel(a_ptr, b_ptr, b2_ptr, c_ptr, c2_ptr, M, N, K,
                    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                    CONVERT_IN_LOOP: tl.constexpr = False):
    """c = a @ b, c2 = a @ b2: one tile of a feeds both dots. a [M, K], b, b2 [K, N]. With
    CONVERT_IN_LOOP, acc2 also takes acc's transpose every trip: a layout conversion
    through shared memory while the stages are live (tests/test_pipeline_budget.py)."""
    rows = tl.program_id(0) * BM + tl.arange(0, BM)
    cols = tl.program_id(1) * BN + tl.arange(0, BN)
    depth = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), tl.float32)
    acc2 = tl.zeros((BM, BN), tl.float32)
    for k in range(0, K, BK):
        x = tl.load(a_ptr + rows[:, None] * K + (k + depth)[None, :])
        w = tl.load(b_ptr + (k + depth)[:, None] * N + cols[None, :])
        w2 = tl.load(b2_ptr + (k + depth)[:, None] * N + cols[None, :])
        acc = tl.dot(x, w, acc)
        acc2 = tl.dot(x, w2, acc2)
        if CONVERT_IN_LOOP:
            acc2 += tl.trans(acc)
    out = rows[:, None] * N + cols[None, :]
    tl.store(c_ptr + out, acc)
    tl.store(c2_ptr + out, acc2)


@aotk.jit
def trans_b_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                   BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                   PRECISION: tl.constexpr = "tf32"):
    """c = a @ b.T with b [N, K] (a linear layer's weight); fp32 dots at PRECISION."""
    rows = tl.program_id(0) * BM + tl.arange(0, BM)
    cols = tl.program_id(1) * BN + tl.arange(0, BN)
    depth = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), tl.float32)
    for k in range(0, K, BK):
        x = tl.load(a_ptr + rows[:, None] * K + (k + depth)[None, :])
        w = tl.load(b_ptr + cols[:, None] * K + (k + depth)[None, :])
        acc = tl.dot(x, tl.trans(w), acc, input_precision=PRECISION)
    tl.store(c_ptr + rows[:, None] * N + cols[None, :], acc)


@aotk.jit
def trans_b_descriptor_kernel(a_desc, b_desc, c_ptr, M, N, K,
                              BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """c = a @ b.T through host descriptors: a [M, K] blocks [BM, BK], b [N, K] [BN, BK]."""
    row, col = tl.program_id(0) * BM, tl.program_id(1) * BN
    acc = tl.zeros((BM, BN), tl.float32)
    for k in range(0, K, BK):
        acc = tl.dot(a_desc.load([row, k]), tl.trans(b_desc.load([col, k])), acc)
    rows = row + tl.arange(0, BM)
    cols = col + tl.arange(0, BN)
    tl.store(c_ptr + rows[:, None] * N + cols[None, :], acc)


@aotk.jit
def _batched_tile(x_desc, w_desc, c_ptr, S, N, K, BM: tl.constexpr, BN: tl.constexpr,
                  BK: tl.constexpr):
    """c[batch] = x[batch] @ w for this program's tile, x read in [1, BM, BK] blocks."""
    batch = tl.program_id(2)
    row, col = tl.program_id(0) * BM, tl.program_id(1) * BN
    acc = tl.zeros((BM, BN), tl.float32)
    for k in range(0, K, BK):
        x = tl.reshape(x_desc.load([batch, row, k]), [BM, BK])
        acc = tl.dot(x, w_desc.load([k, col]), acc)
    rows = row + tl.arange(0, BM)
    cols = col + tl.arange(0, BN)
    tl.store(c_ptr + batch * S * N + rows[:, None] * N + cols[None, :], acc)


@aotk.jit
def reshape_3d_kernel(x_desc, w_desc, c_ptr, S, N, K,
                      BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """c[batch] = x[batch] @ w: x [B, S, K] read in [1, BM, BK] blocks, w [K, N]."""
    _batched_tile(x_desc, w_desc, c_ptr, S, N, K, BM, BN, BK)


@aotk.jit
def reshape_3d_device_descriptor_kernel(x_ptr, w_ptr, c_ptr, B, S, N, K,
                                        BM: tl.constexpr, BN: tl.constexpr,
                                        BK: tl.constexpr):
    """``reshape_3d_kernel`` with descriptors made in the kernel."""
    x_desc = tl.make_tensor_descriptor(x_ptr, shape=[B, S, K], strides=[S * K, K, 1],
                                       block_shape=[1, BM, BK])
    w_desc = tl.make_tensor_descriptor(w_ptr, shape=[K, N], strides=[N, 1],
                                       block_shape=[BK, BN])
    _batched_tile(x_desc, w_desc, c_ptr, S, N, K, BM, BN, BK)


@aotk.jit
def swiglu_kernel(x_desc, wg_desc, wu_desc, out_ptr, S, N, K,
                  BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """liger-kernel's fused SwiGLU forward: out = silu(x @ wg.T) * (x @ wu.T), x [B, S, K]
    in [1, BM, BK] blocks, wg and wu [N, K]: one tile of x feeds both dots."""
    batch = tl.program_id(2)
    row, col = tl.program_id(0) * BM, tl.program_id(1) * BN
    acc_gate = tl.zeros((BM, BN), tl.float32)
    acc_up = tl.zeros((BM, BN), tl.float32)
    for k in range(0, K, BK):
        x = tl.reshape(x_desc.load([batch, row, k]), [BM, BK])
        acc_gate = tl.dot(x, tl.trans(wg_desc.load([col, k])), acc=acc_gate)
        acc_up = tl.dot(x, tl.trans(wu_desc.load([col, k])), acc=acc_up)
    out = acc_gate * tl.sigmoid(acc_gate) * acc_up
    rows = row + tl.arange(0, BM)
    cols = col + tl.arange(0, BN)
    tl.store(out_ptr + batch * S * N + rows[:, None] * N + cols[None, :],
             out.to(out_ptr.dtype.element_ty))


@aotk.jit
def matmul_fp32_out_kernel(a_ptr, b_ptr, d_ptr, c_ptr, M, N, K, BM: tl.constexpr,
                           BN: tl.constexpr, BK: tl.constexpr, ADD_TILE: tl.constexpr):
    """c = a @ b stored as the fp32 accumulator itself (tests/test_pipeline_drain.py); with
    ADD_TILE, the [M, N] tile d is also added to the accumulator every trip, a load wanted
    only in the dot's mma layout (tests/test_load_layouts.py)."""
    rows = tl.program_id(0) * BM + tl.arange(0, BM)
    cols = tl.program_id(1) * BN + tl.arange(0, BN)
    depth = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rows[:, None] * K + (k + depth)[None, :])
        b = tl.load(b_ptr + (k + depth)[:, None] * N + cols[None, :])
        acc = tl.dot(a, b, acc)
        if ADD_TILE:
            acc += tl.load(d_ptr + rows[:, None] * N + cols[None, :])
    tl.store(c_ptr + rows[:, None] * N + cols[None, :], acc)


@aotk.jit
def rescaled_first_kernel(q_ptr, k_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """Two dots a trip like flash attention's, the carried accumulator rescaled before the
    first: out = sum over key blocks of (q @ k.T) @ k, halved each block
    (tests/test_attention.py: nothing retires p @ v's group before that read)."""
    rows = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK, BLOCK], dtype=tl.float32)
    q = tl.load(q_ptr + rows[:, None] * BLOCK + rows[None, :])
    for start in range(0, n, BLOCK):
        acc = acc * 0.5
        k = tl.load(k_ptr + (start + rows)[:, None] * BLOCK + rows[None, :])
        scores = tl.dot(q, tl.trans(k))
        acc = tl.dot(scores.to(tl.float16), k, acc)
    tl.store(out_ptr + rows[:, None] * BLOCK + rows[None, :], acc)
