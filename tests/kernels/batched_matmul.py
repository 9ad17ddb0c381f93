"""The batched matmul example (examples/kernels/batched_matmul.py, issue 6) against numpy.

Small odd sizes, so that every tile of M, N and K is partial somewhere; once on contiguous
[batch, rows, cols] operands and once with every stride unusual (A permuted to
[M, batch, K], B stored transposed, C written into padded rows). Shared by the interpreter,
ptxas and GPU tests.
"""
from __future__ import annotations

import numpy as np

from tests.kernels.control_flow import _example
from tests.kernels.elementwise import Case

batched_matmul_kernel = _example("batched_matmul").batched_matmul_kernel

BATCH, M, N, K = 3, 40, 72, 56
TILES = {"BLOCK_SIZE_M": 32, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 2}
PAD = 8   # extra columns per row of C in the strided case, which must stay untouched


def _grid(args):
    return (-(-args["M"] // TILES["BLOCK_SIZE_M"]) * -(-args["N"] // TILES["BLOCK_SIZE_N"]),
            args["B"])


def _contiguous_args(rng):
    return {"a_ptr": rng.standard_normal((BATCH, M, K)).astype(np.float16),
            "b_ptr": rng.standard_normal((BATCH, K, N)).astype(np.float16),
            "c_ptr": np.zeros((BATCH, M, N), np.float16),
            "B": BATCH, "M": M, "N": N, "K": K,
            "stride_ab": M * K, "stride_am": K, "stride_ak": 1,
            "stride_bb": K * N, "stride_bk": N, "stride_bn": 1,
            "stride_cb": M * N, "stride_cm": N, "stride_cn": 1}


def _strided_args(rng):
    return {"a_ptr": rng.standard_normal((M, BATCH, K)).astype(np.float16),   # A[b] = a[:, b]
            "b_ptr": rng.standard_normal((BATCH, N, K)).astype(np.float16),   # B[b] = b[b].T
            "c_ptr": np.zeros((BATCH, M, N + PAD), np.float16),               # C[b] = c[b, :, :N]
            "B": BATCH, "M": M, "N": N, "K": K,
            "stride_ab": K, "stride_am": BATCH * K, "stride_ak": 1,
            "stride_bb": N * K, "stride_bk": 1, "stride_bn": K,
            "stride_cb": M * (N + PAD), "stride_cm": N + PAD, "stride_cn": 1}


def _operands(args):
    """The [batch, M, K] and [batch, K, N] operands the strides describe, as float64."""
    def view(name, shape, strides):
        array = args[name]
        return np.lib.stride_tricks.as_strided(
            array, shape, [args[s] * array.itemsize for s in strides]).astype(np.float64)
    batch, m, n, k = args["B"], args["M"], args["N"], args["K"]
    return (view("a_ptr", (batch, m, k), ("stride_ab", "stride_am", "stride_ak")),
            view("b_ptr", (batch, k, n), ("stride_bb", "stride_bk", "stride_bn")))


def _reference(args):
    a, b = _operands(args)
    out = np.zeros_like(args["c_ptr"])
    out[:, :, :args["N"]] = np.matmul(a, b).astype(np.float16)
    return {"c_ptr": out}


CASES = [
    Case("example-batched-matmul-3x40x72x56", batched_matmul_kernel, _contiguous_args, _grid,
         TILES, ("c_ptr",), _reference, False, 1e-2),
    Case("example-batched-matmul-every-stride", batched_matmul_kernel, _strided_args, _grid,
         TILES, ("c_ptr",), _reference, False, 1e-2),
]
