"""Tensor-descriptor kernels (``tl.make_tensor_descriptor``) against numpy references.

Shared by the interpreter tests (direct, and after the pointer fallback) and the GPU tests;
the matmul is the example's (``examples/kernels/matmul_descriptor.py``): Triton's grouped
program order, A and B tiles read through descriptors with runtime shapes and strides in a
runtime K loop, fp32 accumulation, C written through a descriptor in fp16.
Arrays carry padding columns past the described shape: zero fill must not read them and
dropped stores must not write them.
"""
from __future__ import annotations

import numpy as np

import aotk
import aotk.language as tl
from examples.kernels.matmul_descriptor import matmul_descriptor_kernel
from tests.kernels.elementwise import Case

SENTINEL = -7   # what the padding of output arrays holds; it must survive every store


@aotk.jit
def tile_copy_kernel(src, dst, tiles, M, N, stride_src, stride_dst, SHIFT_M: tl.constexpr,
                     SHIFT_N: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """Program (i, j) reads the tile at (i * BLOCK_M - SHIFT_M, j * BLOCK_N - SHIFT_N), so the
    first tiles start before the tensor and the last run past its end. It stores the tile
    back at the same place in dst through a descriptor (what lies outside is dropped) and,
    as read, into ``tiles`` (zero fill visible)."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    src_desc = tl.make_tensor_descriptor(src, [M, N], [stride_src, 1], [BLOCK_M, BLOCK_N])
    dst_desc = tl.make_tensor_descriptor(dst, shape=[M, N], strides=[stride_dst, 1],
                                         block_shape=[BLOCK_M, BLOCK_N])
    row = pid_m * BLOCK_M - SHIFT_M
    col = pid_n * BLOCK_N - SHIFT_N
    tile = src_desc.load([row, col])
    dst_desc.store([row, col], tile)
    rows = tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    first = (pid_m * tl.num_programs(1) + pid_n) * BLOCK_M * BLOCK_N
    tl.store(tiles + first + rows[:, None] * BLOCK_N + cols[None, :], tile)


@aotk.jit
def _scale_tile(src_desc, dst_desc, offset):
    """An inlined helper taking descriptors: dst = src * 3 - 1 at ``offset``, through the
    free functions and the descriptor's properties."""
    x = tl.load_tensor_descriptor(src_desc, [offset])
    tl.static_assert(src_desc.block_shape[0] == x.shape[0])
    y = (x * 3 - 1).to(dst_desc.dtype)
    tl.store_tensor_descriptor(dst_desc, [offset], y)


@aotk.jit
def scale_1d_kernel(x, y, N: tl.constexpr, BLOCK: tl.constexpr):
    """A 1-D descriptor whose shape is a constexpr; the last program runs past N."""
    x_desc = tl.make_tensor_descriptor(x, [N], [1], [BLOCK])
    y_desc = tl.make_tensor_descriptor(y, [N], [1], [BLOCK])
    _scale_tile(x_desc, y_desc, tl.program_id(0) * BLOCK)


@aotk.jit
def copy_3d_kernel(src, dst, B, M, N, src_stride_b, src_stride_m, dst_stride_b, dst_stride_m,
                   SHIFT_M: tl.constexpr, BLOCK_B: tl.constexpr, BLOCK_M: tl.constexpr,
                   BLOCK_N: tl.constexpr):
    """dst = src + 1 over a 3-D tensor, tiles shifted up by SHIFT_M rows; 64-bit strides
    (when given) make the fallback's index arithmetic i64."""
    src_desc = tl.make_tensor_descriptor(src, [B, M, N], [src_stride_b, src_stride_m, 1],
                                         [BLOCK_B, BLOCK_M, BLOCK_N])
    dst_desc = tl.make_tensor_descriptor(dst, [B, M, N], [dst_stride_b, dst_stride_m, 1],
                                         [BLOCK_B, BLOCK_M, BLOCK_N])
    offsets = [tl.program_id(0) * BLOCK_B, tl.program_id(1) * BLOCK_M - SHIFT_M,
               tl.program_id(2) * BLOCK_N]
    dst_desc.store(offsets, src_desc.load(offsets) + 1)


@aotk.jit
def gated_product_3d_kernel(x_ptr, w_ptr, out_ptr, acc_ptr, B, M, N, K, stride_xb,
                            stride_xm, stride_wk, stride_ob, stride_om, stride_ab, stride_am,
                            BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                            BLOCK_K: tl.constexpr):
    """acc = x[b] @ w over a K loop; out[b] = acc * sigmoid(acc) in out's dtype and acc in
    fp32, both stored through rank-3 descriptors as ``tl.reshape(.., [1, BM, BN])`` (cast
    after the reshape for out): the epilogue of a fused gated MLP. Edge tiles run past M
    and N (dropped stores)."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    batch = tl.program_id(2)
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        ks = k + tl.arange(0, BLOCK_K)
        x = tl.load(x_ptr + batch * stride_xb + rows[:, None] * stride_xm + ks[None, :],
                    mask=(rows[:, None] < M) & (ks[None, :] < K), other=0.0)
        w = tl.load(w_ptr + ks[:, None] * stride_wk + cols[None, :],
                    mask=(ks[:, None] < K) & (cols[None, :] < N), other=0.0)
        acc = tl.dot(x, w, acc)
    out_desc = tl.make_tensor_descriptor(out_ptr, [B, M, N], [stride_ob, stride_om, 1],
                                         [1, BLOCK_M, BLOCK_N])
    acc_desc = tl.make_tensor_descriptor(acc_ptr, [B, M, N], [stride_ab, stride_am, 1],
                                         [1, BLOCK_M, BLOCK_N])
    offsets = [batch, pid_m * BLOCK_M, pid_n * BLOCK_N]
    gated = tl.reshape(acc * tl.sigmoid(acc), [1, BLOCK_M, BLOCK_N])
    out_desc.store(offsets, gated.to(out_desc.dtype))
    acc_desc.store(offsets, tl.reshape(acc, [1, BLOCK_M, BLOCK_N]))


def _cdiv(a, b):
    return -(-a // b)


def _padded(rng, dtype, shape, padding):
    """A random array whose last dimension has ``padding`` extra columns."""
    shape = tuple(shape[:-1]) + (shape[-1] + padding,)
    if np.dtype(dtype).kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    return rng.integers(-1000, 1000, shape).astype(dtype)


def _tile_copy_case(name, dtype, m, n, shift_m, shift_n, block_m, block_n, dst_padding=5):
    grid = (_cdiv(m + shift_m, block_m), _cdiv(n + shift_n, block_n))

    def make(rng):
        src = _padded(rng, dtype, (m, n), 3)
        dst = np.full((m, n + dst_padding), SENTINEL, dtype)
        tiles = np.zeros(grid + (block_m, block_n), dtype)
        return {"src": src, "dst": dst, "tiles": tiles, "M": m, "N": n,
                "stride_src": src.shape[1], "stride_dst": dst.shape[1]}

    def reference(args):
        src = args["src"][:, :n]
        dst = np.full_like(args["dst"], SENTINEL)
        dst[:, :n] = src
        # Zero fill: the tensor inside a frame of zeros, cut into the shifted tiles.
        framed = np.zeros((grid[0] * block_m, grid[1] * block_n), dtype)
        framed[shift_m:shift_m + m, shift_n:shift_n + n] = src
        tiles = framed.reshape(grid[0], block_m, grid[1], block_n).transpose(0, 2, 1, 3)
        return {"dst": dst, "tiles": tiles}
    return Case(name, tile_copy_kernel, make, grid,
                {"SHIFT_M": shift_m, "SHIFT_N": shift_n, "BLOCK_M": block_m,
                 "BLOCK_N": block_n}, ("dst", "tiles"), reference)


def _scale_1d_case(name, dtype, n, block):
    def make(rng):
        return {"x": _padded(rng, dtype, (n,), 4), "y": np.full(n + 4, SENTINEL, dtype)}

    def reference(args):
        y = np.full_like(args["y"], SENTINEL)
        y[:n] = args["x"][:n] * 3 - 1
        return {"y": y}
    return Case(name, scale_1d_kernel, make, (_cdiv(n, block),), {"N": n, "BLOCK": block},
                ("y",), reference)


def _copy_3d_case(name, dtype, b, m, n, shift_m, blocks, wide_strides=False):
    block_b, block_m, block_n = blocks
    stride = np.int64 if wide_strides else int

    def make(rng):
        src = _padded(rng, dtype, (b, m, n), 2)
        dst = np.full((b, m, n + 3), SENTINEL, dtype)
        return {"src": src, "dst": dst, "B": b, "M": m, "N": n,
                "src_stride_b": stride(src.strides[0] // src.itemsize),
                "src_stride_m": stride(src.strides[1] // src.itemsize),
                "dst_stride_b": stride(dst.strides[0] // dst.itemsize),
                "dst_stride_m": stride(dst.strides[1] // dst.itemsize)}

    def reference(args):
        dst = np.full_like(args["dst"], SENTINEL)
        dst[:, :, :n] = args["src"][:, :, :n] + 1
        return {"dst": dst}
    grid = (_cdiv(b, block_b), _cdiv(m + shift_m, block_m), _cdiv(n, block_n))
    return Case(name, copy_3d_kernel, make, grid,
                {"SHIFT_M": shift_m, "BLOCK_B": block_b, "BLOCK_M": block_m,
                 "BLOCK_N": block_n}, ("dst",), reference)


def _gated_product_case(name, dtype, b, m, n, k, pitch, blocks):
    """out and acc rows ``pitch`` elements apart (a multiple of 16 keeps the stores on TMA
    on sm_90), N short of it: the padding must keep its sentinel."""
    block_m, block_n, block_k = blocks

    def make(rng):
        x = (rng.standard_normal((b, m, k)) / 4).astype(np.float16)
        w = (rng.standard_normal((k, n)) / 4).astype(np.float16)
        out = np.full((b, m, pitch), SENTINEL, dtype)
        acc = np.full((b, m, pitch), SENTINEL, np.float32)
        return {"x_ptr": x, "w_ptr": w, "out_ptr": out, "acc_ptr": acc, "B": b, "M": m,
                "N": n, "K": k, "stride_xb": m * k, "stride_xm": k, "stride_wk": n,
                "stride_ob": m * pitch, "stride_om": pitch, "stride_ab": m * pitch,
                "stride_am": pitch}

    def reference(args):
        acc = args["x_ptr"].astype(np.float64) @ args["w_ptr"].astype(np.float64)
        out = np.full_like(args["out_ptr"], SENTINEL)
        out[:, :, :n] = (acc / (1 + np.exp(-acc))).astype(dtype)
        stored = np.full_like(args["acc_ptr"], SENTINEL)
        stored[:, :, :n] = acc
        return {"out_ptr": out, "acc_ptr": stored}
    return Case(name, gated_product_3d_kernel, make, (_cdiv(m, block_m), _cdiv(n, block_n), b),
                {"BLOCK_M": block_m, "BLOCK_N": block_n, "BLOCK_K": block_k},
                ("out_ptr", "acc_ptr"), reference, False, 1e-2)


def _matmul_case(name, m, n, k, block_m=64, block_n=64, block_k=32, group_m=2):
    def make(rng):
        a = rng.standard_normal((m, k)).astype(np.float16)
        b = rng.standard_normal((k, n)).astype(np.float16)
        c = np.zeros((m, n), np.float16)
        return {"a_ptr": a, "b_ptr": b, "c_ptr": c, "M": m, "N": n, "K": k,
                "stride_am": k, "stride_bk": n, "stride_cm": n}

    def reference(args):
        product = args["a_ptr"].astype(np.float64) @ args["b_ptr"].astype(np.float64)
        return {"c_ptr": product.astype(np.float16)}
    return Case(name, matmul_descriptor_kernel, make,
                (_cdiv(m, block_m) * _cdiv(n, block_n),),
                {"BLOCK_SIZE_M": block_m, "BLOCK_SIZE_N": block_n, "BLOCK_SIZE_K": block_k,
                 "GROUP_SIZE_M": group_m}, ("c_ptr",), reference, False, 1e-2)


CASES = [
    _tile_copy_case("descriptor-2d-fp32-zero-fill-and-dropped-stores", np.float32, 37, 45,
                    3, 5, 16, 16),
    _tile_copy_case("descriptor-2d-fp16-zero-fill-and-dropped-stores", np.float16, 50, 70,
                    7, 9, 32, 32),
    _scale_1d_case("descriptor-1d-int32-constexpr-shape-helper", np.int32, 1000, 128),
    _copy_3d_case("descriptor-3d-fp32", np.float32, 3, 10, 20, 2, (2, 8, 16)),
    _copy_3d_case("descriptor-3d-fp16-int64-strides", np.float16, 5, 12, 40, 3, (4, 4, 32),
                  wide_strides=True),
    # Rows of whole 128-byte panels, 16-element pitches, columns shifted by whole 16 bytes:
    # TMA stores on sm_90 where a box starts inside the tensor (past its end: clipped),
    # the copy-out path for the first row and column of tiles, which start before it.
    _tile_copy_case("descriptor-2d-fp16-tma-store-clipped", np.float16, 100, 152, 7, 8, 32, 64,
                    dst_padding=8),
    _tile_copy_case("descriptor-2d-fp32-tma-store-two-panels", np.float32, 45, 68, 3, 4, 16,
                    64, dst_padding=12),
    # Rows of 300 bytes: a TMA store would overwrite the 4 bytes after each row's end (it
    # writes whole 16 bytes), so every tile takes the copy-out path.
    _tile_copy_case("descriptor-2d-fp16-ragged-rows-copied-out", np.float16, 100, 150, 0, 0,
                    32, 64, dst_padding=10),
    # The same with columns shifted by 18 bytes: a TMA box may not start there (the
    # hardware stops the kernel), so these stay pointer stores.
    _tile_copy_case("descriptor-2d-fp16-unaligned-columns-pointer-stores", np.float16, 100,
                    150, 7, 9, 32, 64, dst_padding=10),
    _gated_product_case("descriptor-3d-reshaped-epilogue-fp16", np.float16, 2, 100, 72, 48,
                        80, (64, 64, 16)),
    _gated_product_case("descriptor-3d-reshaped-epilogue-fp32-four-panels", np.float32, 1, 64,
                        128, 32, 128, (64, 128, 32)),
    _matmul_case("descriptor-matmul-fp16-odd-200x136x72", 200, 136, 72),
    _matmul_case("descriptor-matmul-fp16-clipped-200x144x64", 200, 144, 64),
    _matmul_case("descriptor-matmul-fp16-128x128x64", 128, 128, 64),
]


@aotk.jit
def persistent_matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bk, stride_cm,
                             BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                             BLOCK_K: tl.constexpr, ACC_FP16: tl.constexpr):
    """Each program loops over output tiles (a persistent grid): the K loop, with its
    descriptor loads (TMA on sm_90), runs once per tile, so its mbarriers are set up,
    waited on and released again on every outer trip. ACC_FP16 accumulates in fp16
    (out_dtype)."""
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[stride_am, 1],
                                       block_shape=[BLOCK_M, BLOCK_K])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[stride_bk, 1],
                                       block_shape=[BLOCK_K, BLOCK_N])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[stride_cm, 1],
                                       block_shape=[BLOCK_M, BLOCK_N])
    tiles_n = tl.cdiv(N, BLOCK_N)
    tiles = tl.cdiv(M, BLOCK_M) * tiles_n
    for tile in range(tl.program_id(0), tiles, tl.num_programs(0)):
        row = (tile // tiles_n) * BLOCK_M
        column = (tile % tiles_n) * BLOCK_N
        if ACC_FP16:
            acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float16)
        else:
            acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k in range(0, K, BLOCK_K):
            a = a_desc.load([row, k])
            b = b_desc.load([k, column])
            if ACC_FP16:
                acc = tl.dot(a, b, acc, out_dtype=tl.float16)
            else:
                acc = tl.dot(a, b, acc)
        c_desc.store([row, column], acc.to(c_desc.dtype))


@aotk.jit
def tile_then_segments_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bk, stride_cm,
                              BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr,
                              BLOCK_SIZE_K: tl.constexpr):
    """For code generation only (what it stores is not a product): the loop shape of a
    stream-K matmul, whole tiles and then K segments that start mid-tile, each a TMA loop
    inside the program's loop, entered under `if k_lo < k_hi`. Unmarked barriers made LLVM
    copy the one after the elected thread's mbarrier init into both sides of its branch
    here."""
    pid = tl.program_id(axis=0)
    programs = tl.num_programs(axis=0)
    num_tiles = tl.cdiv(M, BLOCK_SIZE_M) * tl.cdiv(N, BLOCK_SIZE_N)
    iters_per_tile = tl.cdiv(K, BLOCK_SIZE_K)
    waves = num_tiles // programs
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[stride_am, 1],
                                       block_shape=[BLOCK_SIZE_M, BLOCK_SIZE_K])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[stride_bk, 1],
                                       block_shape=[BLOCK_SIZE_K, BLOCK_SIZE_N])
    for unit in range(0, waves + 2):
        if unit < waves:
            tile = pid + unit * programs
            k_lo = 0
        else:
            tile = pid % num_tiles
            k_lo = (pid + unit) % iters_per_tile
        if k_lo < iters_per_tile:
            offs_m = (tile // 8) * BLOCK_SIZE_M
            offs_n = (tile % 8) * BLOCK_SIZE_N
            accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
            for k in range(k_lo, iters_per_tile):
                a = a_desc.load([offs_m, k * BLOCK_SIZE_K])
                b = b_desc.load([k * BLOCK_SIZE_K, offs_n])
                accumulator = tl.dot(a, b, accumulator)
            rows = offs_m + tl.arange(0, BLOCK_SIZE_M)
            columns = offs_n + tl.arange(0, BLOCK_SIZE_N)
            tl.store(c_ptr + rows[:, None] * stride_cm + columns[None, :], accumulator)
