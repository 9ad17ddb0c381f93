"""Reduction kernels (tier 2) shared by the interpreter, ptxas and GPU tests."""
from __future__ import annotations

import numpy as np

import aotk
import aotk.language as tl
from tests.kernels.elementwise import Case


@aotk.jit
def softmax_kernel(out_ptr, in_ptr, in_stride, out_stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(in_ptr + row * in_stride + offs, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    tl.store(out_ptr + row * out_stride + offs, num / tl.sum(num, axis=0), mask=mask)


@aotk.jit
def reduce_2d_kernel(x_ptr, out_ptr, M, N, OP: tl.constexpr, AXIS: tl.constexpr,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    x = tl.load(x_ptr + rows[:, None] * N + cols[None, :], mask=mask, other=0)
    if OP == "sum":
        r = tl.sum(x, axis=AXIS)
    elif OP == "max":
        r = tl.max(x, axis=AXIS)
    elif OP == "min":
        r = tl.min(x, axis=AXIS)
    elif OP == "argmax":
        r = tl.argmax(x, axis=AXIS)
    elif OP == "argmin":
        r = tl.argmin(x, axis=AXIS)
    else:
        r = tl.xor_sum(x, axis=AXIS)
    if AXIS == 1 or AXIS == -1:
        tl.store(out_ptr + rows, r, mask=rows < M)
    else:
        tl.store(out_ptr + cols, r, mask=cols < N)


@aotk.jit
def row_broadcast_kernel(x_ptr, out_ptr, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """A reduction result broadcast back over its rows: x - rowmax(x) + colsum(x)."""
    rows = tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    offsets = rows[:, None] * N + cols[None, :]
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
    rowmax = tl.max(x, axis=1, keep_dims=True)
    colsum = tl.sum(x, axis=0)
    tl.store(out_ptr + offsets, x - rowmax + colsum[None, :], mask=mask)


@aotk.jit
def row_sums_scale_wide_tile_kernel(s_ptr, x_ptr, out_ptr, BLOCK_M: tl.constexpr,
                                    BLOCK_S: tl.constexpr, BLOCK_N: tl.constexpr):
    """Row sums of a narrow [BLOCK_M, BLOCK_S] tile, changed elementwise, scale the rows of a
    wide [BLOCK_M, BLOCK_N] one, whose layout would hold 16 of the 32 rows in each thread
    (liger's mhc norm backward: its factor from g_acc and invr)."""
    rows = tl.arange(0, BLOCK_M)
    s = tl.load(s_ptr + rows[:, None] * BLOCK_S + tl.arange(0, BLOCK_S)[None, :])
    inv = tl.load(s_ptr + rows * BLOCK_S)
    offsets = rows[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
    scale = (tl.sum(s, axis=1) / inv) * inv * inv / BLOCK_N
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets) * scale[:, None])


@aotk.jit
def total_kernel(x_ptr, out_ptr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    offsets = tl.arange(0, BLOCK_M)[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
    x = tl.load(x_ptr + offsets)
    value, index = tl.max(x.to(tl.float32), axis=None, return_indices=False), tl.argmax(
        tl.sum(x, axis=0), axis=0)
    tl.store(out_ptr, tl.sum(x, axis=None).to(tl.float32) + value + index)


@aotk.jit
def reduce_3d_kernel(x_ptr, out_ptr, A: tl.constexpr, B: tl.constexpr, C: tl.constexpr):
    a = tl.arange(0, A)[:, None, None]
    b = tl.arange(0, B)[None, :, None]
    c = tl.arange(0, C)[None, None, :]
    x = tl.load(x_ptr + a * B * C + b * C + c)
    r = tl.sum(x, axis=-2)            # [A, C]
    ar = tl.arange(0, A)[:, None]
    cr = tl.arange(0, C)[None, :]
    tl.store(out_ptr + ar * C + cr, r)


@aotk.jit
def total_keep_dims_kernel(x_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr):
    """A reduction over every axis with keep_dims: [1, 1], from a 0-d total (Triton's
    test_reduce with axis=None and keep_dims=True)."""
    x = tl.load(x_ptr + tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :])
    total = tl.sum(x, axis=None, keep_dims=True)
    tl.static_assert(total.shape == [1, 1])
    tl.store(out_ptr + tl.zeros([1, 1], tl.int32), total)


def _c(name, kernel, make, grid, constants, reference, exact=True, rtol=1e-5):
    return Case(name, kernel, make, grid, constants, ("out_ptr",), reference, exact, rtol)


def _reduce2d(op, axis, dtype, low, high, M=None, N=None, exact=True):
    # Masked lanes load 0: neutral for sum and xor only, so max/min/arg use full tiles.
    if M is None:
        M, N = (37, 50) if op in ("sum", "xor") else (64, 64)
    def make(rng):
        if np.dtype(dtype).kind == "f":
            x = rng.uniform(low, high, (M, N)).astype(dtype)
        else:
            x = rng.integers(low, high, (M, N)).astype(dtype)
        out_len = M if axis in (1, -1) else N
        if op == "sum":
            out_dtype = {"i": np.int32, "u": np.uint32, "b": np.uint32}.get(
                np.dtype(dtype).kind, dtype) if np.dtype(dtype).itemsize < 4 or \
                np.dtype(dtype).kind == "b" else dtype
        elif op in ("argmax", "argmin"):
            out_dtype = np.int32
        else:
            out_dtype = dtype
        return {"x_ptr": x.ravel(), "out_ptr": np.zeros(out_len, out_dtype), "M": M, "N": N}

    def reference(args):
        x = args["x_ptr"].reshape(M, N)
        dtype_out = args["out_ptr"].dtype
        with np.errstate(all="ignore"):
            if op == "sum":
                r = x.astype(dtype_out).sum(axis=axis, dtype=dtype_out)
            elif op == "max":
                r = x.max(axis=axis)
            elif op == "min":
                r = x.min(axis=axis)
            elif op == "argmax":
                r = x.argmax(axis=axis)
            elif op == "argmin":
                r = x.argmin(axis=axis)
            else:
                r = np.bitwise_xor.reduce(x, axis=axis)
        return {"out_ptr": r.astype(dtype_out)}
    return _c(f"reduce2d-{op}-axis{axis}-{np.dtype(dtype).name}", reduce_2d_kernel, make, (1,),
              {"OP": op, "AXIS": axis, "BLOCK_M": 64, "BLOCK_N": 64}, reference, exact=exact)


def _softmax_reference(args):
    x = args["in_ptr"].reshape(args["out_ptr"].shape)[:, :args["n_cols"]].astype(np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    out = args["out_ptr"].copy()
    out[:, :args["n_cols"]] = e / e.sum(axis=1, keepdims=True)
    return {"out_ptr": out}


CASES = [
    _c("sum-all-axes-keep-dims", total_keep_dims_kernel,
       lambda rng: {"x_ptr": rng.integers(-50, 50, 8 * 64).astype(np.float32),
                    "out_ptr": np.zeros(1, np.float32)},
       (1,), {"M": 8, "N": 64}, lambda args: {"out_ptr": np.array([args["x_ptr"].sum()],
                                                                  np.float32)}),
    _c("softmax-rows", softmax_kernel,
       lambda rng: {"in_ptr": rng.standard_normal((6, 1000)).astype(np.float32),
                    "out_ptr": np.zeros((6, 1000), np.float32), "in_stride": 1000,
                    "out_stride": 1000, "n_cols": 1000},
       (6,), {"BLOCK": 1024}, _softmax_reference, exact=False, rtol=1e-5),
    _reduce2d("sum", 1, np.float32, -1, 1, exact=False),
    _reduce2d("sum", 0, np.int8, -128, 128),
    _reduce2d("sum", 1, np.uint8, 0, 256),
    _reduce2d("sum", 0, np.int64, -2**40, 2**40),
    _reduce2d("max", 1, np.float16, -100, 100),
    _reduce2d("max", 0, np.int32, -2**31, 2**31 - 1),
    _reduce2d("min", 1, np.uint16, 0, 65536),
    _reduce2d("min", -1, np.float64, -5, 5),
    _reduce2d("argmax", 1, np.int8, -3, 3),     # many ties: the first index wins
    _reduce2d("argmin", 0, np.float32, -2, 2),
    _reduce2d("argmax", 0, np.uint8, 0, 4),
    _reduce2d("xor", 1, np.int32, -2**31, 2**31 - 1),
    _c("reduce-broadcast-back", row_broadcast_kernel,
       lambda rng: {"x_ptr": rng.standard_normal(30 * 40).astype(np.float32),
                    "out_ptr": np.zeros(30 * 40, np.float32), "M": 30, "N": 40},
       (1,), {"BLOCK_M": 32, "BLOCK_N": 64},
       lambda a: {"out_ptr": (lambda x: (x - x.max(1, keepdims=True) + x.sum(0)[None, :]).ravel())(
           a["x_ptr"].reshape(30, 40)).astype(np.float32)}, exact=False),
    _c("row-sums-scale-a-wide-tile", row_sums_scale_wide_tile_kernel,
       lambda rng: {"s_ptr": rng.uniform(1, 2, 32 * 32).astype(np.float32),
                    "x_ptr": rng.standard_normal(32 * 256).astype(np.float32),
                    "out_ptr": np.zeros(32 * 256, np.float32)},
       (1,), {"BLOCK_M": 32, "BLOCK_S": 32, "BLOCK_N": 256},
       lambda a: {"out_ptr": (lambda s, x: x * ((s.sum(1) / s[:, 0]) * s[:, 0] * s[:, 0] / 256)[
           :, None])(a["s_ptr"].reshape(32, 32), a["x_ptr"].reshape(32, 256)).ravel()},
       exact=False),
    _c("reduce-axis-none-and-indices", total_kernel,
       lambda rng: {"x_ptr": rng.integers(-50, 50, 16 * 32).astype(np.int16),
                    "out_ptr": np.zeros(1, np.float32)},
       (1,), {"BLOCK_M": 16, "BLOCK_N": 32},
       lambda a: {"out_ptr": np.array([a["x_ptr"].astype(np.int64).sum() + a["x_ptr"].max() +
                                       a["x_ptr"].reshape(16, 32).astype(np.int64).sum(0).argmax()],
                                      np.float32)}),
    _c("reduce-3d-middle-axis", reduce_3d_kernel,
       lambda rng: {"x_ptr": rng.integers(-9, 9, 4 * 8 * 16).astype(np.int32),
                    "out_ptr": np.zeros(4 * 16, np.int32)},
       (1,), {"A": 4, "B": 8, "C": 16},
       lambda a: {"out_ptr": a["x_ptr"].reshape(4, 8, 16).sum(1).ravel().astype(np.int32)}),
]
