"""examples/kernels/matmul_descriptor_tail.py: whole tiles one program each, the last partial
wave's tiles split along K. Results on the CPU interpreter against numpy (odd tails, odd and
even splits, more splits than K steps, programs arriving in any order, buffers reused), its
sm_90 builds (plain, producer warp, pairs), its planner, and on a GPU against torch."""
import re
from types import SimpleNamespace

import numpy as np
import pytest

import aotk
from aotk.interpreter import executor
from tests.examples import example_module

SIGNATURE = ("*fp16:16, *fp16:16, *fp16:16, *fp32:16, *i32:16, i32, i32:8, i32:8, i32:8, "
             "i32:8, i32:8, i32, i32")
TILE = dict(BLOCK_SIZE_M=128, BLOCK_SIZE_N=256, BLOCK_SIZE_K=64, GROUP_SIZE_M=8, FIXUP_ROWS=32)


def _module():
    return example_module("matmul_descriptor_tail")


def _buffers(m, n, wave, splits, block_m, block_n, fill):
    """(workspace, counters, grid) of a launch with ``splits`` (the workspace in ``fill``)."""
    plan = _module().tail_plan(m, n, 1, wave, block_m, block_n, splits=splits)
    return (np.full(plan["workspace"], fill, np.float32), np.zeros(plan["counters"], np.int32),
            plan["grid"])


def _run(m, n, k, wave, splits, seed=0, block=(32, 32, 16), fixup_rows=8):
    """(C, fp32 reference, counters after the launch); the workspace starts as NaN, so a
    slot summed before its program wrote it shows in C."""
    block_m, block_n, block_k = block
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    c = np.full((m, n), np.nan, np.float16)
    workspace, counters, grid = _buffers(m, n, wave, splits, block_m, block_n, np.nan)
    _module().matmul_descriptor_tail_kernel[(grid,)](
        a, b, c, workspace, counters, m, n, k, k, n, n, wave, splits, BLOCK_SIZE_M=block_m,
        BLOCK_SIZE_N=block_n, BLOCK_SIZE_K=block_k, GROUP_SIZE_M=2, FIXUP_ROWS=fixup_rows)
    return c, a.astype(np.float32) @ b.astype(np.float32), counters


def _check(c, reference):
    assert not np.isnan(c).any()
    np.testing.assert_allclose(c.astype(np.float32), reference, rtol=2e-3, atol=2e-2)


# With 32x32 tiles and BLOCK_K 16.
@pytest.mark.parametrize("m, n, k, wave, splits", [
    (70, 90, 100, 4, 2),     # 9 tiles: 2 waves + 1 tile (an odd tail: alone) in 2 shares
    (70, 90, 100, 5, 3),     # 1 wave + 4 tiles, odd splits: pairs of tiles, 3 shares each
    (64, 96, 200, 7, 2),     # 6 tiles < the wave: all of them split
    (96, 96, 48, 4, 4),      # 3 K steps in 4 shares: one share of each tile is empty
    (33, 65, 17, 4, 2),      # partial edges, K = one block + 1
    (128, 160, 300, 6, 1),   # splits = 1: every tile whole, no workspace
    (128, 160, 300, 6, 4),   # 20 tiles: 3 waves + 2 tiles of 19 K steps in 4 shares
])
def test_matches_numpy(m, n, k, wave, splits):
    c, reference, counters = _run(m, n, k, wave, splits)
    _check(c, reference)
    assert not counters.any()    # the last program of each tail tile resets its counter


def test_fixup_in_slices_of_other_tiles():
    """64x64 tiles, BLOCK_K 32, the fixup in 4 slices of 16 rows."""
    c, reference, _ = _run(300, 200, 150, 5, 2, block=(64, 64, 32), fixup_rows=16)
    _check(c, reference)


@pytest.mark.parametrize("shape", [(70, 90, 100, 5, 3), (64, 96, 200, 7, 2)])
def test_result_does_not_depend_on_which_program_arrives_last(monkeypatch, shape):
    """Programs in grid order and reversed: a different program finds each tail tile
    complete, yet the shares are summed in slot order, so C is bit for bit the same."""
    forward, reference, _ = _run(*shape)
    product = executor.itertools.product
    monkeypatch.setattr(executor, "itertools",
                        SimpleNamespace(product=lambda *r: list(product(*r))[::-1]))
    backward, _, _ = _run(*shape)
    _check(forward, reference)
    np.testing.assert_array_equal(backward.view(np.uint16), forward.view(np.uint16))


def test_buffers_are_reusable_across_launches():
    module = _module()
    rng = np.random.default_rng(2)
    m, n, k, wave, splits = 70, 90, 100, 5, 2
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    workspace, counters, grid = _buffers(m, n, wave, splits, 32, 32, 0.0)
    results = []
    for _ in range(2):
        c = np.zeros((m, n), np.float16)
        module.matmul_descriptor_tail_kernel[(grid,)](
            a, b, c, workspace, counters, m, n, k, k, n, n, wave, splits, BLOCK_SIZE_M=32,
            BLOCK_SIZE_N=32, BLOCK_SIZE_K=16, GROUP_SIZE_M=2, FIXUP_ROWS=8)
        results.append(c)
    np.testing.assert_array_equal(results[0], results[1])
    _check(results[0], a.astype(np.float32) @ b.astype(np.float32))


def test_the_plan_fills_the_idle_part_of_the_last_wave():
    plan = _module().tail_plan
    # 288 tiles on 132 SMs: 264 whole, 24 in 4 shares (even, so that tail programs pair).
    assert plan(3000, 3000, 3000, 132) == {"splits": 4, "grid": 264 + 96,
                                           "workspace": 96 * 128 * 256, "counters": 24}
    assert plan(4096, 4096, 4096, 132)["splits"] == 1    # 116 of 132: nothing to gain
    assert plan(512, 512, 512, 132)["splits"] == 2       # 8 K steps: shares of 4 at least
    assert plan(4096, 4096, 4096, 128) == {"splits": 1, "grid": 512, "workspace": 1,
                                           "counters": 1}


def test_sm_90_builds_take_the_descriptor_matmuls_registers():
    """Plain, producer warp, and pairs (multicast of B's tiles): TMA copies into wgmma, no
    spills, the registers matmul_descriptor.py's tile takes (154 when written); the
    partial stored from the fragments."""
    kernel = _module().matmul_descriptor_tail_kernel
    for options, threads, cluster in (({}, 256, 1), ({"WARP_SPECIALIZE": True}, 288, 1)):
        for num_ctas in (1, 2) if options else (1,):
            compiled = aotk.compile(kernel, SIGNATURE, {**TILE, **options}, num_warps=8,
                                    num_stages=3, target="sm_90", num_ctas=num_ctas)
            assert "wgmma.mma_async" in compiled.ptx and "cp.async.bulk.tensor" in compiled.ptx
            assert compiled.metadata["spills"] == 0 and compiled.metadata["registers"] <= 160
            assert compiled.metadata["threads"] == threads
            assert compiled.metadata["cluster"] == num_ctas
            assert ("multicast::cluster" in compiled.ptx) == (num_ctas == 2)
            assert "atom.global.acq_rel.gpu.add" in compiled.ptx
            # The partial goes from the accumulator's fragments, 8 bytes a thread: 128 x 256
            # fp32 over 256 compute threads (the fixup's C stores are predicated).
            assert len(re.findall(r"^\s*st\.global\.v2\.b32", compiled.ptx, re.M)) == 64


@pytest.mark.gpu
# The JIT proves 16-byte rows where sizes divide by 16 (TMA, tails of 24 and 28 tiles in 4
# shares, 48 tiles in 2); 3000 and 1000 take the build with masked loads.
@pytest.mark.parametrize("m, n, k", [(3008, 3008, 3008), (5120, 1024, 3008), (1024, 1536, 768),
                                     (4096, 4096, 4096), (3000, 3000, 3000), (1000, 1536, 776)])
@pytest.mark.parametrize("options, num_ctas", [({}, 1), ({"WARP_SPECIALIZE": True}, 2)])
def test_gpu_matches_torch(m, n, k, options, num_ctas):
    """wave = the SM count, splits from the plan; twice on the same buffers (the counters
    must come back zero)."""
    torch = pytest.importorskip("torch")
    module = _module()
    wave = torch.cuda.get_device_properties(0).multi_processor_count
    plan = module.tail_plan(m, n, k, wave)
    a = torch.randn((m, k), device="cuda", dtype=torch.float16)
    b = torch.randn((k, n), device="cuda", dtype=torch.float16)
    workspace = torch.full((plan["workspace"],), float("nan"), device="cuda")
    counters = torch.zeros(plan["counters"], device="cuda", dtype=torch.int32)
    expected = a.float() @ b.float()
    for _ in range(2):
        c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float16)
        module.matmul_descriptor_tail_kernel[(plan["grid"],)](
            a, b, c, workspace, counters, m, n, k, k, n, n, wave, plan["splits"], **TILE,
            **options, num_warps=8, num_stages=3, num_ctas=num_ctas)
        torch.cuda.synchronize()
        torch.testing.assert_close(c.float(), expected, atol=0.5, rtol=1e-2)
        assert not counters.any()
