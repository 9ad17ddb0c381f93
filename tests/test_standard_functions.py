"""Triton's ``triton.language.standard`` functions aotk composes from its own ops:
``tl.softmax``, ``tl.swizzle2d``, ``tl.reduce_or``, ``tl.topk``, and the ``tl.assume`` hint.
The interpreter against numpy, compiled kernels for sm_80 / sm_90, the GPU against torch."""
import numpy as np
import pytest

import aotk
import aotk.language as tl
from aotk.errors import CompilationError


@aotk.jit
def _softmax(x_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr, DIM: tl.constexpr,
             KEEP: tl.constexpr):
    offsets = tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :]
    x = tl.load(x_ptr + offsets)
    tl.store(out_ptr + offsets, tl.softmax(x, dim=DIM, keep_dims=KEEP))


def _reference_softmax(x, dim, keep):
    """Triton's composition, in numpy (without keep_dims the reduced values broadcast
    along the last axis, as Triton's do)."""
    shifted = x - x.max(axis=dim, keepdims=keep)
    num = np.exp(shifted)
    return num / num.sum(axis=dim, keepdims=keep)


@pytest.mark.parametrize("dim,keep", [(1, True), (0, True), (None, True), (0, False)])
def test_softmax_on_the_interpreter_matches_its_composition(dim, keep):
    x = np.random.RandomState(0).randn(16, 16).astype(np.float32)
    out = np.zeros_like(x)
    _softmax[(1,)](x, out, M=16, N=16, DIM=dim, KEEP=keep)
    np.testing.assert_allclose(out, _reference_softmax(x, 0 if dim is None else dim, keep),
                               rtol=1e-5, atol=1e-6)


def test_softmax_of_rows_sums_to_one():
    x = np.random.RandomState(1).randn(8, 32).astype(np.float32) * 10
    out = np.zeros_like(x)
    _softmax[(1,)](x, out, M=8, N=32, DIM=1, KEEP=True)
    np.testing.assert_allclose(out.sum(axis=1), np.ones(8), rtol=1e-5)


@aotk.jit
def _swizzle(out_i_ptr, out_j_ptr, size_i, size_j, SIZE_G: tl.constexpr, M: tl.constexpr,
             N: tl.constexpr):
    i = tl.arange(0, M)[:, None] + tl.zeros((M, N), tl.int32)
    j = tl.arange(0, N)[None, :] + tl.zeros((M, N), tl.int32)
    new_i, new_j = tl.swizzle2d(i, j, size_i, size_j, SIZE_G)
    offsets = i * N + j
    tl.store(out_i_ptr + offsets, new_i)
    tl.store(out_j_ptr + offsets, new_j)


def test_swizzle2d_is_the_example_of_triton_docs():
    """4x4 with groups of 2 rows: row-major [[0..3], [4..7], ...] becomes
    [[0, 2, 4, 6], [1, 3, 5, 7], [8, 10, 12, 14], [9, 11, 13, 15]]."""
    new_i, new_j = np.zeros((4, 4), np.int32), np.zeros((4, 4), np.int32)
    _swizzle[(1,)](new_i, new_j, 4, 4, SIZE_G=2, M=4, N=4)
    placed = np.zeros((4, 4), np.int32)
    placed[new_i, new_j] = np.arange(16).reshape(4, 4)
    np.testing.assert_array_equal(placed, [[0, 2, 4, 6], [1, 3, 5, 7], [8, 10, 12, 14],
                                           [9, 11, 13, 15]])


def test_swizzle2d_with_a_short_last_group_is_a_permutation():
    new_i, new_j = np.zeros((8, 4), np.int32), np.zeros((8, 4), np.int32)
    _swizzle[(1,)](new_i, new_j, 5, 4, SIZE_G=3, M=8, N=4)
    inside = (new_i[:5] * 4 + new_j[:5]).ravel()
    assert sorted(inside) == list(range(20))


@aotk.jit
def _swizzle_scalars(out_ptr, SIZE_G: tl.constexpr):
    a, b = tl.swizzle2d(tl.program_id(0), 1, 4, 4, SIZE_G)
    tl.store(out_ptr + tl.program_id(0) * 2, a)
    tl.store(out_ptr + tl.program_id(0) * 2 + 1, b)


def test_swizzle2d_takes_scalars_and_compile_time_sizes():
    out = np.zeros(8, np.int32)
    _swizzle_scalars[(4,)](out, SIZE_G=2)
    # (i, 1) for i = 0..3 -> linear i*4+1 -> (0,0),(0,2),(2,0),(2,2) + within-group moves
    expected = []
    for i in range(4):
        index = i * 4 + 1
        first = index // 8 * 2
        rows = min(4 - first, 2)
        expected += [first + index % 8 % rows, index % 8 // rows]
    np.testing.assert_array_equal(out, expected)


@aotk.jit
def _reduce_or(x_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr, AXIS: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :])
    if AXIS == 0:
        tl.store(out_ptr + tl.arange(0, N), tl.reduce_or(x, 0))
    else:
        tl.store(out_ptr + tl.arange(0, M), x.reduce_or(1))


@pytest.mark.parametrize("dtype", [np.int32, np.uint8, np.int64])
@pytest.mark.parametrize("axis", [0, 1])
def test_reduce_or_on_the_interpreter_matches_numpy(dtype, axis):
    x = (1 << np.random.RandomState(2).randint(0, 7, (8, 16))).astype(dtype)
    out = np.zeros(16 if axis == 0 else 8, dtype)
    _reduce_or[(1,)](x, out, M=8, N=16, AXIS=axis)
    np.testing.assert_array_equal(out, np.bitwise_or.reduce(x, axis=axis))


@aotk.jit
def _topk(x_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr,
          DESCENDING: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :])
    tl.store(out_ptr + tl.arange(0, M)[:, None] * K + tl.arange(0, K)[None, :],
             tl.topk(x, K, descending=DESCENDING))


@pytest.mark.parametrize("n,k", [(16, 4), (64, 1), (32, 32), (128, 8)])
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.float16])
@pytest.mark.parametrize("descending", [True, False])
def test_topk_on_the_interpreter_matches_numpy(n, k, dtype, descending):
    x = np.random.RandomState(n + k).permutation(4 * n).reshape(4, n).astype(dtype)
    out = np.zeros((4, k), dtype)
    _topk[(1,)](x, out, M=4, N=n, K=k, DESCENDING=descending)
    ordered = np.sort(x, axis=1)
    np.testing.assert_array_equal(out, ordered[:, ::-1][:, :k] if descending else ordered[:, :k])


@aotk.jit
def _with_assumption(x_ptr, out_ptr, n):
    tl.assume(n > 0)
    tl.assume(n % 16 == 0)
    offsets = tl.arange(0, 16)
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=offsets < n, other=0) + 1)


def test_assume_is_accepted_and_changes_nothing():
    x = np.arange(16, dtype=np.int32)
    out = np.zeros_like(x)
    _with_assumption[(1,)](x, out, 16)
    np.testing.assert_array_equal(out, x + 1)


@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
def test_the_standard_functions_compile_for_each_target(target):
    for kernel, signature, constants in [
            (_softmax, "*fp32, *fp32", {"M": 32, "N": 64, "DIM": 1, "KEEP": True}),
            (_swizzle, "*i32, *i32, i32, i32", {"SIZE_G": 8, "M": 16, "N": 16}),
            (_reduce_or, "*i32, *i32", {"M": 32, "N": 32, "AXIS": 1}),
            (_topk, "*fp32, *fp32", {"M": 4, "N": 128, "K": 8, "DESCENDING": True}),
            (_with_assumption, "*i32, *i32, i32", {})]:
        compiled = aotk.compile(kernel, signature, constants, target=target)
        assert f".entry {kernel.__name__}" in compiled.ptx


@aotk.jit
def _misuse(x_ptr, WHAT: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, 16))
    if WHAT == "or_float":
        tl.reduce_or(x.to(tl.float32), 0)
    elif WHAT == "topk_k":
        tl.topk(x, 3)
    elif WHAT == "topk_axis":
        tl.topk(x[:, None] + tl.zeros((16, 4), tl.int32), 2, dim=0)


@pytest.mark.parametrize("what,message", [
    ("or_float", "reduce_or needs integers"),
    ("topk_k", "k must be a power of two"),
    ("topk_axis", "only the last axis"),
])
def test_misuse_is_one_clear_error(what, message):
    with pytest.raises(CompilationError, match=message):
        _misuse[(1,)](np.zeros(16, np.int32), WHAT=what)


@pytest.mark.gpu
def test_the_standard_functions_on_the_gpu_match_torch():
    torch = pytest.importorskip("torch")
    x = torch.randn(32, 64, device="cuda")
    out = torch.empty_like(x)
    _softmax[(1,)](x, out, M=32, N=64, DIM=1, KEEP=True)
    torch.testing.assert_close(out, torch.softmax(x, 1), rtol=1e-5, atol=1e-6)

    bits = (1 << torch.randint(0, 20, (32, 32), device="cuda")).int()
    ored = torch.empty(32, device="cuda", dtype=torch.int32)
    _reduce_or[(1,)](bits, ored, M=32, N=32, AXIS=1)
    expected = bits[:, 0].clone()
    for column in range(1, 32):
        expected |= bits[:, column]
    assert torch.equal(ored, expected)

    values = torch.randn(4, 128, device="cuda")
    top = torch.empty(4, 8, device="cuda")
    _topk[(1,)](values, top, M=4, N=128, K=8, DESCENDING=True)
    assert torch.equal(top, torch.topk(values, 8, dim=1).values)

    new_i = torch.empty(16, 16, device="cuda", dtype=torch.int32)
    new_j = torch.empty_like(new_i)
    _swizzle[(1,)](new_i, new_j, 16, 16, SIZE_G=4, M=16, N=16)
    on_cpu_i, on_cpu_j = np.zeros((16, 16), np.int32), np.zeros((16, 16), np.int32)
    _swizzle[(1,)](on_cpu_i, on_cpu_j, 16, 16, SIZE_G=4, M=16, N=16)
    assert (new_i.cpu().numpy() == on_cpu_i).all() and (new_j.cpu().numpy() == on_cpu_j).all()
