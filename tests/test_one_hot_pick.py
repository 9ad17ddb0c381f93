"""A sum that picks one element along an axis, ``tl.sum(tl.where(tl.arange(0, n) == i, x,
0), axis)`` (how Triton code reads row i of a tile: fla's triangular solves), is lowered as
that pick (``backend.reduce``): the lane that holds row i sends it with one shfl.sync.idx,
instead of a butterfly of log2(lanes) dependent shuffles and adds per register; where
warps split the axis, the owner warp's element then comes through shared memory. Checked:
which reductions are picks, the PTX, and on the GPU that the pick equals the sum bit for
bit (a picked -0.0 comes out +0.0 as the sum's does, an index outside the block gives 0)
on blocked and accumulator layouts, floats and integers, both axes."""
import numpy as np
import pytest

import aotk
import aotk.language as tl
from aotk.backend.reduce import one_hot_pick
from aotk.ir.kir import walk
from aotk.ir.signature import Signature, runtime_parameter_names


@aotk.jit
def pick(x_ptr, index_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr, AXIS: tl.constexpr,
         START: tl.constexpr, FORM: tl.constexpr, ZERO: tl.constexpr = 0.0):
    """out[p] = the sum over AXIS of x where the arange along it (from START) equals
    index[p] (ZERO elsewhere: 0.0, or 0 for integers). FORM 0: the mask built as Triton
    code writes it; 1: the comparison the other way round, the index an int64; 2: the mask
    on the other axis of a 1-row tile (a 1-d pick); 3: the arange made a column before the
    comparison."""
    p = tl.program_id(0)
    index = tl.load(index_ptr + p)
    m, n = tl.arange(0, M), tl.arange(0, N)
    x = tl.load(x_ptr + m[:, None] * N + n[None, :])
    zero = ZERO
    if AXIS == 0:
        ramp = tl.arange(START, START + M)
        if FORM == 1:
            mask = (index.to(tl.int64) == ramp)[:, None]
        elif FORM == 3:
            mask = ramp[:, None] == index
        else:
            mask = (ramp == index)[:, None]
        tl.store(out_ptr + p * N + n, tl.sum(tl.where(mask, x, zero), 0))
    elif FORM == 2:
        row = tl.load(x_ptr + n)
        picked = tl.sum(tl.where(tl.arange(START, START + N) == index, row, zero))
        tl.store(out_ptr + p, picked)
    else:
        ramp = tl.arange(START, START + N)
        tl.store(out_ptr + p * M + m, tl.sum(tl.where((ramp == index)[None, :], x, zero), 1))


@aotk.jit
def not_picks(x_ptr, index_ptr, out_ptr, N: tl.constexpr, WHICH: tl.constexpr):
    """Sums that look like picks and are not: another fill value, -0.0 (the sum would keep
    a picked -0.0), ``<=``, a maximum, the mask along the other axis."""
    index = tl.load(index_ptr)
    n = tl.arange(0, N)
    x = tl.load(x_ptr + n[:, None] * N + n[None, :])
    if WHICH == 0:
        result = tl.sum(tl.where((n == index)[:, None], x, 1.0), 0)
    elif WHICH == 1:
        result = tl.sum(tl.where((n == index)[:, None], x, -0.0), 0)
    elif WHICH == 2:
        result = tl.sum(tl.where((n <= index)[:, None], x, 0.0), 0)
    elif WHICH == 3:
        result = tl.max(tl.where((n == index)[:, None], x, 0.0), 0)
    else:
        result = tl.sum(tl.where((n == index)[None, :], x, 0.0), 0)
    tl.store(out_ptr + n, result)


def _reductions(kernel, signature, constants):
    parsed = Signature.parse(signature, runtime_parameter_names(kernel.runtime_names,
                                                                constants), kernel.name)
    function = kernel.kir(parsed, constants=constants, num_warps=1, target="sm_90")
    return [op for op in walk(function.body) if op.opcode == "reduce"]


SIGNATURE = "*fp32:16, *i32:16, *fp32:16"


@pytest.mark.parametrize("axis, form", [(0, 0), (0, 1), (0, 3), (1, 0), (1, 2)])
def test_the_pick_forms_are_recognized(axis, form):
    (reduction,) = _reductions(pick, SIGNATURE, dict(M=16, N=16, AXIS=axis, START=3,
                                                     FORM=form))
    found = one_hot_pick(reduction)
    assert found is not None and found.start == 3
    assert found.x.owner.opcode == "load" and found.index.type.shape == ()


@pytest.mark.parametrize("which", range(5))
def test_sums_that_are_not_picks_stay_sums(which):
    (reduction,) = _reductions(not_picks, SIGNATURE, dict(N=16, WHICH=which))
    assert one_hot_pick(reduction) is None


@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
def test_a_pick_is_one_shuffle_from_the_owner_not_a_butterfly(target):
    compiled = aotk.compile(pick, SIGNATURE, dict(M=16, N=16, AXIS=0, START=0, FORM=0),
                            num_warps=1, target=target)
    assert "shfl.sync.idx" in compiled.ptx and "shfl.sync.bfly" not in compiled.ptx
    butterfly = aotk.compile(not_picks, SIGNATURE, dict(N=16, WHICH=2), num_warps=1,
                             target=target)
    assert "shfl.sync.bfly" in butterfly.ptx


@pytest.mark.parametrize("m, n, axis, form, warps", [(64, 32, 0, 0, 4), (128, 16, 0, 0, 8),
                                                     (8, 128, 1, 2, 4)])
def test_a_pick_across_warps_goes_through_shared_memory_once(m, n, axis, form, warps):
    """Warps split the axis: each warp's lanes shuffle their own warp's element, write it,
    and after one barrier every thread reads the owner warp's (no butterfly in the warps,
    no combining across them)."""
    compiled = aotk.compile(pick, SIGNATURE, dict(M=m, N=n, AXIS=axis, START=0, FORM=form),
                            num_warps=warps, target="sm_90")
    assert "shfl.sync.bfly" not in compiled.ptx and "shfl.sync.idx" in compiled.ptx


@aotk.jit
def pick_from_dot(a_ptr, b_ptr, index_ptr, c_ptr, out_ptr, N: tl.constexpr, AXIS: tl.constexpr):
    """Row (AXIS 0) or column (AXIS 1) index[p] of a dot's result, beside the result."""
    p = tl.program_id(0)
    n = tl.arange(0, N)
    tile = n[:, None] * N + n[None, :]
    c = tl.dot(tl.load(a_ptr + tile), tl.load(b_ptr + tile))
    tl.store(c_ptr + tile, c)
    index = tl.load(index_ptr + p)
    if AXIS == 0:
        tl.store(out_ptr + p * N + n, tl.sum(tl.where((n == index)[:, None], c, 0.0), 0))
    else:
        tl.store(out_ptr + p * N + n, tl.sum(tl.where((n == index)[None, :], c, 0.0), 1))


def _expected(x, indices, axis, start):
    """The sum's result: the element + 0 (so -0.0 becomes +0.0), 0 outside the block."""
    rows = []
    for i in indices:
        k = int(i) - start
        inside = 0 <= k < x.shape[axis]
        picked = np.take(x, k if inside else 0, axis=axis)
        rows.append(picked + x.dtype.type(0) if inside else np.zeros_like(picked))
    return np.stack(rows)


def _bits(a):
    return a.view({2: np.uint16, 4: np.uint32}[a.dtype.itemsize])


def _inputs(shape, dtype, rng):
    if np.issubdtype(dtype, np.integer):
        x = rng.integers(-1000, 1000, shape).astype(dtype)
    else:
        x = rng.standard_normal(shape).astype(dtype)
        x.flat[::7] = -0.0
        x.flat[3] = np.inf
    return x


CASES = [  # (M, N, axis, start, form, warps, dtype)
    (16, 16, 0, 0, 0, 1, np.float32), (16, 16, 0, 5, 1, 1, np.float32),
    (16, 16, 0, 0, 3, 1, np.float32), (32, 64, 0, 0, 0, 1, np.float16),
    (64, 32, 0, 2, 0, 4, np.float32), (16, 16, 1, 0, 0, 1, np.float32),
    (32, 64, 1, 7, 0, 2, np.int32), (8, 128, 1, 0, 2, 4, np.float32),
    (128, 16, 0, 0, 0, 8, np.int32), (8, 16, 1, 0, 2, 4, np.float32),
    (16, 8, 0, 1, 0, 4, np.float32),
]


@pytest.mark.gpu
@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(
    str(v.__name__ if isinstance(v, type) else v) for v in c))
def test_the_pick_on_the_gpu_is_the_sum_bit_for_bit(case):
    torch = pytest.importorskip("torch")
    m, n, axis, start, form, warps, dtype = case
    rng = np.random.default_rng(0)
    x = _inputs((m, n), dtype, rng)
    size = n if form == 2 else (m, n)[axis]   # elements along the summed axis
    indices = np.array([start, start + 1, start + size // 2, start + size - 1, start - 1,
                        start + size, -7, 1 << 30], np.int32)
    if form == 2:
        out, source = np.zeros(len(indices), dtype), x[:1]
    else:
        out, source = np.zeros((len(indices), (m, n)[1 - axis]), dtype), x
    x_gpu, indices_gpu = torch.from_numpy(x).cuda(), torch.from_numpy(indices).cuda()
    out_gpu = torch.from_numpy(out).cuda()
    zero = 0 if np.issubdtype(dtype, np.integer) else 0.0
    pick[(len(indices),)](x_gpu, indices_gpu, out_gpu, M=m, N=n, AXIS=axis, START=start,
                          FORM=form, ZERO=zero, num_warps=warps)
    expected = _expected(source, indices, 1 if form == 2 else axis, start)
    if form == 2:
        expected = expected[:, 0]
    assert (_bits(out_gpu.cpu().numpy()) == _bits(expected)).all()


@pytest.mark.gpu
@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("n, warps", [(16, 1), (32, 1), (32, 4)])
def test_a_pick_from_a_dot_result_is_its_row_or_column(axis, n, warps):
    torch = pytest.importorskip("torch")
    a = torch.randn((n, n), device="cuda", dtype=torch.float16)
    b = torch.randn((n, n), device="cuda", dtype=torch.float16)
    indices = torch.tensor([0, 3, n - 1, n, -1], device="cuda", dtype=torch.int32)
    c = torch.zeros((n, n), device="cuda")
    out = torch.full((len(indices), n), float("nan"), device="cuda")
    pick_from_dot[(len(indices),)](a, b, indices, c, out, N=n, AXIS=axis, num_warps=warps)
    expected = _expected(c.cpu().numpy(), indices.cpu().numpy(), axis, 0)
    assert (_bits(out.cpu().numpy()) == _bits(expected)).all()


@pytest.mark.parametrize("case", CASES[:3] + CASES[6:8], ids=lambda c: "-".join(
    str(v.__name__ if isinstance(v, type) else v) for v in c))
def test_the_interpreter_gives_the_expected_sums(case, monkeypatch):
    """The kernels and ``_expected`` the GPU tests compare, on the interpreter (the sum
    itself, numpy's): a GPU failure is then the lowering's."""
    monkeypatch.setenv("AOTK_INTERPRET", "1")
    m, n, axis, start, form, warps, dtype = case
    x = _inputs((m, n), dtype, np.random.default_rng(0))
    size = n if form == 2 else (m, n)[axis]
    indices = np.array([start, start + size - 1, start - 1, start + size], np.int32)
    if form == 2:
        out, source = np.zeros(len(indices), dtype), x[:1]
    else:
        out, source = np.zeros((len(indices), (m, n)[1 - axis]), dtype), x
    zero = 0 if np.issubdtype(dtype, np.integer) else 0.0
    pick[(len(indices),)](x, indices, out, M=m, N=n, AXIS=axis, START=start, FORM=form,
                          ZERO=zero, num_warps=warps)
    expected = _expected(source, indices, 1 if form == 2 else axis, start)
    if form == 2:
        expected = expected[:, 0]
    assert (_bits(out) == _bits(expected)).all()
