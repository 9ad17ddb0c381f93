"""tl.dot kernels (issue 6, first step: the portable path) against numpy.

Shared by the interpreter, ptxas and GPU tests.
"""
from __future__ import annotations

import numpy as np

import aotk
import aotk.language as tl
from tests.kernels.elementwise import Case
from tests.kernels.elementwise import _round_bf16 as round_bf16


@aotk.jit
def dot_kernel(a_ptr, b_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr,
               TRANS_B: tl.constexpr, PRECISION: tl.constexpr, OUT16: tl.constexpr,
               BF16: tl.constexpr = False):
    rm = tl.arange(0, M)
    rn = tl.arange(0, N)
    rk = tl.arange(0, K)
    a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
    if TRANS_B:   # b stored as [N, K]: read through swapped strides, or transposed
        b = tl.trans(tl.load(b_ptr + rn[:, None] * K + rk[None, :]))
    else:
        b = tl.load(b_ptr + rk[:, None] * N + rn[None, :])
    if BF16:   # fp32 data rounded to bf16 operands
        a = a.to(tl.bfloat16)
        b = b.to(tl.bfloat16)
    if OUT16:
        c = tl.dot(a, b, out_dtype=tl.float16)
    else:
        c = tl.dot(a, b, input_precision=PRECISION)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], c)


@aotk.jit
def matmul_loop_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_M: tl.constexpr,
                       BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """C = relu(A @ B) tile by tile over a runtime K loop with masks (odd sizes)."""
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    for k0 in range(0, K, BLOCK_K):
        rk = k0 + tl.arange(0, BLOCK_K)
        a = tl.load(a_ptr + rm[:, None] * K + rk[None, :],
                    mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0)
        b = tl.load(b_ptr + rk[:, None] * N + rn[None, :],
                    mask=(rk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
    acc = tl.maximum(acc, 0.0)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(tl.float16),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


@aotk.jit
def batched_dot_kernel(a_ptr, b_ptr, c_ptr, B: tl.constexpr, M: tl.constexpr,
                       N: tl.constexpr, K: tl.constexpr):
    rb = tl.arange(0, B)[:, None, None]
    rm = tl.arange(0, M)[None, :, None]
    rn = tl.arange(0, N)[None, None, :]
    rk_col = tl.arange(0, K)[None, None, :]
    rk_row = tl.arange(0, K)[None, :, None]
    a = tl.load(a_ptr + rb * M * K + rm * K + rk_col)
    b = tl.load(b_ptr + rb * K * N + rk_row * N + rn)
    tl.store(c_ptr + rb * M * N + rm * N + rn, tl.dot(a, b))


@aotk.jit
def chain_dot_kernel(x_ptr, y_ptr, w_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr,
                     K: tl.constexpr, PRECISION: tl.constexpr):
    """(x @ y) @ w: the first dot's result, cast to w's type, is the second dot's A
    (Triton's test_dot chain-dot epilogue)."""
    rm = tl.arange(0, M)
    rn = tl.arange(0, N)
    rk = tl.arange(0, K)
    x = tl.load(x_ptr + rm[:, None] * K + rk[None, :])
    y = tl.load(y_ptr + rk[:, None] * N + rn[None, :])
    w = tl.load(w_ptr + rn[:, None] * N + rn[None, :])
    z = tl.dot(x, y, input_precision=PRECISION)
    z = tl.dot(z.to(w.dtype), w, input_precision=PRECISION)
    tl.store(out_ptr + rm[:, None] * N + rn[None, :], z)


@aotk.jit
def two_dots_kernel(x_ptr, y_ptr, w_ptr, out_ptr, N: tl.constexpr):
    """x @ y + x @ w: two independent dots whose tiles sit at the same shared offsets."""
    rn = tl.arange(0, N)
    offs = rn[:, None] * N + rn[None, :]
    x = tl.load(x_ptr + offs)
    tl.store(out_ptr + offs, tl.dot(x, tl.load(y_ptr + offs)) + tl.dot(x, tl.load(w_ptr + offs)))


def _two_dots_case(n):
    def make(rng):
        return {name: (rng.standard_normal(n * n) * 0.3).astype(np.float16)
                for name in ("x_ptr", "y_ptr", "w_ptr")} | {"out_ptr": np.zeros(n * n, np.float32)}

    def reference(args):
        x, y, w = (args[name].astype(np.float64).reshape(n, n) for name in ("x_ptr", "y_ptr", "w_ptr"))
        return {"out_ptr": (x @ y + x @ w).astype(np.float32).ravel()}
    return Case(f"two-dots-fp16-{n}", two_dots_kernel, make, (1,), {"N": n}, ("out_ptr",),
                reference, False, 1e-3)


def _chain_dot_case(dtype, m, n, k, precision, warps=4):
    def make(rng):
        return {"x_ptr": (rng.standard_normal(m * k) * 0.1).astype(dtype),
                "y_ptr": (rng.standard_normal(k * n) * 0.1).astype(dtype),
                "w_ptr": rng.standard_normal(n * n).astype(dtype),
                "out_ptr": np.zeros(m * n, np.float32)}

    def reference(args):
        as_input = _tf32 if precision == "tf32" else (lambda v: v)
        x, y, w = (as_input(args[name]).astype(np.float64) for name in ("x_ptr", "y_ptr", "w_ptr"))
        z = (x.reshape(m, k) @ y.reshape(k, n)).astype(np.float32).astype(dtype)
        return {"out_ptr": (as_input(z).astype(np.float64) @ w.reshape(n, n)).astype(np.float32)
                .ravel()}
    suffix = f"-{warps}-warps" if warps != 4 else ""
    return Case(f"chain-dot-{np.dtype(dtype).name}-{precision}-{m}x{n}x{k}{suffix}",
                chain_dot_kernel, make, (1,), {"M": m, "N": n, "K": k, "PRECISION": precision},
                ("out_ptr",), reference, False, 1e-2, num_warps=warps)


def _tf32(x):
    return (x.astype(np.float32).view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)


def _dot_case(name, dtype, m, n, k, trans_b=False, precision="ieee", out16=False, rtol=1e-4,
              bf16=False, warps=4):
    def make(rng):
        if np.dtype(dtype).kind == "i":
            a, b = (rng.integers(-128, 128, s).astype(dtype) for s in ((m, k), (k, n)))
        else:
            a, b = (rng.standard_normal(s).astype(dtype) for s in ((m, k), (k, n)))
        out = np.zeros((m, n), np.int32 if np.dtype(dtype).kind == "i" else
                       (np.float16 if out16 else np.float32))
        return {"a_ptr": a, "b_ptr": np.ascontiguousarray(b.T) if trans_b else b, "c_ptr": out}

    def reference(args):
        a = args["a_ptr"].astype(np.float64)
        b = args["b_ptr"].astype(np.float64)
        b = b.T if trans_b else b
        if precision == "tf32" and dtype == np.float32 and not bf16:
            a, b = _tf32(a).astype(np.float64), _tf32(b).astype(np.float64)
        if bf16:
            a, b = (round_bf16(x.astype(np.float32)).astype(np.float64) for x in (a, b))
        return {"c_ptr": (a @ b).astype(args["c_ptr"].dtype)}
    return Case(name, dot_kernel, make, (1,),
                {"M": m, "N": n, "K": k, "TRANS_B": trans_b, "PRECISION": precision,
                 "OUT16": out16, "BF16": bf16}, ("c_ptr",), reference, np.dtype(dtype).kind == "i", rtol,
                num_warps=warps)


@aotk.jit
def gram_blocks_kernel(k_ptr, out_ptr, BC: tl.constexpr, BK: tl.constexpr,
                       PRECISION: tl.constexpr, BF16: tl.constexpr = False):
    """k @ k^T by [BC, BC] blocks of two row tiles, as fla's kkt solve computes it: each
    tile is the A of one dot and, transposed, the B of others (stored K-major from its
    rows: the transpose moves no element)."""
    o_i = tl.arange(0, BC)
    o_k = tl.arange(0, BK)
    k0 = tl.load(k_ptr + o_i[:, None] * BK + o_k[None, :])
    k1 = tl.load(k_ptr + (BC + o_i)[:, None] * BK + o_k[None, :])
    if BF16:
        k0 = k0.to(tl.bfloat16)
        k1 = k1.to(tl.bfloat16)
    a00 = tl.dot(k0, tl.trans(k0), input_precision=PRECISION)
    a10 = tl.dot(k1, tl.trans(k0), input_precision=PRECISION)
    a11 = tl.dot(k1, tl.trans(k1), input_precision=PRECISION)
    rows = o_i[:, None] * (2 * BC)
    tl.store(out_ptr + rows + o_i[None, :], a00)
    tl.store(out_ptr + BC * 2 * BC + rows + o_i[None, :], a10)
    tl.store(out_ptr + BC * 2 * BC + rows + (BC + o_i)[None, :], a11)


def _gram_blocks_case(dtype, bc, bk, warps, precision="ieee", bf16=False):
    def make(rng):
        return {"k_ptr": (rng.standard_normal((2 * bc, bk)) * 0.5).astype(dtype),
                "out_ptr": np.zeros((2 * bc, 2 * bc), np.float32)}

    def reference(args):
        k = args["k_ptr"].astype(np.float32)
        if bf16:
            k = round_bf16(k)
        elif precision == "tf32":
            k = _tf32(k)
        gram = k.astype(np.float64) @ k.astype(np.float64).T
        gram[:bc, bc:] = 0   # the upper block is not computed
        return {"out_ptr": gram.astype(np.float32)}
    kind = "bfloat16" if bf16 else np.dtype(dtype).name + ("-tf32" if precision == "tf32" else "")
    return Case(f"gram-blocks-{kind}-{bc}x{bk}-{warps}-warps", gram_blocks_kernel, make, (1,),
                {"BC": bc, "BK": bk, "PRECISION": precision, "BF16": bf16}, ("out_ptr",),
                reference, False, 1e-2 if dtype == np.float16 or bf16 or precision == "tf32"
                else 1e-4, num_warps=warps)


def _matmul_loop_reference(args):
    M, N, K = args["M"], args["N"], args["K"]
    a = args["a_ptr"].reshape(M, K).astype(np.float64)
    b = args["b_ptr"].reshape(K, N).astype(np.float64)
    return {"c_ptr": np.maximum(a @ b, 0).astype(np.float16).ravel()}


def _matmul_loop_case(name, m, n, k, block_m, block_n, block_k):
    """relu(A @ B) in fp16 by ``matmul_loop_kernel`` over a grid covering M x N."""
    def make(rng):
        return {"a_ptr": rng.standard_normal(m * k).astype(np.float16),
                "b_ptr": rng.standard_normal(k * n).astype(np.float16),
                "c_ptr": np.zeros(m * n, np.float16), "M": m, "N": n, "K": k}
    grid = (-(-m // block_m), -(-n // block_n))
    return Case(name, matmul_loop_kernel, make, grid,
                {"BLOCK_M": block_m, "BLOCK_N": block_n, "BLOCK_K": block_k}, ("c_ptr",),
                _matmul_loop_reference, False, 1e-2)


@aotk.jit
def column_major_b_dot_kernel(a_ptr, b_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr,
                              K: tl.constexpr, PRECISION: tl.constexpr):
    """B stored as [N, K] and read as the [K, N] operand straight from memory, contiguous
    along K (a block pointer of order (0, 1) reads the same): loaded down its columns and
    stored into the dot's tile from there."""
    rm = tl.arange(0, M)
    rn = tl.arange(0, N)
    rk = tl.arange(0, K)
    a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] + rn[None, :] * K)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], tl.dot(a, b, input_precision=PRECISION))


@aotk.jit
def gated_two_dots_kernel(q_ptr, k_ptr, v_ptr, g_ptr, o_ptr, T: tl.constexpr,
                          D: tl.constexpr):
    """fla's chunk output in small (D = T): A = (q @ k^T) * exp(g_i - g_j) under a causal
    mask, then o = (q @ v^T) * exp(g)[:, None] + A @ v. The gates are a [T] vector read as
    the rows and the columns of the accumulators; k is read down its columns (K-major B)."""
    t = tl.arange(0, T)
    d = tl.arange(0, D)
    q = tl.load(q_ptr + t[:, None] * D + d[None, :])
    k = tl.load(k_ptr + d[:, None] + t[None, :] * D)      # [D, T]: k transposed
    v = tl.load(v_ptr + t[:, None] * D + d[None, :])
    g = tl.load(g_ptr + t)
    scores = tl.dot(q, k) * tl.exp(g[:, None] - g[None, :])
    scores = tl.where(t[:, None] >= t[None, :], scores, 0.0)
    out = tl.dot(q, tl.trans(v)) * tl.exp(g)[:, None] + tl.dot(scores.to(v.dtype), v)
    tl.store(o_ptr + t[:, None] * D + d[None, :], out)


def _gated_two_dots_case(t, warps):
    """``gated_two_dots_kernel`` on [t, t] fp16 blocks."""
    d = t

    def make(rng):
        return {"q_ptr": (rng.standard_normal((t, d)) * 0.3).astype(np.float16),
                "k_ptr": (rng.standard_normal((t, d)) * 0.3).astype(np.float16),
                "v_ptr": (rng.standard_normal((t, d)) * 0.3).astype(np.float16),
                "g_ptr": -np.cumsum(rng.random(t) * 0.1).astype(np.float32),
                "o_ptr": np.zeros((t, d), np.float32)}

    def reference(args):
        q, k, v = (args[n].astype(np.float64) for n in ("q_ptr", "k_ptr", "v_ptr"))
        g = args["g_ptr"].astype(np.float64)
        scores = np.tril((q @ k.T) * np.exp(g[:, None] - g[None, :]))
        scores = scores.astype(np.float16).astype(np.float64)
        return {"o_ptr": ((q @ v.T) * np.exp(g)[:, None] + scores @ v).astype(np.float32)}
    return Case(f"gated-two-dots-fp16-{t}-{warps}-warps", gated_two_dots_kernel, make, (1,),
                {"T": t, "D": d}, ("o_ptr",), reference, False, 2e-2, num_warps=warps)


@aotk.jit
def dot_under_if_kernel(a_ptr, b_ptr, c_ptr, K, SKIP, M: tl.constexpr, N: tl.constexpr,
                        BLOCK_K: tl.constexpr):
    """A loop's accumulator updated by a dot under a runtime ``if`` (fla's
    chunk_gla_fwd_kernel_o): the blocks of K below SKIP are left out."""
    rm = tl.arange(0, M)
    rn = tl.arange(0, N)
    acc = tl.zeros([M, N], tl.float32)
    for k0 in range(0, K, BLOCK_K):
        rk = k0 + tl.arange(0, BLOCK_K)
        a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
        b = tl.load(b_ptr + rk[:, None] * N + rn[None, :])
        if k0 >= SKIP:
            acc += tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc)


def _dot_under_if_case(m, n, k, block_k, skip, warps):
    def make(rng):
        return {"a_ptr": rng.standard_normal((m, k)).astype(np.float16),
                "b_ptr": rng.standard_normal((k, n)).astype(np.float16),
                "c_ptr": np.zeros((m, n), np.float32), "K": k, "SKIP": skip}

    def reference(args):
        a = args["a_ptr"].astype(np.float64)[:, skip:]
        return {"c_ptr": (a @ args["b_ptr"].astype(np.float64)[skip:]).astype(np.float32)}
    return Case(f"dot-under-if-in-loop-fp16-{m}x{n}x{k}-{warps}-warps", dot_under_if_kernel,
                make, (1,), {"M": m, "N": n, "BLOCK_K": block_k}, ("c_ptr",), reference,
                False, 1e-3, num_warps=warps)


@aotk.jit
def column_major_a_dot_kernel(a_ptr, b_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr,
                              K: tl.constexpr, B_COLUMN_MAJOR: tl.constexpr):
    """A stored as [K, M] and read as the [M, K] operand straight from memory, contiguous
    along M (fla's chunk_delta_h reads k^T so), B as [K, N] or, with B_COLUMN_MAJOR, as
    [N, K] read down its columns too."""
    rm = tl.arange(0, M)
    rn = tl.arange(0, N)
    rk = tl.arange(0, K)
    a = tl.load(a_ptr + rm[:, None] + rk[None, :] * M)
    if B_COLUMN_MAJOR:
        b = tl.load(b_ptr + rk[:, None] + rn[None, :] * K)
    else:
        b = tl.load(b_ptr + rk[:, None] * N + rn[None, :])
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], tl.dot(a, b))


def _column_major_a_case(m, n, k, warps=4, b_column_major=False):
    """fp16 A given as [K, M] (and B as [N, K]) through ``column_major_a_dot_kernel``."""
    def make(rng):
        a, b = (rng.standard_normal(shape).astype(np.float16) for shape in ((m, k), (k, n)))
        return {"a_ptr": np.ascontiguousarray(a.T),
                "b_ptr": np.ascontiguousarray(b.T) if b_column_major else b,
                "c_ptr": np.zeros((m, n), np.float32)}

    def reference(args):
        a = args["a_ptr"].astype(np.float64).T
        b = args["b_ptr"].astype(np.float64)
        return {"c_ptr": (a @ (b.T if b_column_major else b)).astype(np.float32)}
    both = "-b" if b_column_major else ""
    return Case(f"dot-float16-{m}x{n}x{k}-a{both}-column-major-{warps}-warps",
                column_major_a_dot_kernel, make, (1,),
                {"M": m, "N": n, "K": k, "B_COLUMN_MAJOR": b_column_major}, ("c_ptr",),
                reference, False, 1e-3, num_warps=warps)


def _column_major_b_case(dtype, m, n, k, precision="ieee", rtol=1e-3, warps=4):
    """``_dot_case``'s data (B given transposed) through ``column_major_b_dot_kernel``,
    on ``warps`` warps."""
    like = _dot_case("", dtype, m, n, k, trans_b=True, precision=precision, rtol=rtol)
    return Case(f"dot-{np.dtype(dtype).name}-{m}x{n}x{k}-b-column-major-{warps}-warps",
                column_major_b_dot_kernel, like.make_args, (1,),
                {"M": m, "N": n, "K": k, "PRECISION": precision}, ("c_ptr",), like.reference,
                like.exact, rtol, num_warps=warps)


CASES = [
    _dot_case("dot-fp16-16x16x16", np.float16, 16, 16, 16, rtol=1e-3),
    _dot_case("dot-fp16-64x32x128-trans-b", np.float16, 64, 32, 128, trans_b=True, rtol=1e-3),
    _dot_case("dot-fp16-out-fp16", np.float16, 32, 64, 32, out16=True, rtol=2e-2),
    _dot_case("dot-fp32-ieee-32x32x64", np.float32, 32, 32, 64, rtol=1e-4),
    _dot_case("dot-fp32-tf32", np.float32, 32, 16, 32, precision="tf32", rtol=1e-3),
    _dot_case("dot-fp32-ieee-128x16x16", np.float32, 128, 16, 16, rtol=1e-4),
    _dot_case("dot-int8-32x32x64", np.int8, 32, 32, 64),
    _dot_case("dot-fp32-tf32-64x64x32-trans-b", np.float32, 64, 64, 32, trans_b=True,
              precision="tf32", rtol=1e-3),
    _dot_case("dot-int8-64x32x128-trans-b", np.int8, 64, 32, 128, trans_b=True),
    # Shapes wgmma takes on sm_90 (K and N rows of a swizzle mode, M whole warpgroup slices):
    # one n64 instruction; two K panels of A and a 256-wide N (n256, B's panel stride
    # K * 128 bytes); an fp16 accumulator; and a B read transposed.
    _dot_case("dot-fp16-64x64x64-wgmma", np.float16, 64, 64, 64, rtol=1e-3),
    _dot_case("dot-fp16-64x256x128-wgmma", np.float16, 64, 256, 128, rtol=1e-3),
    _dot_case("dot-bf16-128x64x64-wgmma", np.float32, 128, 64, 64, bf16=True, rtol=1e-3),
    _dot_case("dot-fp16-128x128x64-out-fp16-wgmma", np.float16, 128, 128, 64, out16=True,
              rtol=2e-2),
    _dot_case("dot-fp16-128x64x128-trans-b-wgmma", np.float16, 128, 64, 128, trans_b=True,
              rtol=1e-3),
    # Rows narrower than 128 bytes, read through wgmma's 64B and 32B swizzles: A's K of 32
    # and 16 (bf16) elements, B's N of 32 and 16, over one and two 64-row slices.
    _dot_case("dot-fp16-64x128x32-wgmma", np.float16, 64, 128, 32, rtol=1e-3),
    _dot_case("dot-bf16-64x64x16-wgmma", np.float32, 64, 64, 16, bf16=True, rtol=1e-3),
    _dot_case("dot-fp16-64x32x64-wgmma", np.float16, 64, 32, 64, rtol=1e-3),
    _dot_case("dot-fp16-128x16x32-wgmma", np.float16, 128, 16, 32, rtol=1e-3),
    # 8 warps on 64 rows: each warpgroup's wgmma takes its own half of N (sm_90), from an
    # N-major B (one and two 128-byte panels each) and a K-major one; and a first dot's
    # halves stored as the second's A.
    _dot_case("dot-fp16-64x128x128-8-warps", np.float16, 64, 128, 128, rtol=1e-3, warps=8),
    _dot_case("dot-bf16-64x256x64-8-warps", np.float32, 64, 256, 64, bf16=True, rtol=1e-3,
              warps=8),
    _dot_case("dot-fp16-64x128x64-trans-b-8-warps", np.float16, 64, 128, 64, trans_b=True,
              rtol=1e-3, warps=8),
    _chain_dot_case(np.float16, 64, 128, 128, "ieee", warps=8),
    # Epilogues where the accumulators live: gates read as rows and columns, a causal mask,
    # a second dot taking the first one's fragments as A (2 warps: mma.sync; 4 and 8 on
    # sm_90: wgmma, 8 splitting N); and an accumulator updated under an if in a loop.
    # Tiles that are the A of one dot and the transposed B of others (fla's kkt): 16x64
    # tiles on one warp, 32- and 64-row tiles on 2 and 4; fp16, bf16, tf32.
    _gram_blocks_case(np.float16, 16, 64, 1),
    _gram_blocks_case(np.float32, 16, 64, 1, bf16=True),
    _gram_blocks_case(np.float32, 16, 32, 1, precision="tf32"),
    _gram_blocks_case(np.float16, 32, 64, 2),
    _gram_blocks_case(np.float32, 32, 32, 2, precision="tf32"),
    _gram_blocks_case(np.float16, 64, 64, 4),
    _gram_blocks_case(np.float32, 64, 32, 4, precision="tf32"),
    _gated_two_dots_case(64, 2),
    _gated_two_dots_case(64, 4),
    _gated_two_dots_case(64, 8),
    _dot_under_if_case(64, 32, 128, 32, 64, 2),
    _dot_under_if_case(64, 128, 128, 64, 64, 4),
    # Two dots on mma.sync, the first one's accumulator feeding the second's A.
    _chain_dot_case(np.float16, 32, 32, 32, "ieee"),
    _chain_dot_case(np.float32, 32, 32, 32, "tf32"),
    _chain_dot_case(np.float32, 64, 64, 64, "tf32"),
    # On wgmma (sm_90), the second dot's A straight from the first one's fragments.
    _chain_dot_case(np.float16, 64, 64, 64, "ieee"),
    _two_dots_case(32),
    # 50 KB of operands: dynamic shared memory past the 48 KB default.
    _dot_case("dot-fp32-128x64x64-over-48KB-shared", np.float32, 128, 64, 64, rtol=1e-4),
    Case("dot-batched-3d", batched_dot_kernel,
         lambda rng: {"a_ptr": rng.standard_normal(2 * 16 * 32).astype(np.float16),
                      "b_ptr": rng.standard_normal(2 * 32 * 16).astype(np.float16),
                      "c_ptr": np.zeros(2 * 16 * 16, np.float32)},
         (1,), {"B": 2, "M": 16, "N": 16, "K": 32}, ("c_ptr",),
         lambda a: {"c_ptr": np.matmul(a["a_ptr"].reshape(2, 16, 32).astype(np.float64),
                                       a["b_ptr"].reshape(2, 32, 16)).astype(np.float32).ravel()},
         False, 1e-3),
    _matmul_loop_case("dot-matmul-loop-odd-sizes-relu", 50, 45, 70, 32, 32, 32),
    # wgmma in a K loop: pipelined (sizes divisible by 16 prove 16-byte cp.async vectors;
    # the masks still cut M and N), and not pipelined (K odd: scalar loads, operands stored
    # into the swizzled tiles by the threads).
    _matmul_loop_case("dot-matmul-loop-wgmma-pipelined", 200, 192, 320, 64, 64, 64),
    _matmul_loop_case("dot-matmul-loop-wgmma-odd-k", 100, 70, 201, 64, 64, 64),
    # The same two with Triton's BLOCK_K = 32 and 16: A's stages and tiles in 64-byte and
    # 32-byte rows.
    _matmul_loop_case("dot-matmul-loop-wgmma-k32-pipelined", 200, 192, 320, 64, 64, 32),
    _matmul_loop_case("dot-matmul-loop-wgmma-k16-odd-k", 100, 70, 201, 64, 64, 16),
    # B read down its columns: fp16 (wgmma on sm_90), int8 (its B goes K-major, stored by
    # columns) and tf32.
    # B stored K-major from the layout it is read in (wgmma on sm_90 where M is whole
    # warpgroup slices, mma.sync below; 8 warps on 64 rows split N between warpgroups).
    _column_major_b_case(np.float16, 64, 64, 64),
    _column_major_b_case(np.float16, 64, 128, 128, warps=8),
    _column_major_b_case(np.float16, 128, 64, 64, warps=8),
    _column_major_b_case(np.float16, 32, 64, 64),
    _column_major_b_case(np.int8, 64, 32, 128),
    _column_major_b_case(np.float32, 32, 32, 32, precision="tf32"),
    _column_major_b_case(np.float32, 64, 64, 32, precision="tf32", warps=8),
    _column_major_b_case(np.float32, 128, 32, 64, precision="tf32"),
    # A stored M-major from the layout it is read in: wgmma's imm-trans-a on sm_90 (one and
    # two warpgroups along M, two along N), ldmatrix.trans on mma.sync; B as well K-major.
    _column_major_a_case(64, 64, 64),
    _column_major_a_case(128, 64, 64, warps=8),
    _column_major_a_case(64, 128, 64, warps=8, b_column_major=True),
    _column_major_a_case(32, 64, 64),
    _column_major_a_case(64, 32, 32, warps=2, b_column_major=True),
]
