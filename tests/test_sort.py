"""``tl.sort`` and ``tl.flip`` (bitonic networks of view ops): the interpreter against numpy,
the compiled kernel for sm_80 / sm_90, and the GPU against torch."""
import numpy as np
import pytest

import aotk
import aotk.language as tl
from aotk.errors import CompilationError


@aotk.jit
def _sort_rows(x_ptr, sorted_ptr, flipped_ptr, ROWS: tl.constexpr, N: tl.constexpr,
               DESCENDING: tl.constexpr):
    offsets = tl.arange(0, ROWS)[:, None] * N + tl.arange(0, N)[None, :]
    x = tl.load(x_ptr + offsets)
    tl.store(sorted_ptr + offsets, tl.sort(x, descending=DESCENDING))
    tl.store(flipped_ptr + offsets, x.flip())


def _expected(x, descending):
    ordered = np.sort(x, axis=1, kind="stable")
    return ordered[:, ::-1] if descending else ordered


@pytest.mark.parametrize("n", [1, 2, 16, 128])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32, np.uint8, np.int64])
@pytest.mark.parametrize("descending", [False, True])
def test_sort_and_flip_on_the_interpreter_match_numpy(n, dtype, descending):
    x = (np.random.RandomState(n).randn(4, n) * 60).astype(dtype)
    x[0, : n // 2] = x[0, n // 2:][: n // 2]          # ties
    got, flipped = np.zeros_like(x), np.zeros_like(x)
    _sort_rows[(1,)](x, got, flipped, ROWS=4, N=n, DESCENDING=descending)
    np.testing.assert_array_equal(got, _expected(x, descending))
    np.testing.assert_array_equal(flipped, x[:, ::-1])


@aotk.jit
def _sort_1d(x_ptr, out_ptr, N: tl.constexpr):
    offsets = tl.arange(0, N)
    tl.store(out_ptr + offsets, tl.sort(tl.load(x_ptr + offsets), 0))


def test_sort_of_a_1d_block_with_the_axis_named_as_liger_does():
    keys = np.random.RandomState(0).randint(0, 2**32 - 1, 256, dtype=np.uint64) \
        .astype(np.uint32)
    out = np.zeros_like(keys)
    _sort_1d[(1,)](keys, out, N=256)
    np.testing.assert_array_equal(out, np.sort(keys))


@aotk.jit
def _sort_first_axis(x_ptr, out_ptr):
    offsets = tl.arange(0, 4)[:, None] * 4 + tl.arange(0, 4)[None, :]
    tl.store(out_ptr + offsets, tl.sort(tl.load(x_ptr + offsets), 0))


def test_sorting_another_axis_than_the_last_is_an_error_as_in_triton():
    x = np.zeros((4, 4), np.float32)
    with pytest.raises(CompilationError, match="only the last axis can be sorted"):
        _sort_first_axis[(1,)](x, x.copy())


@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
def test_sort_compiles_for_each_target(target):
    compiled = aotk.compile(_sort_rows, "*fp32, *fp32, *fp32",
                            {"ROWS": 4, "N": 64, "DESCENDING": True}, target=target)
    assert ".entry _sort_rows" in compiled.ptx


@pytest.mark.gpu
@pytest.mark.parametrize("descending", [False, True])
def test_sort_and_flip_on_the_gpu_match_torch(descending):
    torch = pytest.importorskip("torch")
    x = torch.randn(8, 256, device="cuda")
    got, flipped = torch.empty_like(x), torch.empty_like(x)
    _sort_rows[(1,)](x, got, flipped, ROWS=8, N=256, DESCENDING=descending)
    assert torch.equal(got, torch.sort(x, dim=1, descending=descending).values)
    assert torch.equal(flipped, x.flip(1))


@pytest.mark.gpu
@pytest.mark.parametrize("descending", [False, True])
def test_the_gpu_network_leaves_nans_and_signed_zeros_where_the_interpreter_does(descending):
    """Equal keys (0.0, -0.0) and NaNs have no one sorted place: both executors run the
    same network and comparator, so they agree bit for bit."""
    torch = pytest.importorskip("torch")
    rng = np.random.RandomState(3)
    x = rng.choice(np.array([0.0, -0.0, np.nan, 1.5, -2.0, np.inf], np.float32), (4, 64))
    on_cpu, flipped = np.zeros_like(x), np.zeros_like(x)
    _sort_rows[(1,)](x, on_cpu, flipped, ROWS=4, N=64, DESCENDING=descending)
    device = torch.from_numpy(x).cuda()
    got, flipped_device = torch.empty_like(device), torch.empty_like(device)
    _sort_rows[(1,)](device, got, flipped_device, ROWS=4, N=64, DESCENDING=descending)
    np.testing.assert_array_equal(got.cpu().numpy().view(np.uint32), on_cpu.view(np.uint32))


@pytest.mark.gpu
@pytest.mark.parametrize("num_warps", [1, 4, 8])
def test_a_large_sort_on_the_gpu_with_more_pairs_than_threads(num_warps):
    torch = pytest.importorskip("torch")
    keys = torch.randint(0, 2**31 - 1, (4096,), device="cuda", dtype=torch.int32)
    out = torch.empty_like(keys)
    _sort_1d[(1,)](keys, out, N=4096, num_warps=num_warps)
    assert torch.equal(out, torch.sort(keys).values)


@aotk.jit
def _merge_rows(x_ptr, out_ptr, N: tl.constexpr, DESCENDING: tl.constexpr):
    offsets = tl.arange(0, 4)[:, None] * N + tl.arange(0, N)[None, :]
    tl.store(out_ptr + offsets, tl.bitonic_merge(tl.load(x_ptr + offsets),
                                                 descending=DESCENDING))


def _merge_reference(x, descending):
    """Triton's network in numpy: at distance n/2 .. 1 the pair's first element keeps the
    smaller value (the larger when descending) where first > second says so."""
    x = x.copy()
    n = x.shape[-1]
    distance = n // 2
    while distance >= 1:
        grouped = x.reshape(x.shape[0], n // (2 * distance), 2, distance)
        first, second = grouped[:, :, 0, :].copy(), grouped[:, :, 1, :].copy()
        take_second = ~(first > second) if descending else (first > second)
        take_first = (second > first) if descending else ~(second > first)
        grouped[:, :, 0, :] = np.where(take_second, second, first)
        grouped[:, :, 1, :] = np.where(take_first, first, second)
        x = grouped.reshape(x.shape)
        distance //= 2
    return x


@pytest.mark.parametrize("n", [2, 16, 64])
@pytest.mark.parametrize("descending", [False, True])
def test_bitonic_merge_sorts_a_bitonic_row_and_follows_tritons_network(n, descending):
    rng = np.random.RandomState(n)
    rising = np.sort(rng.randn(4, n // 2).astype(np.float32), axis=1)
    falling = np.sort(rng.randn(4, n // 2).astype(np.float32), axis=1)[:, ::-1]
    bitonic = np.concatenate([rising, falling], axis=1)
    out = np.zeros_like(bitonic)
    _merge_rows[(1,)](bitonic, out, N=n, DESCENDING=descending)
    expected = np.sort(bitonic, axis=1)
    np.testing.assert_array_equal(out, expected[:, ::-1] if descending else expected)
    arbitrary = rng.randn(4, n).astype(np.float32)
    _merge_rows[(1,)](arbitrary, out, N=n, DESCENDING=descending)
    np.testing.assert_array_equal(out, _merge_reference(arbitrary, descending))
    assert ".entry _merge_rows" in aotk.compile(
        _merge_rows, "*fp32, *fp32", {"N": n, "DESCENDING": descending}, target="sm_90").ptx
