"""``tl.gather`` and ``tl.histogram`` (ops through shared memory): the interpreter against
numpy, the compiled kernels for sm_80 / sm_90, Triton's errors, and the GPU against the
interpreter and torch (test_core's shapes)."""
import numpy as np
import pytest

import aotk
import aotk.language as tl
from aotk.errors import CompilationError


@aotk.jit
def _gather_2d(src_ptr, index_ptr, out_ptr, S0: tl.constexpr, S1: tl.constexpr,
               I0: tl.constexpr, I1: tl.constexpr, AXIS: tl.constexpr):
    src = tl.load(src_ptr + tl.arange(0, S0)[:, None] * S1 + tl.arange(0, S1)[None, :])
    offsets = tl.arange(0, I0)[:, None] * I1 + tl.arange(0, I1)[None, :]
    index = tl.load(index_ptr + offsets)
    tl.store(out_ptr + offsets, tl.gather(src, index, AXIS))


@aotk.jit
def _gather_1d(src_ptr, index_ptr, out_ptr, S: tl.constexpr, I: tl.constexpr):
    src = tl.load(src_ptr + tl.arange(0, S))
    index = tl.load(index_ptr + tl.arange(0, I))
    tl.store(out_ptr + tl.arange(0, I), src.gather(index, 0))


GATHER_CASES = [([4, 4], [8, 4], 0), ([128, 64], [256, 64], 0), ([128, 64], [128, 128], 1),
                ([16, 8], [16, 2], 1)]


def _gather_inputs(src_shape, index_shape, axis, dtype=np.float32, index_dtype=np.int32):
    rng = np.random.RandomState(sum(src_shape) + sum(index_shape))
    src = (rng.randn(*src_shape) * 100).astype(dtype)
    index = rng.randint(0, src_shape[axis], index_shape).astype(index_dtype)
    return src, index


@pytest.mark.parametrize("src_shape,index_shape,axis", GATHER_CASES)
@pytest.mark.parametrize("dtype,index_dtype", [(np.float32, np.int32), (np.float16, np.int64),
                                               (np.int8, np.uint8)])
def test_gather_on_the_interpreter_matches_numpy(src_shape, index_shape, axis, dtype,
                                                 index_dtype):
    src, index = _gather_inputs(src_shape, index_shape, axis, dtype, index_dtype)
    out = np.zeros(index_shape, dtype)
    _gather_2d[(1,)](src, index, out, *src_shape, *index_shape, AXIS=axis)
    np.testing.assert_array_equal(out, np.take_along_axis(src, index.astype(np.int64), axis))


def test_gather_of_a_1d_block_as_a_tensor_method():
    src, index = _gather_inputs([32], [64], 0)
    out = np.zeros(64, np.float32)
    _gather_1d[(1,)](src, index, out, S=32, I=64)
    np.testing.assert_array_equal(out, src[index])


@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
@pytest.mark.parametrize("signature", ["*fp32, *i32, *fp32", "*fp16, *i64, *fp16",
                                       "*i1, *u8, *i1"])
def test_gather_compiles_for_each_target(target, signature):
    compiled = aotk.compile(_gather_2d, signature, {"S0": 64, "S1": 32, "I0": 128, "I1": 32,
                                                    "AXIS": 0}, target=target)
    assert ".entry _gather_2d" in compiled.ptx
    assert "ld.shared" in compiled.ptx and "st.shared" in compiled.ptx


@aotk.jit
def _histogram(x_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr, MASKED: tl.constexpr):
    offsets = tl.arange(0, M)
    x = tl.load(x_ptr + offsets)
    if MASKED:
        counts = tl.histogram(x, N, offsets < M // 2)
    else:
        counts = x.histogram(N)
    tl.store(out_ptr + tl.arange(0, N), counts + tl.zeros([M, N], tl.int32).sum(0))


def _expected_histogram(x, n):
    x = x.astype(np.int64)
    return np.bincount(x[(x >= 0) & (x < n)], minlength=n).astype(np.int32)


@pytest.mark.parametrize("m,n", [(2048, 2), (1024, 8), (256, 512), (8, 2), (1, 1)])
@pytest.mark.parametrize("masked", [False, True])
def test_histogram_on_the_interpreter_counts_like_numpy(m, n, masked):
    x = np.random.RandomState(m + n).randint(0, n, m).astype(np.int32)
    out = np.full(n, -1, np.int32)
    _histogram[(1,)](x, out, M=m, N=n, MASKED=masked)
    np.testing.assert_array_equal(out, _expected_histogram(x[: m // 2] if masked else x, n))


@pytest.mark.parametrize("dtype", [np.int8, np.uint16, np.int64, np.uint64])
def test_values_outside_the_bins_are_not_counted(dtype):
    x = np.array([0, 1, 3, 4, 100, 7, 2, 1] * 4, dtype)
    if np.issubdtype(dtype, np.signedinteger):
        x[::5] = -1
    out = np.zeros(4, np.int32)
    _histogram[(1,)](x, out, M=32, N=4, MASKED=False)
    np.testing.assert_array_equal(out, _expected_histogram(x, 4))


@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
@pytest.mark.parametrize("m,n,masked", [(2048, 2, False), (256, 512, True), (8, 512, False),
                                        (1024, 128, True)])
def test_histogram_compiles_for_each_target(target, m, n, masked):
    compiled = aotk.compile(_histogram, "*i32, *i32", {"M": m, "N": n, "MASKED": masked},
                            target=target)
    assert "atom.shared.add.u32" in compiled.ptx or "red.shared.add.u32" in compiled.ptx


@aotk.jit
def _misuse(x_ptr, WHAT: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, 8)[:, None] * 8 + tl.arange(0, 8)[None, :])
    if WHAT == "float_index":
        tl.gather(x, x.to(tl.float32), 0)
    elif WHAT == "rank":
        tl.gather(x, tl.arange(0, 8), 0)
    elif WHAT == "axis":
        tl.gather(x, x, 2)
    elif WHAT == "other_dim":
        tl.gather(x, tl.zeros((8, 4), tl.int32), 0)
    elif WHAT == "2d_histogram":
        tl.histogram(x, 8)
    elif WHAT == "float_histogram":
        tl.histogram(x.to(tl.float32).sum(0), 8)
    elif WHAT == "mask":
        tl.histogram(x.sum(0), 8, x.sum(0))


@pytest.mark.parametrize("what,message", [
    ("float_index", "index must be an integer tensor"),
    ("rank", "source and index tensors must have the same rank"),
    ("axis", r"gather axis 2 must be < source rank \(2\)"),
    ("other_dim", "index dim 1 must match the corresponding source dim"),
    ("2d_histogram", "histogram only supports 1D input"),
    ("float_histogram", "histogram only supports integer input"),
    ("mask", "Mask must have boolean scalar type"),
])
def test_misuse_is_one_clear_error_as_in_triton(what, message):
    with pytest.raises(CompilationError, match=message):
        _misuse[(1,)](np.zeros(64, np.int32), WHAT=what)


@pytest.mark.gpu
@pytest.mark.parametrize("src_shape,index_shape,axis", GATHER_CASES)
def test_gather_on_the_gpu_matches_torch(src_shape, index_shape, axis):
    torch = pytest.importorskip("torch")
    src = torch.randn(src_shape, device="cuda")
    index = torch.randint(0, src_shape[axis], index_shape, device="cuda", dtype=torch.int32)
    out = torch.empty(index_shape, device="cuda")
    _gather_2d[(1,)](src, index, out, *src_shape, *index_shape, AXIS=axis)
    assert torch.equal(out, torch.gather(src, axis, index.long()))


@pytest.mark.gpu
@pytest.mark.parametrize("m,n", [(2048, 2), (1024, 8), (1024, 128), (256, 512), (32, 512),
                                 (8, 512), (8, 2)])
@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("num_warps", [1, 4])
def test_histogram_on_the_gpu_matches_torch(m, n, masked, num_warps):
    torch = pytest.importorskip("torch")
    x = torch.randint(-2, n + 2, (m,), device="cuda", dtype=torch.int32)
    out = torch.empty(n, device="cuda", dtype=torch.int32)
    _histogram[(1,)](x, out, M=m, N=n, MASKED=masked, num_warps=num_warps)
    counted = x[: m // 2] if masked else x
    expected = torch.histc(counted[(counted >= 0) & (counted < n)].float(), bins=n, min=0,
                           max=n - 1) if n > 1 else (counted == 0).sum().reshape(1).float()
    assert torch.equal(out.float(), expected)
