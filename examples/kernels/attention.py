"""Fused attention forward (flash attention): out = softmax(q @ k.T * sm_scale) @ v per
(batch, head), q, k, v and out [Z, H, N_CTX, HEAD_DIM] contiguous, fp16 or bf16.

One program computes BLOCK_M query rows of one head: it walks the keys BLOCK_N at a time,
keeping the running row maximum m, the running sum of exponentials l and the unnormalized
output acc in registers (the online softmax), so the [N_CTX, N_CTX] scores never reach
memory. Exponentials are base 2 (the scale is folded into log2(e) * sm_scale). Causal
attention walks the blocks left of the diagonal without a mask, then the diagonal blocks
with one; non-causal walks every block without. M, the log-sum-exp of each row (natural
base, as the backward pass needs it), is written beside the output.

Grid: (cdiv(N_CTX, BLOCK_M), Z * H). N_CTX must be a multiple of BLOCK_N (and BLOCK_M), as
in Triton's tutorial, whose algorithm this is.
"""
import aotk
import aotk.language as tl


@aotk.jit
def _attend(acc, l_i, m_i, q, k_ptrs, v_ptrs, start, end, offs_m, offs_n, qk_scale,
            stride_kn, stride_vn, BLOCK_N: tl.constexpr, MASKED: tl.constexpr):
    """Folds keys [start, end) into (acc, l_i, m_i)."""
    k_ptrs += start * stride_kn
    v_ptrs += start * stride_vn
    for block in range(start, end, BLOCK_N):
        k = tl.load(k_ptrs)
        qk = tl.dot(q, tl.trans(k))
        if MASKED:
            causal = offs_m[:, None] >= (block + offs_n[None, :])
            qk = qk * qk_scale + tl.where(causal, 0, -1.0e6)
            m_ij = tl.maximum(m_i, tl.max(qk, 1))
            qk -= m_ij[:, None]
        else:
            m_ij = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
            qk = qk * qk_scale - m_ij[:, None]
        p = tl.math.exp2(qk)
        alpha = tl.math.exp2(m_i - m_ij)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        v = tl.load(v_ptrs)
        acc = tl.dot(p.to(v.dtype), v, acc)
        m_i = m_ij
        k_ptrs += BLOCK_N * stride_kn
        v_ptrs += BLOCK_N * stride_vn
    return acc, l_i, m_i


@aotk.jit
def attention_fwd_kernel(q_ptr, k_ptr, v_ptr, out_ptr, m_ptr, sm_scale, H, N_CTX,
                         stride_qz, stride_qh, stride_qm, stride_kz, stride_kh, stride_kn,
                         stride_vz, stride_vh, stride_vn, stride_oz, stride_oh, stride_om,
                         HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
                         BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr):
    start_m = tl.program_id(0)
    head = tl.program_id(1)
    z = head // H
    h = head % H
    q_ptr += z.to(tl.int64) * stride_qz + h.to(tl.int64) * stride_qh
    k_ptr += z.to(tl.int64) * stride_kz + h.to(tl.int64) * stride_kh
    v_ptr += z.to(tl.int64) * stride_vz + h.to(tl.int64) * stride_vh
    out_ptr += z.to(tl.int64) * stride_oz + h.to(tl.int64) * stride_oh

    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    q = tl.load(q_ptr + offs_m[:, None] * stride_qm + offs_d[None, :])
    k_ptrs = k_ptr + offs_n[:, None] * stride_kn + offs_d[None, :]
    v_ptrs = v_ptr + offs_n[:, None] * stride_vn + offs_d[None, :]

    m_i = tl.zeros([BLOCK_M], dtype=tl.float32) - float("inf")
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32) + 1.0
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    qk_scale = sm_scale * 1.44269504   # log2(e): exp(x) = exp2(x * log2(e))
    if CAUSAL:
        # Left of the diagonal: every key is visible. Then the diagonal blocks, masked.
        acc, l_i, m_i = _attend(acc, l_i, m_i, q, k_ptrs, v_ptrs, 0, start_m * BLOCK_M,
                                offs_m, offs_n, qk_scale, stride_kn, stride_vn, BLOCK_N,
                                False)
        acc, l_i, m_i = _attend(acc, l_i, m_i, q, k_ptrs, v_ptrs, start_m * BLOCK_M,
                                (start_m + 1) * BLOCK_M, offs_m, offs_n, qk_scale,
                                stride_kn, stride_vn, BLOCK_N, True)
    else:
        acc, l_i, m_i = _attend(acc, l_i, m_i, q, k_ptrs, v_ptrs, 0, N_CTX, offs_m, offs_n,
                                qk_scale, stride_kn, stride_vn, BLOCK_N, False)

    # l_i started at 1 with m_i at -inf: the first block's alpha (exp2(-inf) = 0) cleared it.
    m_i += tl.math.log2(l_i)
    acc = acc / l_i[:, None]
    tl.store(m_ptr + head * N_CTX + offs_m, m_i / 1.44269504)
    tl.store(out_ptr + offs_m[:, None] * stride_om + offs_d[None, :], acc.to(out_ptr.dtype.element_ty))
