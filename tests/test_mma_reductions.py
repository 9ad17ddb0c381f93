"""Reductions of a dot's result in the dot's accumulator layout
(``passes.mma_residency``, ``backend.reduce`` over ``Mma`` fragments): along rows
the four lanes of a quad and the warps along N combine, along columns the eight lane
groups and the warps along M. Checked on the layouts the compiler picks (no CPU can run
the code), on the interpreter against numpy, and (marked gpu) against torch for both axes,
on mma.sync and wgmma warp arrangements. A loop that updates a block of dot results row by
row (fla's triangular solves) carries it in the accumulator layout too."""
import numpy as np
import pytest

import aotk
import aotk.language as tl


@aotk.jit
def dot_then_reduce(a_ptr, b_ptr, rows_ptr, columns_ptr, M: tl.constexpr, N: tl.constexpr,
                    K: tl.constexpr):
    m, n, k = tl.arange(0, M), tl.arange(0, N), tl.arange(0, K)
    a = tl.load(a_ptr + m[:, None] * K + k[None, :])
    b = tl.load(b_ptr + k[:, None] * N + n[None, :])
    c = tl.dot(a, b)
    tl.store(rows_ptr + m, tl.max(c, 1))
    tl.store(columns_ptr + n, tl.sum(c * 0.5, 0))


SIGNATURE = "*fp16:16, *fp16:16, *fp32:16, *fp32:16"
SHAPES = [(64, 64, 32, 4), (128, 64, 32, 8), (64, 128, 32, 4)]


@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_the_reductions_stay_in_the_accumulator_layout(target, shape):
    m, n, k, warps = shape
    compiled = aotk.compile(dot_then_reduce, SIGNATURE, dict(M=m, N=n, K=k), num_warps=warps,
                            num_stages=1, target=target)
    reductions = [line for line in compiled.gir.splitlines() if " = reduce [" in line]
    assert len(reductions) == 2
    assert all("#mma0.slice" in line and "(home)" in line for line in reductions)
    assert compiled.metadata["spills"] == 0


def test_the_interpreter_matches_numpy(monkeypatch):
    monkeypatch.setenv("AOTK_INTERPRET", "1")
    rng = np.random.default_rng(0)
    a = rng.standard_normal((64, 32)).astype(np.float16)
    b = rng.standard_normal((32, 64)).astype(np.float16)
    rows, columns = np.zeros(64, np.float32), np.zeros(64, np.float32)
    dot_then_reduce[(1,)](a, b, rows, columns, M=64, N=64, K=32)
    c = a.astype(np.float32) @ b.astype(np.float32)
    np.testing.assert_allclose(rows, c.max(1), rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(columns, (c * 0.5).sum(0), rtol=1e-3, atol=1e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_the_gpu_matches_torch(shape):
    torch = pytest.importorskip("torch")
    m, n, k, warps = shape
    generator = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn((m, k), generator=generator, device="cuda", dtype=torch.float16)
    b = torch.randn((k, n), generator=generator, device="cuda", dtype=torch.float16)
    rows = torch.full((m,), float("nan"), device="cuda")
    columns = torch.full((n,), float("nan"), device="cuda")
    dot_then_reduce[(1,)](a, b, rows, columns, M=m, N=n, K=k, num_warps=warps, num_stages=1)
    c = a.float() @ b.float()
    torch.testing.assert_close(rows, c.max(1).values, rtol=1e-3, atol=1e-3)
    torch.testing.assert_close(columns, (c * 0.5).sum(0), rtol=1e-3, atol=1e-2)


@aotk.jit
def solve_lower(a_ptr, out_ptr, N: tl.constexpr, K: tl.constexpr):
    """(I + L)^-1 - I by forward substitution, L the strictly lower part of a @ a.T / K,
    one row a trip (fla's chunk_gated_delta_rule kkt solve, one diagonal block)."""
    o, k = tl.arange(0, N), tl.arange(0, K)
    a = tl.load(a_ptr + o[:, None] * K + k[None, :])
    lower = tl.where(o[:, None] > o[None, :], tl.dot(a, tl.trans(a)) / K, 0.0)
    inverse = -lower
    for i in range(2, N):
        row = tl.sum(tl.where((o == i)[:, None], -lower, 0.0), 0)
        row = tl.where(o < i, row, 0.0)
        row = row + tl.sum(row[:, None] * inverse, 0)
        inverse = tl.where((o == i)[:, None], row, inverse)
    tl.store(out_ptr + o[:, None] * N + o[None, :], inverse)


def _solve_lower_reference(a):
    n, k = a.shape
    a = a.astype(np.float64)
    lower = np.tril(a @ a.T / k, -1)
    return np.linalg.inv(np.eye(n) + lower) - np.eye(n)


SOLVES = [(16, 1), (16, 2), (32, 4)]   # (N, warps): each dot on tensor cores


@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
@pytest.mark.parametrize("n, warps", SOLVES)
def test_a_loop_updating_dot_results_carries_them_in_the_accumulator_layout(target, n, warps):
    """The loop's block argument starts as a dot's result and only blends in rows: carried
    in the dot's layout, both reductions a trip stay in its fragments (before, carried in
    the natural layout, the block was converted on entry, and each trip converted the row
    twice through shared memory)."""
    compiled = aotk.compile(solve_lower, "*fp16:16, *fp32:16", dict(N=n, K=32),
                            num_warps=warps, target=target)
    reductions = [line for line in compiled.gir.splitlines() if " = reduce [" in line]
    assert len(reductions) == 2
    assert all("#mma0.slice" in line and "(home)" in line for line in reductions), reductions
    assert compiled.metadata["spills"] == 0


def test_the_solve_on_the_interpreter_matches_numpy(monkeypatch):
    monkeypatch.setenv("AOTK_INTERPRET", "1")
    a = np.random.default_rng(1).standard_normal((16, 32)).astype(np.float16)
    out = np.zeros((16, 16), np.float32)
    solve_lower[(1,)](a, out, N=16, K=32)
    np.testing.assert_allclose(out, _solve_lower_reference(a), rtol=1e-3, atol=1e-3)


@pytest.mark.gpu
@pytest.mark.parametrize("n, warps", SOLVES + [(16, 4)])
def test_the_solve_on_the_gpu_matches_numpy(n, warps):
    torch = pytest.importorskip("torch")
    a = np.random.default_rng(1).standard_normal((n, 32)).astype(np.float16)
    out = torch.full((n, n), float("nan"), device="cuda")
    solve_lower[(1,)](torch.from_numpy(a).cuda(), out, N=n, K=32, num_warps=warps)
    np.testing.assert_allclose(out.cpu().numpy(), _solve_lower_reference(a), rtol=1e-2,
                               atol=1e-2)


@aotk.jit
def column_sums_used_twice(a_ptr, b_ptr, t_ptr, rows_ptr, columns_ptr, N: tl.constexpr,
                           BOTH: tl.constexpr):
    n = tl.arange(0, N)
    tile = n[:, None] * N + n[None, :]
    sums = tl.sum(tl.dot(tl.load(a_ptr + tile), tl.load(b_ptr + tile)), 0)
    t = tl.load(t_ptr + tile)
    tl.store(rows_ptr + tile, sums[:, None] * t)
    if BOTH:
        tl.store(columns_ptr + tile, sums[None, :] + t)


@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
def test_a_value_wanted_in_two_more_layouts_is_stored_once(target):
    """The dot's column sums, wanted as a column and as a row of a tile in the natural
    layout: one store and one barrier pair serve both conversions (the store in the
    narrower vectors of the two, where they differ)."""
    barriers = []
    for both in (False, True):
        compiled = aotk.compile(column_sums_used_twice, "*fp16:16, *fp16:16, *fp32:16, "
                                "*fp32:16, *fp32:16", dict(N=32, BOTH=both), num_warps=4,
                                target=target)
        assert compiled.gir.count("#mma0.slice[0] (home), ") == 1
        barriers.append(compiled.ptx.count("bar.sync"))
    assert barriers[1] == barriers[0], barriers


@aotk.jit
def sums_across(a_ptr, b_ptr, out_ptr, N: tl.constexpr, MODE: tl.constexpr):
    """c scaled by its column sums (MODE 0: by column, where the sum left them; 1: by row,
    a conversion) or by its row sums (2: by column, the other conversion)."""
    n = tl.arange(0, N)
    tile = n[:, None] * N + n[None, :]
    c = tl.dot(tl.load(a_ptr + tile), tl.load(b_ptr + tile))
    if MODE == 0:
        c = c * tl.sum(c, 0)[None, :]
    elif MODE == 1:
        c = c * tl.sum(c, 0)[:, None]
    else:
        c = c * tl.sum(c, 1)[None, :]
    tl.store(out_ptr + tile, c)


def _sums_across_reference(c, mode):
    return c * (c.sum(0)[None, :] if mode == 0 else c.sum(0)[:, None] if mode == 1
                else c.sum(1)[None, :])


@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
@pytest.mark.parametrize("n", [16, 32])
def test_one_warp_turns_sums_between_rows_and_columns_by_shuffles(target, n):
    """At one warp every lane's rows and columns are in its own warp: column sums go to
    the row slice, and row sums to the column slice, with one shfl.idx per register and
    no barrier (through shared memory: a store, a load and two barriers)."""
    found = {}
    for mode in (0, 1, 2):
        compiled = aotk.compile(sums_across, "*fp16:16, *fp16:16, *fp32:16",
                                dict(N=n, MODE=mode), num_warps=1, target=target)
        found[mode] = (compiled.ptx.count("bar.sync"), compiled.ptx.count("shfl.sync.idx"))
    assert found[1][0] == found[2][0] == found[0][0], found
    # registers of the target slice: n / 8 rows or n / 4 columns per lane
    assert (found[0][1], found[1][1], found[2][1]) == (0, n // 8, n // 4), found


def test_sums_across_on_the_interpreter(monkeypatch):
    monkeypatch.setenv("AOTK_INTERPRET", "1")
    rng = np.random.default_rng(2)
    a, b = (rng.standard_normal((16, 16)).astype(np.float16) for _ in range(2))
    c = a.astype(np.float32) @ b.astype(np.float32)
    for mode in (0, 1, 2):
        out = np.zeros((16, 16), np.float32)
        sums_across[(1,)](a, b, out, N=16, MODE=mode)
        np.testing.assert_allclose(out, _sums_across_reference(c, mode), rtol=1e-2, atol=1e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("n, warps", [(16, 1), (32, 1), (32, 4)])
@pytest.mark.parametrize("mode", [0, 1, 2])
def test_sums_across_on_the_gpu(n, warps, mode):
    torch = pytest.importorskip("torch")
    generator = torch.Generator(device="cuda").manual_seed(2)
    a, b = (torch.randn((n, n), generator=generator, device="cuda", dtype=torch.float16)
            for _ in range(2))
    out = torch.full((n, n), float("nan"), device="cuda")
    sums_across[(1,)](a, b, out, N=n, MODE=mode, num_warps=warps)
    want = _sums_across_reference(a.float() @ b.float(), mode)
    torch.testing.assert_close(out, want, rtol=1e-2, atol=1e-2 * float(want.abs().max()))
