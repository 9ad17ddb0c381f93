"""Kernels whose dots read one tile several times (``backend.operand_tiles``): fla's kkt
loop, where each row tile is the A of some dots and, transposed, the B of others, and the
later tiles are loaded only where rows remain; with a reduction of the first tile (another
user of shared memory) between the dots. And fla's dqkwg epilogue, a dot's result read as
the A of one dot and, transposed, of another (``mma_residency.fragment_views``). Run by
the interpreter, compiled for sm_80 and sm_90 (tests/test_codegen.py) and on the GPU
(tests/test_gpu.py)."""
from __future__ import annotations

import numpy as np

import aotk
import aotk.language as tl
from tests.kernels.elementwise import Case


@aotk.jit
def gram_loop_kernel(k_ptr, out_ptr, colsum_ptr, T, K: tl.constexpr, BC: tl.constexpr,
                     BK: tl.constexpr, PRECISION: tl.constexpr):
    """k @ k^T over three [BC, K] row tiles, K in BK slices: the lower blocks, the second
    and third tiles' only where T covers them; each slice's column sums of the first tile."""
    o_i = tl.arange(0, BC)
    a00 = tl.zeros([BC, BC], dtype=tl.float32)
    a10 = tl.zeros([BC, BC], dtype=tl.float32)
    a11 = tl.zeros([BC, BC], dtype=tl.float32)
    a20 = tl.zeros([BC, BC], dtype=tl.float32)
    a21 = tl.zeros([BC, BC], dtype=tl.float32)
    a22 = tl.zeros([BC, BC], dtype=tl.float32)
    for i_k in range(tl.cdiv(K, BK)):
        o_k = i_k * BK + tl.arange(0, BK)
        k0 = tl.load(k_ptr + o_i[:, None] * K + o_k[None, :])
        a00 = tl.dot(k0, tl.trans(k0), a00, input_precision=PRECISION)
        tl.store(colsum_ptr + o_k, tl.sum(k0.to(tl.float32), axis=0))
        if BC < T:
            k1 = tl.load(k_ptr + (BC + o_i)[:, None] * K + o_k[None, :])
            a11 = tl.dot(k1, tl.trans(k1), a11, input_precision=PRECISION)
            a10 = tl.dot(k1, tl.trans(k0), a10, input_precision=PRECISION)
            if 2 * BC < T:
                k2 = tl.load(k_ptr + (2 * BC + o_i)[:, None] * K + o_k[None, :])
                a20 = tl.dot(k2, tl.trans(k0), a20, input_precision=PRECISION)
                a21 = tl.dot(k2, tl.trans(k1), a21, input_precision=PRECISION)
                a22 = tl.dot(k2, tl.trans(k2), a22, input_precision=PRECISION)
    rows = o_i[:, None] * (3 * BC)
    tl.store(out_ptr + rows + o_i[None, :], a00)
    tl.store(out_ptr + BC * 3 * BC + rows + o_i[None, :], a10)
    tl.store(out_ptr + BC * 3 * BC + rows + (BC + o_i)[None, :], a11)
    tl.store(out_ptr + 2 * BC * 3 * BC + rows + o_i[None, :], a20)
    tl.store(out_ptr + 2 * BC * 3 * BC + rows + (BC + o_i)[None, :], a21)
    tl.store(out_ptr + 2 * BC * 3 * BC + rows + (2 * BC + o_i)[None, :], a22)


def _tf32(x):
    bits = np.ascontiguousarray(x, np.float32).view(np.uint32)
    return ((bits + 0x1000) & 0xFFFFE000).view(np.float32)


def _gram_loop_case(dtype, bc, k, bk, warps, rows, precision="ieee"):
    def make(rng):
        return {"k_ptr": (rng.standard_normal((3 * bc, k)) * 0.5).astype(dtype),
                "out_ptr": np.zeros((3 * bc, 3 * bc), np.float32),
                "colsum_ptr": np.zeros(k, np.float32), "T": rows}

    def reference(args):
        kk = args["k_ptr"].astype(np.float32)
        colsum = kk[:bc].astype(np.float64).sum(axis=0)
        if precision == "tf32":
            kk = _tf32(kk)
        gram = kk.astype(np.float64) @ kk.astype(np.float64).T
        keep = np.zeros((3, 3), bool)
        for i in range(3):
            for j in range(i + 1):
                keep[i, j] = rows > i * bc
        gram *= np.kron(keep, np.ones((bc, bc)))
        return {"out_ptr": gram.astype(np.float32), "colsum_ptr": colsum.astype(np.float32)}
    kind = np.dtype(dtype).name + ("-tf32" if precision == "tf32" else "")
    return Case(f"gram-loop-{kind}-{bc}x{k}-by-{bk}-{warps}-warps-{rows}-rows", gram_loop_kernel,
                make, (1,), {"K": k, "BC": bc, "BK": bk, "PRECISION": precision},
                ("out_ptr", "colsum_ptr"), reference, False,
                1e-2 if dtype == np.float16 or precision == "tf32" else 1e-4, num_warps=warps)


@aotk.jit
def score_gradients_kernel(q_ptr, k_ptr, do_ptr, v_ptr, dq_ptr, dk_ptr, BT: tl.constexpr,
                           BK: tl.constexpr, BV: tl.constexpr, PRECISION: tl.constexpr,
                           BOTH: tl.constexpr):
    """fla's chunk_bwd_kernel_dqkwg epilogue: ds = causal(do @ v^T) / 2 in the dot's
    fragments, then dq = ds @ k (with ``BOTH``) and dk = ds^T @ q."""
    o_t = tl.arange(0, BT)
    o_k = tl.arange(0, BK)
    o_v = tl.arange(0, BV)
    q = tl.load(q_ptr + o_t[:, None] * BK + o_k[None, :])
    k = tl.load(k_ptr + o_t[:, None] * BK + o_k[None, :])
    do = tl.load(do_ptr + o_t[:, None] * BV + o_v[None, :])
    v = tl.load(v_ptr + o_t[:, None] * BV + o_v[None, :])
    ds = tl.dot(do, tl.trans(v), input_precision=PRECISION)
    ds = (tl.where(o_t[:, None] >= o_t[None, :], ds, 0.0) * 0.5).to(q.dtype)
    if BOTH:
        dq = tl.dot(ds, k, input_precision=PRECISION)
        tl.store(dq_ptr + o_t[:, None] * BK + o_k[None, :], dq)
    dk = tl.dot(tl.trans(ds), q, input_precision=PRECISION)
    tl.store(dk_ptr + o_t[:, None] * BK + o_k[None, :], dk)


def _score_gradients_case(dtype, bt, bk, bv, warps, precision="ieee", both=True):
    def make(rng):
        # Sums of 32-64 products each way: inputs of a quarter keep them near one.
        return {"q_ptr": (rng.standard_normal((bt, bk)) * 0.25).astype(dtype),
                "k_ptr": (rng.standard_normal((bt, bk)) * 0.25).astype(dtype),
                "do_ptr": (rng.standard_normal((bt, bv)) * 0.25).astype(dtype),
                "v_ptr": (rng.standard_normal((bt, bv)) * 0.25).astype(dtype),
                "dq_ptr": np.zeros((bt, bk), np.float32),
                "dk_ptr": np.zeros((bt, bk), np.float32)}

    def reference(args):
        rounded = _tf32 if precision == "tf32" else (lambda x: x)
        q, k, do, v = (rounded(args[name].astype(np.float32)).astype(np.float64)
                       for name in ("q_ptr", "k_ptr", "do_ptr", "v_ptr"))
        ds = np.tril(do @ v.T) * 0.5
        ds = rounded(ds.astype(np.float32).astype(dtype).astype(np.float32)).astype(np.float64)
        return {"dq_ptr": (ds @ k if both else np.zeros((bt, bk))).astype(np.float32),
                "dk_ptr": (ds.T @ q).astype(np.float32)}
    kind = np.dtype(dtype).name + ("-tf32" if precision == "tf32" else "")
    return Case(f"score-gradients-{kind}-{bt}x{bk}x{bv}-{warps}-warps" +
                ("" if both else "-transposed-only"), score_gradients_kernel, make, (1,),
                {"BT": bt, "BK": bk, "BV": bv, "PRECISION": precision, "BOTH": both},
                ("dq_ptr", "dk_ptr"), reference, False,
                1e-2 if dtype == np.float16 or precision == "tf32" else 1e-4, num_warps=warps)


SCORE_CASES = [
    # mma.sync with ds^T read from ds's own tile: fp16 (ldmatrix.trans) and tf32 (element
    # loads), ds also read as it is (one tile for both dots) or only transposed; two warps
    # as fla's dqkwg runs, one, and four (wgmma on sm_90: ds^T then goes the general way).
    _score_gradients_case(np.float16, 64, 32, 32, 2),
    _score_gradients_case(np.float32, 64, 32, 32, 2, precision="tf32"),
    _score_gradients_case(np.float32, 64, 32, 32, 2, precision="tf32", both=False),
    _score_gradients_case(np.float16, 32, 32, 64, 1, both=False),
    _score_gradients_case(np.float32, 32, 16, 32, 1, precision="tf32"),
    _score_gradients_case(np.float16, 64, 64, 32, 4),
]

LOOP_CASES = [
    # All three tiles, and only two (the innermost if not taken); one warp as fla's kkt
    # solve runs, two and four (wgmma on sm_90 at 64 rows).
    _gram_loop_case(np.float16, 16, 128, 64, 1, 48),
    _gram_loop_case(np.float16, 16, 128, 64, 1, 32),
    _gram_loop_case(np.float32, 16, 64, 32, 1, 48, precision="tf32"),
    _gram_loop_case(np.float16, 32, 128, 64, 2, 96),
    _gram_loop_case(np.float32, 32, 64, 32, 2, 70, precision="tf32"),
    _gram_loop_case(np.float16, 64, 128, 64, 4, 192),
    _gram_loop_case(np.float16, 64, 128, 64, 4, 100),
]

CASES = SCORE_CASES + LOOP_CASES
