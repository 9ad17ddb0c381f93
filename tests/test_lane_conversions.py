"""A layout conversion that keeps every element in its warp is a few shuffles, not a round
trip through shared memory (``backend.lane_plan``, ``backend.warp_conversions``): a row
sum stored as a 1-d block (fla's KDA intra-token kernel, once a trip), a column used as a
row. Checked: every plan against where the layouts put the elements (simulated, over many
layout pairs), the PTX (shuffles and no barrier where the warps keep their elements; shared
memory where they do not), and on the GPU against numpy."""
import itertools

import numpy as np
import pytest

import aotk
import aotk.language as tl
from aotk.backend import lane_plan
from aotk.passes.layouts import Layout, blocked_for


def _simulated(plan, shape, source, target, warps):
    """Every target register of every thread gets the element the target layout puts there."""
    for warp, lane in itertools.product(range(warps), range(32)):
        wanted = lane_plan.placement(target, shape, lane, warp)
        for k, found in enumerate(plan.sources):
            sender = found.lane.at(lane, warp)
            picker = (sender, warp) if found.picked_by == "sender" else (lane, warp)
            register = found.register.at(*picker)
            sent = lane_plan.placement(source, shape, sender, warp)[register]
            assert sent == wanted[k], (shape, source, target, warp, lane, k)
            if found.local:
                assert sender == lane


def _same_warps(shape, source, target, warps) -> bool:
    """Whether each thread's target elements are all held somewhere in its own warp."""
    for warp in range(warps):
        held = {e for lane in range(32) for e in lane_plan.placement(source, shape, lane, warp)}
        for lane in range(32):
            if not set(lane_plan.placement(target, shape, lane, warp)) <= held:
                return False
    return True


LAYOUT_CASES = [(m, n, vector, warps, fastest)
                for m, n in [(2, 128), (8, 128), (16, 16), (64, 32), (128, 8), (1, 64), (32, 1)]
                for vector in (1, 4, 8) for warps in (1, 2, 4, 8) for fastest in (0, 1)]


def _unbounded(shape, source, target, monkeypatch):
    with monkeypatch.context() as patch:
        patch.setattr(lane_plan, "MAX_SHUFFLES", 1 << 20)
        patch.setattr(lane_plan, "MAX_TARGET_REGISTERS", 1 << 20)
        found = lane_plan.plan.__wrapped__(shape, source, target, 32)
    assert found is not None
    return found


@pytest.mark.parametrize("m, n, vector, warps, fastest", LAYOUT_CASES)
def test_plans_put_every_element_where_the_target_layout_wants_it(m, n, vector, warps,
                                                                  fastest, monkeypatch):
    """A reduction's slice converted to the 1-d layout of its length (and back), and a 2-d
    tile between two vector widths: where a plan exists, the simulated shuffles deliver
    every element; where the warps keep their elements (always with one warp), there is
    one unless it takes too many shuffles."""
    parent = Layout(blocked_for((m, n), vector, warps, fastest))
    found_any = False
    for axis, length in ((1, m), (0, n)):
        sliced = Layout(parent.blocked, (axis,))
        for one_d_vector in (1, 2, 4):
            flat = Layout(blocked_for((length,), one_d_vector, warps))
            for source, target in ((sliced, flat), (flat, sliced)):
                plan = lane_plan.plan((length,), source, target, 32)
                if plan is not None:
                    found_any = True
                    _simulated(plan, (length,), source, target, warps)
                elif warps == 1 or _same_warps((length,), source, target, warps):
                    # Only the limit on shuffles keeps it in shared memory.
                    unbounded = _unbounded((length,), source, target, monkeypatch)
                    assert unbounded.shuffles() > lane_plan.MAX_SHUFFLES
                    _simulated(unbounded, (length,), source, target, warps)
    other = Layout(blocked_for((m, n), max(1, vector // 2), warps, 1 - fastest))
    plan = lane_plan.plan((m, n), parent, other, 16)
    if plan is not None:
        _simulated(plan, (m, n), parent, other, warps)
    assert found_any or warps > 1


def test_64_bit_values_take_two_shuffles_a_register():
    """A 1-d block (one element a lane) wanted whole by every lane: 32 broadcasts, within
    the limit for 32-bit elements, over it for 64-bit ones (then shared memory)."""
    flat = Layout(blocked_for((32,), 1, 1))
    whole = Layout(blocked_for((32, 32), 1, 1, 1), (1,))   # each lane holds all 32 rows
    assert len(lane_plan.placement(whole, (32,), 0, 0)) == 32
    plan = lane_plan.plan((32,), flat, whole, 32)
    assert plan is not None and plan.shuffles() == 32
    _simulated(plan, (32,), flat, whole, 1)
    assert lane_plan.plan((32,), flat, whole, 64) is None
    row_sum = Layout(blocked_for((8, 128), 8, 1), (1,))
    assert lane_plan.plan((8,), row_sum, Layout(blocked_for((8,), 1, 1)), 64).shuffles() == 1


@aotk.jit
def reduce_store(x_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr, AXIS: tl.constexpr,
                 OP: tl.constexpr):
    """out = the sum (OP 0) or maximum (OP 1) of the M x N block x over AXIS, stored as a
    1-d block of its length."""
    m, n = tl.arange(0, M), tl.arange(0, N)
    x = tl.load(x_ptr + m[:, None] * N + n[None, :])
    if OP == 0:
        result = tl.sum(x, AXIS)
    else:
        result = tl.max(x, AXIS)
    if AXIS == 1:
        tl.store(out_ptr + tl.arange(0, M), result)
    else:
        tl.store(out_ptr + tl.arange(0, N), result)


@aotk.jit
def dots_by_row(x_ptr, out_ptr, ROWS: tl.constexpr, N: tl.constexpr, TRIPS: tl.constexpr):
    """out[j, r] = x[r] . x[j % ROWS] for j < TRIPS (x 16-bit, the sums in fp32): a row
    sum stored every trip, as fla's KDA intra-token kernel does."""
    r, n = tl.arange(0, ROWS), tl.arange(0, N)
    x = tl.load(x_ptr + r[:, None] * N + n[None, :]).to(tl.float32)
    for j in range(TRIPS):
        row = tl.load(x_ptr + (j % ROWS) * N + n).to(tl.float32)
        tl.store(out_ptr + j * ROWS + tl.arange(0, ROWS), tl.sum(x * row[None, :], 1))


@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
def test_a_row_sum_stored_as_a_block_is_shuffled_within_the_warp(target):
    compiled = aotk.compile(dots_by_row, "*fp16:16, *fp32:16", dict(ROWS=2, N=128, TRIPS=16),
                            num_warps=1, target=target)
    assert "shfl.sync.idx" in compiled.ptx
    assert "bar.sync" not in compiled.ptx and "st.shared" not in compiled.ptx


def test_a_conversion_across_warps_still_goes_through_shared_memory():
    """Rows split over two warps, the 1-d block over 64 threads: warp 0's lanes want rows
    warp 1 holds."""
    compiled = aotk.compile(dots_by_row, "*fp16:16, *fp32:16", dict(ROWS=8, N=128, TRIPS=16),
                            num_warps=2, target="sm_90")
    assert "bar.sync" in compiled.ptx and "st.shared" in compiled.ptx


# fp16 cases take the maximum: exact, where a sum accumulates in fp16 (as Triton's does) and
# differs from numpy's by several units in the last place.
REDUCE_CASES = [  # (M, N, axis, op, warps, dtype)
    (2, 128, 1, 0, 1, np.float32), (8, 128, 1, 0, 1, np.float32), (16, 16, 0, 0, 1, np.float32),
    (64, 32, 0, 1, 1, np.float16), (32, 64, 1, 0, 2, np.int32), (128, 8, 0, 1, 4, np.float32),
    (8, 128, 1, 1, 4, np.int64), (64, 64, 1, 0, 8, np.float32), (1, 64, 0, 0, 2, np.float32),
    (32, 32, 0, 1, 1, np.int64), (16, 256, 1, 1, 2, np.float16),
]


@pytest.mark.gpu
@pytest.mark.parametrize("case", REDUCE_CASES, ids=lambda c: "-".join(
    str(v.__name__ if isinstance(v, type) else v) for v in c))
def test_reductions_stored_as_blocks_match_numpy(case):
    torch = pytest.importorskip("torch")
    m, n, axis, op, warps, dtype = case
    rng = np.random.default_rng(1)
    if np.issubdtype(dtype, np.integer):
        x = rng.integers(-(1 << 40) if dtype == np.int64 else -1000, 1000, (m, n)).astype(dtype)
    else:
        x = rng.standard_normal((m, n)).astype(dtype)
    out = torch.zeros((m, n)[1 - axis], dtype=torch.from_numpy(x).dtype, device="cuda")
    reduce_store[(1,)](torch.from_numpy(x).cuda(), out, M=m, N=n, AXIS=axis, OP=op,
                       num_warps=warps)
    expected = x.sum(axis) if op == 0 else x.max(axis)
    got = out.cpu().numpy()
    if np.issubdtype(dtype, np.integer) or op == 1:
        assert (got == expected).all()
    else:
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-4)


@pytest.mark.gpu
@pytest.mark.parametrize("rows, n, warps", [(2, 128, 1), (8, 128, 2), (4, 64, 1), (16, 32, 4)])
def test_row_sums_stored_every_trip_match_numpy(rows, n, warps):
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(2).standard_normal((rows, n)).astype(np.float16)
    trips = 16
    out = torch.zeros((trips, rows), device="cuda")
    dots_by_row[(1,)](torch.from_numpy(x).cuda(), out, ROWS=rows, N=n, TRIPS=trips,
                      num_warps=warps)
    wide = x.astype(np.float32)
    expected = np.stack([wide @ wide[j % rows] for j in range(trips)])
    np.testing.assert_allclose(out.cpu().numpy(), expected, rtol=1e-5, atol=1e-4)
