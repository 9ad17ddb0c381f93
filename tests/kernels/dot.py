"""tl.dot kernels (issue 6, first step: the portable path) against numpy.

Shared by the interpreter, ptxas and GPU tests.
"""
from __future__ import annotations

import numpy as np

import aotk
import aotk.language as tl
from tests.kernels.elementwise import Case


@aotk.jit
def dot_kernel(a_ptr, b_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr,
               TRANS_B: tl.constexpr, PRECISION: tl.constexpr, OUT16: tl.constexpr):
    rm = tl.arange(0, M)
    rn = tl.arange(0, N)
    rk = tl.arange(0, K)
    a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
    if TRANS_B:   # b stored as [N, K]: read through swapped strides, or transposed
        b = tl.trans(tl.load(b_ptr + rn[:, None] * K + rk[None, :]))
    else:
        b = tl.load(b_ptr + rk[:, None] * N + rn[None, :])
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


def _tf32(x):
    return (x.astype(np.float32).view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)


def _dot_case(name, dtype, m, n, k, trans_b=False, precision="ieee", out16=False, rtol=1e-4):
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
        if precision == "tf32" and dtype == np.float32:
            a, b = _tf32(a).astype(np.float64), _tf32(b).astype(np.float64)
        return {"c_ptr": (a @ b).astype(args["c_ptr"].dtype)}
    return Case(name, dot_kernel, make, (1,),
                {"M": m, "N": n, "K": k, "TRANS_B": trans_b, "PRECISION": precision,
                 "OUT16": out16}, ("c_ptr",), reference, np.dtype(dtype).kind == "i", rtol)


def _matmul_loop_reference(args):
    M, N, K = args["M"], args["N"], args["K"]
    a = args["a_ptr"].reshape(M, K).astype(np.float64)
    b = args["b_ptr"].reshape(K, N).astype(np.float64)
    return {"c_ptr": np.maximum(a @ b, 0).astype(np.float16).ravel()}


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
    Case("dot-matmul-loop-odd-sizes-relu", matmul_loop_kernel,
         lambda rng: {"a_ptr": rng.standard_normal(50 * 70).astype(np.float16),
                      "b_ptr": rng.standard_normal(70 * 45).astype(np.float16),
                      "c_ptr": np.zeros(50 * 45, np.float16), "M": 50, "N": 45, "K": 70},
         (2, 2), {"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32}, ("c_ptr",),
         _matmul_loop_reference, False, 1e-2),
]
