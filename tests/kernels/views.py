"""Kernels whose elements change places: trans/permute, reshape/ravel, join/split.

Shared by the interpreter, ptxas and GPU tests; each case has a numpy reference.
"""
from __future__ import annotations

import numpy as np

import aotk
import aotk.language as tl
from tests.kernels.elementwise import Case


@aotk.jit
def transpose_kernel(x_ptr, out_ptr, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """out[N, M] = x[M, N].T for a masked, non-power-of-two M x N, with .T and tl.trans."""
    rows = tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    x = tl.load(x_ptr + rows[:, None] * N + cols[None, :], mask=mask, other=0.0)
    out_offsets = tl.trans(cols[None, :] * M + rows[:, None])
    tl.store(out_ptr + out_offsets, x.T, mask=tl.trans(mask))


@aotk.jit
def permute_3d_kernel(x_ptr, out_ptr, A: tl.constexpr, B: tl.constexpr, C: tl.constexpr):
    a = tl.arange(0, A)[:, None, None]
    b = tl.arange(0, B)[None, :, None]
    c = tl.arange(0, C)[None, None, :]
    x = tl.load(x_ptr + a * B * C + b * C + c)
    y = tl.permute(x, 2, 0, 1)                     # [C, A, B]
    cc = tl.arange(0, C)[:, None, None]
    aa = tl.arange(0, A)[None, :, None]
    bb = tl.arange(0, B)[None, None, :]
    tl.store(out_ptr + cc * A * B + aa * B + bb, y + 1)


@aotk.jit
def reshape_kernel(x_ptr, out_ptr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """A flat block reshaped to 2D and 3D, transformed, and flattened back."""
    flat = tl.load(x_ptr + tl.arange(0, BLOCK_M * BLOCK_N))
    tile = tl.reshape(flat, BLOCK_M, BLOCK_N)
    row_sums = tl.sum(tile, axis=1)                 # needs the 2D shape
    cube = tile.reshape(BLOCK_M, 2, BLOCK_N // 2)
    scaled = cube * 2 + row_sums[:, None, None]
    tl.store(out_ptr + tl.arange(0, BLOCK_M * BLOCK_N), tl.ravel(scaled))


@aotk.jit
def join_split_kernel(a_ptr, b_ptr, pairs_ptr, out_ptr, BLOCK: tl.constexpr):
    """Interleave two vectors with join; de-interleave pairs with split."""
    offs = tl.arange(0, BLOCK)
    a = tl.load(a_ptr + offs)
    b = tl.load(b_ptr + offs)
    joined = tl.join(a, b)                          # [BLOCK, 2]
    tl.store(out_ptr + tl.arange(0, 2 * BLOCK), tl.reshape(joined, 2 * BLOCK))
    pairs = tl.load(pairs_ptr + offs[:, None] * 2 + tl.arange(0, 2)[None, :])
    first, second = tl.split(pairs)
    tl.store(out_ptr + 2 * BLOCK + offs, first - second)
    flag_first, flag_second = tl.split(tl.join(a > 0, b > 0))
    tl.store(out_ptr + 3 * BLOCK + offs, (flag_first & ~flag_second).to(tl.int16))


def _c(name, kernel, make, constants, reference, exact=True):
    return Case(name, kernel, make, (1,), constants, ("out_ptr",), reference, exact, 1e-5)


def _transpose_reference(args):
    M, N = args["M"], args["N"]
    return {"out_ptr": args["x_ptr"].reshape(M, N).T.ravel().copy()}


def _reshape_reference(args):
    tile = args["x_ptr"].astype(np.float32).reshape(8, 32)
    out = tile.reshape(8, 2, 16) * 2 + tile.sum(1)[:, None, None]
    return {"out_ptr": out.ravel().astype(np.float16)}


def _join_split_reference(args):
    a, b, pairs = args["a_ptr"], args["b_ptr"], args["pairs_ptr"].reshape(-1, 2)
    interleaved = np.stack([a, b], -1).ravel()
    flags = ((a > 0) & ~(b > 0)).astype(np.int16)
    return {"out_ptr": np.concatenate([interleaved, pairs[:, 0] - pairs[:, 1], flags])}


def _column_major_reference(args):
    tile = args["x_ptr"].reshape(args["N"], args["M"]).T
    return {"out_ptr": (tile * 2 + tile.sum(1)[:, None]).T.ravel().copy()}


@aotk.jit
def item_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    """Each program's element as a scalar (x.item()), doubled and stored by one thread."""
    one = tl.load(x_ptr + tl.program_id(0) + tl.arange(0, 1))
    tl.store(out_ptr + tl.program_id(0), one.item() * 2 + tl.sum(tl.zeros([BLOCK], tl.int32)))


@aotk.jit
def row_scaled_tile_kernel(x_ptr, w_ptr, out_ptr, BLOCK_M: tl.constexpr,
                           BLOCK_N: tl.constexpr):
    """A [BLOCK_M] row read only as a column of a [BLOCK_M, BLOCK_N] tile (x[:, None]): the
    tile's layout would hold each of its elements in 16 threads."""
    rows = tl.arange(0, BLOCK_M)
    offs = rows[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
    x = tl.load(x_ptr + rows)
    tl.store(out_ptr + offs, tl.load(w_ptr + offs) * x[:, None])


@aotk.jit
def column_major_tile_kernel(x_ptr, out_ptr, M, N, BLOCK_M: tl.constexpr,
                             BLOCK_N: tl.constexpr):
    """A [BLOCK_M, BLOCK_N] tile of a column-major M x N matrix (consecutive rows adjacent
    in memory), read, changed by a row reduction, and written back column-major: both
    accesses are contiguous along the first dimension only."""
    rows = tl.arange(0, BLOCK_M)[:, None]
    cols = tl.arange(0, BLOCK_N)[None, :]
    mask = (rows < M) & (cols < N)
    tile = tl.load(x_ptr + rows + cols * M, mask=mask, other=0.0)
    tl.store(out_ptr + rows + cols * M, tile * 2 + tl.sum(tile, 1)[:, None], mask=mask)


CASES = [
    Case("item-of-one-element-blocks", item_kernel,
         lambda rng: {"x_ptr": rng.integers(-100, 100, 8).astype(np.int32),
                      "out_ptr": np.zeros(8, np.int32)},
         (8,), {"BLOCK": 128}, ("out_ptr",), lambda args: {"out_ptr": args["x_ptr"] * 2}),
    _c("trans-2d-masked", transpose_kernel,
       lambda rng: {"x_ptr": rng.standard_normal(45 * 27).astype(np.float32),
                    "out_ptr": np.zeros(45 * 27, np.float32), "M": 45, "N": 27},
       {"BLOCK_M": 64, "BLOCK_N": 32}, _transpose_reference),
    _c("permute-3d", permute_3d_kernel,
       lambda rng: {"x_ptr": rng.integers(-100, 100, 4 * 8 * 16).astype(np.int32),
                    "out_ptr": np.zeros(4 * 8 * 16, np.int32)},
       {"A": 4, "B": 8, "C": 16},
       lambda a: {"out_ptr": (a["x_ptr"].reshape(4, 8, 16).transpose(2, 0, 1) + 1).ravel()}),
    _c("reshape-ravel-fp16", reshape_kernel,
       lambda rng: {"x_ptr": rng.integers(-4, 4, 256).astype(np.float16),
                    "out_ptr": np.zeros(256, np.float16)},
       {"BLOCK_M": 8, "BLOCK_N": 32}, _reshape_reference),
    _c("join-split-int16-bool", join_split_kernel,
       lambda rng: {"a_ptr": rng.integers(-9, 9, 64).astype(np.int16),
                    "b_ptr": rng.integers(-9, 9, 64).astype(np.int16),
                    "pairs_ptr": rng.integers(-9, 9, 128).astype(np.int16),
                    "out_ptr": np.zeros(4 * 64, np.int16)},
       {"BLOCK": 64}, _join_split_reference),
    _c("row-read-as-a-column-of-a-tile", row_scaled_tile_kernel,
       lambda rng: {"x_ptr": rng.standard_normal(256).astype(np.float32),
                    "w_ptr": rng.standard_normal(256 * 64).astype(np.float32),
                    "out_ptr": np.zeros(256 * 64, np.float32)},
       {"BLOCK_M": 256, "BLOCK_N": 64},
       lambda a: {"out_ptr": (a["w_ptr"].reshape(256, 64) * a["x_ptr"][:, None]).ravel()}),
    _c("column-major-tile-read-and-written", column_major_tile_kernel,
       lambda rng: {"x_ptr": rng.integers(-8, 8, 64 * 27).astype(np.float32),
                    "out_ptr": np.zeros(64 * 27, np.float32), "M": 64, "N": 27},
       {"BLOCK_M": 64, "BLOCK_N": 32}, _column_major_reference),
]
