"""Block pointers (``tl.make_block_ptr`` / ``tl.advance``, loads and stores with
``boundary_check`` and ``padding_option``): the interpreter against numpy, the compiled
kernel for sm_80 / sm_90, Triton's errors, and the GPU against torch."""
import numpy as np
import pytest

import aotk
import aotk.language as tl
from aotk.errors import CompilationError


@aotk.jit
def _matmul(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
            stride_cm, stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
            BLOCK_K: tl.constexpr):
    """The block-pointer matmul of Triton's tutorials: the pointers advance along K in a
    runtime loop, and every edge is checked."""
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    a_block = tl.make_block_ptr(a_ptr, (M, K), (stride_am, stride_ak), (pid_m * BLOCK_M, 0),
                                (BLOCK_M, BLOCK_K), (1, 0))
    b_block = tl.make_block_ptr(base=b_ptr, shape=(K, N), strides=(stride_bk, stride_bn),
                                offsets=(0, pid_n * BLOCK_N), block_shape=(BLOCK_K, BLOCK_N),
                                order=(1, 0))
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for _ in range(0, tl.cdiv(K, BLOCK_K)):
        a = tl.load(a_block, boundary_check=(0, 1), padding_option="zero")
        b = tl.load(b_block, boundary_check=(0, 1))
        acc += tl.dot(a, b)
        a_block = tl.advance(a_block, (0, BLOCK_K))
        b_block = b_block.advance((BLOCK_K, 0))
    c_block = tl.make_block_ptr(c_ptr, (M, N), (stride_cm, stride_cn),
                                (pid_m * BLOCK_M, pid_n * BLOCK_N), (BLOCK_M, BLOCK_N), (1, 0))
    tl.store(c_block, acc, boundary_check=(0, 1))


def _run_matmul(m, n, k, block=(16, 16, 16)):
    rng = np.random.RandomState(m + n + k)
    # quarter integers: exact in tf32, the precision of an fp32 tl.dot by default
    a = (rng.randint(-8, 8, (m, k)) / 4).astype(np.float32)
    b = (rng.randint(-8, 8, (k, n)) / 4).astype(np.float32)
    c = np.full((m, n), -7.0, np.float32)
    bm, bn, bk = block
    _matmul[(-(-m // bm), -(-n // bn))](a, b, c, m, n, k, k, 1, n, 1, n, 1,
                                        BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk)
    return a, b, c


@pytest.mark.parametrize("m,n,k", [(32, 32, 32), (19, 23, 37), (5, 40, 9)])
def test_a_block_pointer_matmul_with_checked_edges_matches_numpy(m, n, k):
    a, b, c = _run_matmul(m, n, k)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


@aotk.jit
def _copy_tile(x_ptr, out_ptr, rows, cols, row0, col0, CHECK: tl.constexpr,
               PADDING: tl.constexpr):
    source = tl.make_block_ptr(x_ptr, (rows, cols), (cols, 1), (row0, col0), (4, 8), (1, 0))
    target = tl.make_block_ptr(out_ptr, (4, 8), (8, 1), (0, 0), (4, 8), (1, 0))
    tl.store(target, tl.load(source, boundary_check=CHECK, padding_option=PADDING))


@pytest.mark.parametrize("check,padding,fill", [((0, 1), "zero", 0.0), ((1, 0), "nan", np.nan),
                                                ((0, 1), "", 0.0)])
def test_elements_outside_the_tensor_read_the_padding(check, padding, fill):
    x = np.arange(6 * 10, dtype=np.float32).reshape(6, 10)
    out = np.zeros((4, 8), np.float32)
    _copy_tile[(1,)](x, out, 6, 10, 4, 5, CHECK=check, PADDING=padding)
    expected = np.full((4, 8), fill, np.float32)
    expected[:2, :5] = x[4:6, 5:10]
    np.testing.assert_array_equal(out, expected)


def test_only_the_checked_dimension_is_masked():
    """boundary_check=(1,): columns past the shape read padding; rows are not checked, so
    the rows below the tensor's declared shape are read from memory."""
    x = np.arange(8 * 10, dtype=np.float32).reshape(8, 10)
    out = np.zeros((4, 8), np.float32)
    _copy_tile[(1,)](x, out, 6, 10, 4, 5, CHECK=(1,), PADDING="zero")
    expected = np.zeros((4, 8), np.float32)
    expected[:, :5] = x[4:8, 5:10]
    np.testing.assert_array_equal(out, expected)


@aotk.jit
def _scale_rows_in_place(x_ptr, n, BLOCK: tl.constexpr):
    """A 1-D block pointer advanced in a while loop, stored back with a checked edge."""
    block = tl.make_block_ptr(x_ptr, (n,), (1,), (0,), (BLOCK,), (0,))
    start = 0
    while start < n:
        tl.store(block, tl.load(block, boundary_check=(0,)) * 2, boundary_check=(0,))
        block = tl.advance(block, (BLOCK,))
        start += BLOCK


def test_a_block_pointer_carried_by_a_while_loop_stores_only_inside_the_tensor():
    x = np.arange(40, dtype=np.int32)
    _scale_rows_in_place[(1,)](x[:37], 37, BLOCK=8)
    np.testing.assert_array_equal(x, np.concatenate([np.arange(37) * 2, np.arange(37, 40)]))


@aotk.jit
def _pick_tile(x_ptr, out_ptr, flag):
    block = tl.make_block_ptr(x_ptr, (8, 8), (8, 1), (0, 0), (4, 4), (1, 0))
    if flag > 0:
        block = tl.advance(block, (4, 4))
    target = tl.make_block_ptr(out_ptr, (4, 4), (4, 1), (0, 0), (4, 4), (1, 0))
    tl.store(target, tl.load(block))


@pytest.mark.parametrize("flag", [0, 1])
def test_a_block_pointer_advanced_in_one_branch_of_a_runtime_if(flag):
    x = np.arange(64, dtype=np.float32).reshape(8, 8)
    out = np.zeros((4, 4), np.float32)
    _pick_tile[(1,)](x, out, flag)
    np.testing.assert_array_equal(out, x[4:, 4:] if flag else x[:4, :4])


@aotk.jit
def _carried_tuple(out_ptr, n):
    pair = (0, 1)
    for _ in range(n):
        pair = (pair[1], pair[0] + pair[1])
    tl.store(out_ptr, pair[0])


def test_a_tuple_is_carried_by_a_runtime_loop_as_in_triton():
    out = np.zeros(1, np.int32)
    _carried_tuple[(1,)](out, 10)
    assert out[0] == 55


@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
def test_the_block_pointer_matmul_compiles_for_each_target(target):
    compiled = aotk.compile(_matmul, "*fp16, *fp16, *fp32, i32, i32, i32, i32, i32:1, i32, "
                                     "i32:1, i32, i32:1",
                            {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32}, target=target)
    assert ".entry _matmul" in compiled.ptx
    assert "mma" in compiled.ptx   # the loads feed tensor cores


@aotk.jit
def _misuse(x_ptr, WHAT: tl.constexpr):
    block = tl.make_block_ptr(x_ptr, (8,), (1,), (0,), (8,), (0,))
    if WHAT == "mask":
        tl.load(block, mask=tl.arange(0, 8) < 4)
    elif WHAT == "nan_int":
        tl.load(block, boundary_check=(0,), padding_option="nan")
    elif WHAT == "bad_dim":
        tl.load(block, boundary_check=(1,))
    elif WHAT == "duplicate":
        tl.load(block, boundary_check=(0, 0))
    elif WHAT == "shape":
        tl.store(block, tl.zeros((4,), tl.int32))
    elif WHAT == "dtype":
        tl.store(block, tl.zeros((8,), tl.int64))
    elif WHAT == "order":
        tl.make_block_ptr(x_ptr, (8,), (1,), (0,), (8,), (1,))
    elif WHAT == "lengths":
        tl.make_block_ptr(x_ptr, (8, 8), (1,), (0,), (8,), (0,))
    elif WHAT == "plain_pointer":
        tl.load(x_ptr + tl.arange(0, 8), boundary_check=(0,))
    elif WHAT == "padding":
        tl.load(block, boundary_check=(0,), padding_option="one")


@pytest.mark.parametrize("what,message", [
    ("mask", "`mask` and `other` arguments cannot be specified for loading block pointers"),
    ("nan_int", "Padding option `nan` is not supported for integer block pointers"),
    ("bad_dim", "boundary_check names dimension 1"),
    ("duplicate", "Duplicate dimension in `boundary_check`"),
    ("shape", r"Block shape\(\[8\]\) and value shape\(\[4\]\) mismatch"),
    ("dtype", r"Block element type\(int32\) and value element type\(int64\) mismatch"),
    ("order", r"Expected a permutation of \(0, 1, ..., len\(order\)-1\) in order"),
    ("lengths", "Expected shape/strides/offsets/block_shape to have the same length"),
    ("plain_pointer", "please use block pointers"),
    ("padding", "Padding option one not supported"),
])
def test_misuse_is_one_clear_error_as_in_triton(what, message):
    with pytest.raises(CompilationError, match=message):
        _misuse[(1,)](np.zeros(8, np.int32), WHAT=what)


@pytest.mark.gpu
@pytest.mark.parametrize("m,n,k", [(128, 128, 64), (100, 75, 131)])
def test_the_block_pointer_matmul_on_the_gpu_matches_torch(m, n, k):
    torch = pytest.importorskip("torch")
    a = torch.randn(m, k, device="cuda", dtype=torch.float16)
    b = torch.randn(k, n, device="cuda", dtype=torch.float16)
    c = torch.full((m, n), -7.0, device="cuda")
    _matmul[(triton_cdiv(m, 64), triton_cdiv(n, 64))](
        a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
        c.stride(0), c.stride(1), BLOCK_M=64, BLOCK_N=64, BLOCK_K=32)
    torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-2, atol=1e-2)


def triton_cdiv(a, b):
    return -(-a // b)
