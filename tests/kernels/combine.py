"""Combine-function kernels (``tl.reduce``, ``tl.associative_scan``, tuples of blocks) and
scan corner cases, shared by the interpreter, ptxas and GPU tests.

Integer data keeps results exact (integer products wrap the same everywhere); float cases
use max (exact) or a tolerance, since the GPU combines in a tree order. Masked-off elements
load a value that cannot change the result where they are combined (reverse scans along a
masked axis would start from them, so those use full tiles).
"""
from __future__ import annotations

import numpy as np

import aotk
import aotk.language as tl
from tests.kernels.elementwise import Case


@aotk.jit
def _maximum(a, b):
    return tl.maximum(a, b)


@aotk.jit
def _product(a, b):
    return a * b


@aotk.jit
def _larger_with_index(value1, index1, value2, index2):
    """(value, index) of the larger value; ties keep the smaller index (like tl.argmax)."""
    take = (value2 > value1) | ((value2 == value1) & (index2 < index1))
    return tl.where(take, value2, value1), tl.where(take, index2, index1)


@aotk.jit
def _recurrence(a1, b1, a2, b2):
    """x[i] = a[i] * x[i-1] + b[i] as a scan: associative, not commutative."""
    return a1 * a2, b1 * a2 + b2


@aotk.jit
def _larger_by_branch(a, b):
    if a > b:
        return a
    return b


@aotk.jit
def scan_combine_kernel(x_ptr, y_ptr, out_ptr, out2_ptr, M, N, OP: tl.constexpr,
                        AXIS: tl.constexpr, REVERSE: tl.constexpr, BLOCK_M: tl.constexpr,
                        BLOCK_N: tl.constexpr):
    rows = tl.arange(0, BLOCK_M)[:, None]
    cols = tl.arange(0, BLOCK_N)[None, :]
    mask = (rows < M) & (cols < N)
    offsets = rows * N + cols
    x = tl.load(x_ptr + offsets, mask=mask, other=0)
    y = tl.load(y_ptr + offsets, mask=mask, other=0)
    if OP == "max":
        a = tl.associative_scan(x, AXIS, _maximum, reverse=REVERSE)
        b = y
    elif OP == "argmax":
        index = tl.zeros((BLOCK_M, BLOCK_N), tl.int32) + (rows if AXIS == 0 else cols)
        a, b = tl.associative_scan((x, index), AXIS, _larger_with_index, reverse=REVERSE)
    else:
        a, b = tl.associative_scan((x, y), AXIS, _recurrence, reverse=REVERSE)
    tl.store(out_ptr + offsets, a, mask=mask)
    tl.store(out2_ptr + offsets, b, mask=mask)


@aotk.jit
def reduce_combine_kernel(x_ptr, out_ptr, out2_ptr, M, N, OP: tl.constexpr, AXIS: tl.constexpr,
                          BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.arange(0, BLOCK_M)[:, None]
    cols = tl.arange(0, BLOCK_N)[None, :]
    mask = (rows < M) & (cols < N)
    x = tl.load(x_ptr + rows * N + cols, mask=mask, other=1 if OP == "product" else 0)
    if OP == "product":
        a = tl.reduce(x, AXIS, _product, keep_dims=True)
        b = a
    elif OP == "branch":
        a = tl.reduce(x, AXIS, _larger_by_branch, keep_dims=True)
        b = a
    else:
        index = tl.zeros((BLOCK_M, BLOCK_N), tl.int32) + (rows if AXIS == 0 else cols)
        a, b = tl.reduce((x, index), AXIS, _larger_with_index, keep_dims=True)
    if AXIS == 0:
        tl.store(out_ptr + cols, a, mask=cols < N)
        tl.store(out2_ptr + cols, b, mask=cols < N)
    else:
        tl.store(out_ptr + rows, a, mask=rows < M)
        tl.store(out2_ptr + rows, b, mask=rows < M)


@aotk.jit
def reduce_3d_tuple_kernel(x_ptr, out_ptr, idx_ptr, total_ptr, A: tl.constexpr, B: tl.constexpr,
                           C: tl.constexpr):
    a = tl.arange(0, A)[:, None, None]
    b = tl.arange(0, B)[None, :, None]
    c = tl.arange(0, C)[None, None, :]
    x = tl.load(x_ptr + a * B * C + b * C + c)
    index = tl.zeros((A, B, C), tl.int32) + b
    value, where = tl.reduce((x, index), 1, _larger_with_index, keep_dims=True)   # [A, 1, C]
    tl.store(out_ptr + a * C + c, value)
    tl.store(idx_ptr + a * C + c, where)
    tl.store(total_ptr, tl.reduce(x, None, _maximum))


@aotk.jit
def scan_corners_kernel(x_ptr, w_ptr, out_ptr, out2_ptr, BLOCK: tl.constexpr,
                        WIDTH: tl.constexpr):
    """A small scan whose layout has replica lanes and warps, used in a 2-D layout (moved
    through shared memory, where replicas write too), and a 3-D scan on the middle axis."""
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    w = tl.load(w_ptr + tl.arange(0, WIDTH))
    prefix = tl.cumsum(x, 0)
    grid = prefix[:, None] * w[None, :]
    tl.store(out_ptr + offs[:, None] * WIDTH + tl.arange(0, WIDTH)[None, :], grid)
    cube = tl.reshape(grid, (BLOCK // 4, 4, WIDTH))
    scanned = tl.cumprod(cube % 3 + 1, axis=1, reverse=True)
    i = tl.arange(0, BLOCK // 4)[:, None, None]
    j = tl.arange(0, 4)[None, :, None]
    k = tl.arange(0, WIDTH)[None, None, :]
    tl.store(out2_ptr + (i * 4 + j) * WIDTH + k, scanned)


@aotk.jit
def cumsum_dtype_kernel(x_ptr, out_ptr, wide_ptr, n, REVERSE: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0)
    tl.store(out_ptr + offs, tl.cumsum(x, 0, reverse=REVERSE), mask=offs < n)
    tl.store(wide_ptr + offs, tl.cumsum(x, 0, reverse=REVERSE, dtype=tl.int64), mask=offs < n)


# --- references --------------------------------------------------------------------------

def _sequential_scan(columns, axis, reverse, combine):
    """out[i] = combine(out[i-1], x[i]) along axis (reverse: of the flipped axis)."""
    columns = [np.flip(c, axis) if reverse else c for c in columns]
    moved = [np.moveaxis(c, axis, 0).copy() for c in columns]
    for i in range(1, moved[0].shape[0]):
        values = combine(*[m[i - 1] for m in moved], *[m[i] for m in moved])
        for m, v in zip(moved, values):
            m[i] = v
    out = [np.moveaxis(m, 0, axis) for m in moved]
    return [np.flip(o, axis) if reverse else o for o in out]


def _larger_with_index_np(v1, i1, v2, i2):
    take = (v2 > v1) | ((v2 == v1) & (i2 < i1))
    return np.where(take, v2, v1), np.where(take, i2, i1)


def _scan_case(op, axis, reverse, dtype, M, N, block_m, block_n, low, high, exact=True):
    def make(rng):
        if np.dtype(dtype).kind == "f":
            x = rng.uniform(low, high, M * N).astype(dtype)
            y = rng.uniform(low, high, M * N).astype(dtype)
        else:
            x = rng.integers(low, high, M * N).astype(dtype)
            y = rng.integers(low, high, M * N).astype(dtype)
        out2_dtype = np.int32 if op == "argmax" else dtype
        return {"x_ptr": x, "y_ptr": y, "out_ptr": np.zeros(M * N, dtype),
                "out2_ptr": np.zeros(M * N, out2_dtype), "M": M, "N": N}

    def reference(args):
        x, y = args["x_ptr"].reshape(M, N), args["y_ptr"].reshape(M, N)
        with np.errstate(all="ignore"):
            if op == "max":
                (a,) = _sequential_scan([x], axis, reverse, lambda p, q: (np.maximum(p, q),))
                b = y
            elif op == "argmax":
                index = np.indices((M, N))[axis].astype(np.int32)
                a, b = _sequential_scan([x, index], axis, reverse, _larger_with_index_np)
            else:
                a, b = _sequential_scan([x, y], axis, reverse,
                                        lambda a1, b1, a2, b2: (a1 * a2, b1 * a2 + b2))
        return {"out_ptr": a.ravel(), "out2_ptr": b.ravel()}
    name = f"scan-{op}-{M}x{N}-axis{axis}{'-reverse' if reverse else ''}-{np.dtype(dtype).name}"
    return Case(name, scan_combine_kernel, make, (1,),
                {"OP": op, "AXIS": axis, "REVERSE": reverse, "BLOCK_M": block_m,
                 "BLOCK_N": block_n}, ("out_ptr", "out2_ptr"), reference, exact, 1e-4)


def _reduce_case(op, axis, dtype, M, N, block_m, block_n, low, high):
    def make(rng):
        x = rng.integers(low, high, M * N).astype(dtype)
        length = N if axis == 0 else M
        out2_dtype = np.int32 if op == "argmax" else dtype
        return {"x_ptr": x, "out_ptr": np.zeros(length, dtype),
                "out2_ptr": np.zeros(length, out2_dtype), "M": M, "N": N}

    def reference(args):
        x = args["x_ptr"].reshape(M, N)
        with np.errstate(all="ignore"):
            if op == "product":
                a = np.multiply.reduce(x, axis=axis, dtype=dtype)
                b = a
            elif op == "branch":
                a = b = x.max(axis=axis)
            else:
                a, b = x.max(axis=axis), x.argmax(axis=axis).astype(np.int32)
        return {"out_ptr": a, "out2_ptr": b}
    return Case(f"reduce-{op}-{M}x{N}-axis{axis}-{np.dtype(dtype).name}", reduce_combine_kernel,
                make, (1,), {"OP": op, "AXIS": axis, "BLOCK_M": block_m, "BLOCK_N": block_n},
                ("out_ptr", "out2_ptr"), reference)


def _reduce_3d_reference(args):
    x = args["x_ptr"].reshape(4, 8, 16)
    return {"out_ptr": x.max(1).ravel(), "idx_ptr": x.argmax(1).astype(np.int32).ravel(),
            "total_ptr": np.array([x.max()], x.dtype)}


def _corners_reference(args):
    prefix = np.cumsum(args["x_ptr"], dtype=np.int32)
    grid = prefix[:, None] * args["w_ptr"][None, :]
    cube = (np.fmod(grid, 3) + 1).reshape(-1, 4, grid.shape[1])
    scanned = np.flip(np.multiply.accumulate(np.flip(cube, 1), axis=1, dtype=np.int32), 1)
    return {"out_ptr": grid.ravel(), "out2_ptr": scanned.ravel()}


def _cumsum_dtype_case(n, block, reverse):
    def make(rng):
        return {"x_ptr": rng.integers(0, 256, n).astype(np.uint8),
                "out_ptr": np.zeros(n, np.uint32), "wide_ptr": np.zeros(n, np.int64), "n": n}

    def reference(args):
        x = args["x_ptr"][::-1] if reverse else args["x_ptr"]
        out = np.cumsum(x, dtype=np.uint32)
        out = out[::-1] if reverse else out
        return {"out_ptr": out, "wide_ptr": out.astype(np.int64)}
    return Case(f"cumsum-uint8-to-uint32-{n}-of-{block}{'-reverse' if reverse else ''}",
                cumsum_dtype_kernel, make, (1,), {"REVERSE": reverse, "BLOCK": block},
                ("out_ptr", "wide_ptr"), reference)


CASES = [
    _scan_case("max", 1, False, np.int32, 5, 300, 8, 512, -1000, 1000),
    _scan_case("max", 1, True, np.int32, 5, 512, 8, 512, -1000, 1000),
    _scan_case("max", 0, False, np.float32, 100, 30, 128, 32, -1, 1),
    _scan_case("argmax", 1, False, np.int16, 16, 64, 16, 64, -50, 50),
    _scan_case("argmax", 0, True, np.int32, 64, 16, 64, 16, -50, 50),
    _scan_case("recurrence", 1, False, np.int32, 2, 1000, 2, 1024, -3, 4),
    _scan_case("recurrence", 1, True, np.int32, 2, 1024, 2, 1024, -3, 4),
    _scan_case("recurrence", 0, False, np.int64, 200, 3, 256, 4, -3, 4),
    _scan_case("recurrence", 0, True, np.float32, 64, 20, 64, 32, 0.5, 1.0, exact=False),
    _reduce_case("product", 1, np.int32, 30, 50, 32, 64, -3, 4),
    _reduce_case("product", 0, np.int64, 60, 7, 64, 8, -5, 6),
    _reduce_case("argmax", 0, np.int32, 64, 64, 64, 64, -20, 20),
    _reduce_case("argmax", 1, np.uint8, 64, 64, 64, 64, 0, 30),
    _reduce_case("branch", 0, np.int32, 64, 32, 64, 32, -1000, 1000),
    Case("reduce-3d-tuple-keep-dims", reduce_3d_tuple_kernel,
         lambda rng: {"x_ptr": rng.integers(-9, 9, 4 * 8 * 16).astype(np.int32),
                      "out_ptr": np.zeros(4 * 16, np.int32), "idx_ptr": np.zeros(4 * 16, np.int32),
                      "total_ptr": np.zeros(1, np.int32)},
         (1,), {"A": 4, "B": 8, "C": 16}, ("out_ptr", "idx_ptr", "total_ptr"),
         _reduce_3d_reference),
    Case("scan-corners-replicas-and-3d", scan_corners_kernel,
         lambda rng: {"x_ptr": rng.integers(-9, 9, 16).astype(np.int32),
                      "w_ptr": rng.integers(-3, 4, 32).astype(np.int32),
                      "out_ptr": np.zeros(16 * 32, np.int32), "out2_ptr": np.zeros(16 * 32, np.int32)},
         (1,), {"BLOCK": 16, "WIDTH": 32}, ("out_ptr", "out2_ptr"), _corners_reference),
    _cumsum_dtype_case(1000, 1024, False),
    _cumsum_dtype_case(37, 64, True),
]
