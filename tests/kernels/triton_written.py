"""Kernels written against Triton's own API (``import triton``), and the cases that run them:
the differential test loads this file twice, under Triton's interpreter (in a process with
TRITON_INTERPRET=1) and under aotk, runs every case of ``CASES`` and compares the outputs.
Each kernel exercises builtins aotk composes or lowers itself.

``CASES``: {case id: (kernel name, grid, make_args, constexprs)}; ``make_args()`` returns
(arguments, the output tensors among them). ``run_cases(module)`` runs them all on CPU
tensors and returns {case id: [output arrays]}.
"""
import numpy as np
import torch
import triton
import triton.language as tl


@triton.jit
def copy_tile(x_ptr, out_ptr, rows, cols, row0, col0, CHECK: tl.constexpr,
              PADDING: tl.constexpr):
    source = tl.make_block_ptr(x_ptr, (rows, cols), (cols, 1), (row0, col0), (4, 8), (1, 0))
    target = tl.make_block_ptr(out_ptr, (4, 8), (8, 1), (0, 0), (4, 8), (1, 0))
    tl.store(target, tl.load(source, boundary_check=CHECK, padding_option=PADDING))


@triton.jit
def double_in_blocks(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    source = tl.make_block_ptr(x_ptr, (n,), (1,), (0,), (BLOCK,), (0,))
    target = tl.make_block_ptr(out_ptr, (n,), (1,), (0,), (BLOCK,), (0,))
    for _ in range(0, tl.cdiv(n, BLOCK)):
        tl.store(target, tl.load(source, boundary_check=(0,)) * 2, boundary_check=(0,))
        source = tl.advance(source, (BLOCK,))
        target = tl.advance(target, (BLOCK,))


@triton.jit
def row_functions(x_ptr, index_ptr, softmax_ptr, top_ptr, merged_ptr, gathered_ptr,
                  counts_ptr, ored_ptr, ROWS: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    offsets = tl.arange(0, ROWS)[:, None] * N + tl.arange(0, N)[None, :]
    x = tl.load(x_ptr + offsets)
    index = tl.load(index_ptr + offsets)
    tl.store(softmax_ptr + offsets, tl.softmax(x, dim=1, keep_dims=True))
    tl.store(top_ptr + tl.arange(0, ROWS)[:, None] * K + tl.arange(0, K)[None, :],
             tl.topk(x, K))
    tl.store(merged_ptr + offsets, tl.bitonic_merge(x))
    tl.store(gathered_ptr + offsets, tl.gather(x, index, 1))
    tl.store(counts_ptr + tl.arange(0, N), tl.histogram(tl.reshape(index, (ROWS * N,)), N))
    tl.store(ored_ptr + tl.arange(0, ROWS), tl.reduce_or(index, 1))


@triton.jit
def grouped_order(out_ptr, size_i, size_j, GROUP: tl.constexpr, M: tl.constexpr,
                  N: tl.constexpr):
    i = tl.arange(0, M)[:, None] + tl.zeros((M, N), tl.int32)
    j = tl.arange(0, N)[None, :] + tl.zeros((M, N), tl.int32)
    new_i, new_j = tl.swizzle2d(i, j, size_i, size_j, GROUP)
    tl.store(out_ptr + i * N + j, new_i * N + new_j)


def _tile_args():
    x = torch.arange(8 * 10, dtype=torch.float32).reshape(8, 10)
    out = torch.full((4, 8), -5.0)
    return (x, out, 6, 10, 4, 5), [out]


def _double_args():
    out = torch.full((40,), -1.0)
    return (torch.arange(40, dtype=torch.float32), out, 37), [out]


def _row_args(rows=8, n=16, k=4):
    rng = np.random.RandomState(0)
    x = torch.from_numpy(rng.randn(rows, n).astype(np.float32))
    index = torch.from_numpy(rng.randint(0, n, (rows, n)).astype(np.int32))
    outputs = [torch.zeros(rows, n), torch.zeros(rows, k), torch.zeros(rows, n),
               torch.zeros(rows, n), torch.zeros(n, dtype=torch.int32),
               torch.zeros(rows, dtype=torch.int32)]
    return (x, index, *outputs), outputs


def _order_args():
    out = torch.zeros(8, 4, dtype=torch.int32)
    return (out, 5, 4), [out]


CASES = {
    **{f"copy_tile{check}{padding!r}": ("copy_tile", (1,), _tile_args,
                                        {"CHECK": check, "PADDING": padding})
       for check, padding in [((0, 1), "zero"), ((1, 0), "nan"), ((1,), "zero"),
                              ((0, 1), "")]},
    "double_in_blocks": ("double_in_blocks", (1,), _double_args, {"BLOCK": 8}),
    "row_functions": ("row_functions", (1,), _row_args, {"ROWS": 8, "N": 16, "K": 4}),
    "grouped_order": ("grouped_order", (1,), _order_args, {"GROUP": 3, "M": 8, "N": 4}),
}


def run_cases(module) -> dict:
    results = {}
    for case, (kernel, grid, make_args, constants) in CASES.items():
        args, outputs = make_args()
        getattr(module, kernel)[grid](*args, **constants)
        results[case] = [o.numpy() for o in outputs]
    return results
