"""Scan kernels (cumsum / cumprod, both directions) against numpy.

Shared by the interpreter, ptxas and GPU tests.
"""
from __future__ import annotations

import numpy as np

import aotk
import aotk.language as tl
from tests.kernels.elementwise import Case, _round_bf16 as round_bf16


@aotk.jit
def scan_2d_kernel(x_ptr, out_ptr, M, N, OP: tl.constexpr, AXIS: tl.constexpr,
                   REVERSE: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.arange(0, BLOCK_M)[:, None]
    cols = tl.arange(0, BLOCK_N)[None, :]
    mask = (rows < M) & (cols < N)
    x = tl.load(x_ptr + rows * N + cols, mask=mask, other=0 if OP == "cumsum" else 1)
    if OP == "cumsum":
        y = tl.cumsum(x, axis=AXIS, reverse=REVERSE)
    else:
        y = tl.cumprod(x, axis=AXIS, reverse=REVERSE)
    tl.store(out_ptr + rows * N + cols, y, mask=mask)


@aotk.jit
def scan_1d_kernel(x_ptr, out_ptr, n, REVERSE: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0)
    tl.store(out_ptr + offs, tl.cumsum(x, 0, reverse=REVERSE), mask=offs < n)


@aotk.jit
def scan_bf16_kernel(x_ptr, out_ptr, OP: tl.constexpr, REVERSE: tl.constexpr,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """A scan of bfloat16 values, which Triton computes (and returns) in fp32."""
    offs = tl.arange(0, BLOCK_M)[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
    x = tl.load(x_ptr + offs).to(tl.bfloat16)
    if OP == "cumsum":
        y = tl.cumsum(x, axis=1, reverse=REVERSE)
    else:
        y = tl.cumprod(x, axis=1, reverse=REVERSE)
    tl.static_assert(y.dtype == tl.float32)
    tl.store(out_ptr + offs, y)


def _scan_bf16(op, reverse, low, high):
    M, N = 8, 64

    def make(rng):
        return {"x_ptr": rng.uniform(low, high, M * N).astype(np.float32),
                "out_ptr": np.zeros(M * N, np.float32)}

    def reference(args):
        x = round_bf16(args["x_ptr"]).reshape(M, N).astype(np.float64)
        accumulate = (np.add if op == "cumsum" else np.multiply).accumulate
        y = np.flip(accumulate(np.flip(x, 1), axis=1), 1) if reverse else accumulate(x, axis=1)
        return {"out_ptr": y.astype(np.float32).ravel()}
    return Case(f"{op}-bf16-in-fp32-{M}x{N}{'-reverse' if reverse else ''}", scan_bf16_kernel,
                make, (1,), {"OP": op, "REVERSE": reverse, "BLOCK_M": M, "BLOCK_N": N},
                ("out_ptr",), reference, False, 1e-5)


def _reference(op, axis, reverse, M, N, out_dtype):
    def reference(args):
        x = args["x_ptr"].reshape(M, N).astype(out_dtype)
        accumulate = (np.add if op == "cumsum" else np.multiply).accumulate
        if reverse:
            y = np.flip(accumulate(np.flip(x, axis), axis=axis, dtype=out_dtype), axis)
        else:
            y = accumulate(x, axis=axis, dtype=out_dtype)
        return {"out_ptr": y.ravel()}
    return reference


def _scan2d(op, axis, reverse, dtype, out_dtype, M, N, block_m, block_n, low, high,
            exact=True, warps_hint=""):
    def make(rng):
        if np.dtype(dtype).kind == "f":
            x = rng.uniform(low, high, M * N).astype(dtype)
        else:
            x = rng.integers(low, high, M * N).astype(dtype)
        return {"x_ptr": x, "out_ptr": np.zeros(M * N, out_dtype), "M": M, "N": N}
    name = f"{op}-{M}x{N}-axis{axis}{'-reverse' if reverse else ''}-{np.dtype(dtype).name}"
    return Case(name, scan_2d_kernel, make, (1,),
                {"OP": op, "AXIS": axis, "REVERSE": reverse, "BLOCK_M": block_m,
                 "BLOCK_N": block_n}, ("out_ptr",),
                _reference(op, axis, reverse, M, N, out_dtype), exact, 1e-4)


def _scan1d(n, block, reverse):
    def make(rng):
        return {"x_ptr": rng.integers(-50, 50, n).astype(np.int32),
                "out_ptr": np.zeros(n, np.int32), "n": n}
    reference = _reference("cumsum", 1, reverse, 1, n, np.int32)
    return Case(f"cumsum-1d-{n}-of-{block}{'-reverse' if reverse else ''}", scan_1d_kernel, make,
                (1,), {"REVERSE": reverse, "BLOCK": block}, ("out_ptr",), reference, True)


CASES = [
    _scan2d("cumsum", 1, False, np.int32, np.int32, 3, 1000, 4, 1024, -100, 100),
    _scan2d("cumsum", 1, True, np.int32, np.int32, 3, 1000, 4, 1024, -100, 100),
    _scan2d("cumsum", 0, False, np.int8, np.int32, 60, 37, 64, 64, -128, 128),
    _scan2d("cumsum", 0, True, np.float32, np.float32, 100, 20, 128, 32, -1, 1, exact=False),
    _scan2d("cumprod", 1, False, np.int64, np.int64, 8, 40, 8, 64, -3, 4),
    _scan2d("cumprod", 1, True, np.float32, np.float32, 8, 30, 8, 32, 0.5, 1.5, exact=False),
    _scan1d(5000, 8192, False),
    _scan1d(700, 1024, True),
    _scan1d(10, 16, False),
    _scan_bf16("cumsum", False, -1, 1),
    _scan_bf16("cumsum", True, -1, 1),
    _scan_bf16("cumprod", False, 0.9, 1.1),
]
