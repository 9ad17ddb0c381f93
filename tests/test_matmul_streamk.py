"""examples/kernels/matmul_streamk.py: results on the CPU interpreter against numpy (partial
edge tiles, grids that do and do not divide the tile count, K ending mid-block, programs
arriving in any order), its sm_90 code (the K loop pipelined on wgmma, the fixup's
ordering), and, on a GPU, against torch.matmul."""
import re
from types import SimpleNamespace

import numpy as np
import pytest

import aotk
from aotk.interpreter import executor
from tests.examples import example_module

SIGNATURE = ("*fp16:16, *fp16:16, *fp16:16, *fp32:16, *i32:16, i32:16, i32:16, i32:16, "
             "i32:16, i32:1, i32:16, i32:1, i32:16, i32:1")


def _streamk():
    return example_module("matmul_streamk")


def _launch(module, a, b, c, workspace, counters, programs, block_m, block_n, block_k,
            fixup_rows):
    m, k = a.shape
    n = b.shape[1]
    module.matmul_streamk_kernel[(programs,)](
        a, b, c, workspace, counters, m, n, k, a.strides[0] // 2, 1, b.strides[0] // 2, 1,
        c.strides[0] // 2, 1, BLOCK_SIZE_M=block_m, BLOCK_SIZE_N=block_n,
        BLOCK_SIZE_K=block_k, GROUP_SIZE_M=2, FIXUP_ROWS=fixup_rows)


@pytest.fixture(autouse=True)
def _no_nan_stores(monkeypatch):
    """Every interpreted store is checked: the workspace starts as NaN, so a contributor
    that read a slot before its owner wrote it (or a C written from it) stores NaN."""
    store = executor.OP_RULES["store"]

    def checked(ctx, op, pointer, value, mask=None):
        active = np.broadcast_to(True if mask is None else mask, pointer.shape)
        assert not np.isnan(np.broadcast_to(value, pointer.shape)[active]).any()
        return store(ctx, op, pointer, value, mask)
    monkeypatch.setitem(executor.OP_RULES, "store", checked)


def _run(m, n, k, programs, block_m=32, block_n=32, block_k=16, fixup_rows=8, seed=0):
    """(C, fp32 reference, counters after the launch) for one launch on fresh buffers."""
    module = _streamk()
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    c = np.full((m, n), np.nan, np.float16)
    # NaN in the workspace: a slot read before its contributor wrote it shows up in C.
    workspace = np.full(module.workspace_elements(programs, block_m, block_n), np.nan,
                        np.float32)
    counters = np.zeros(module.counter_count(m, n, programs, block_m, block_n), np.int32)
    _launch(module, a, b, c, workspace, counters, programs, block_m, block_n, block_k,
            fixup_rows)
    return c, a.astype(np.float32) @ b.astype(np.float32), counters


def _check(c, reference):
    assert not np.isnan(c).any()
    np.testing.assert_allclose(c.astype(np.float32), reference, rtol=2e-3, atol=2e-2)


# (M, N, K, programs): with 32x32 tiles and BLOCK_K 16.
@pytest.mark.parametrize("m, n, k, programs", [
    (70, 90, 100, 4),    # 9 tiles: 2 waves + 1 tile over 4 programs; K = 6 blocks + 4
    (70, 90, 100, 5),    # 1 wave + 4 tiles (28 K-steps / 5: 6,6,6,5,5), partial edges
    (64, 96, 200, 7),    # 6 tiles < 7 programs: no whole wave, 13 K-steps each split
    (96, 96, 48, 4),     # 9 tiles: 2 waves + 1 tile of 3 K-steps over 4 programs (one idle)
    (64, 64, 64, 4),     # 4 tiles on 4 programs: data-parallel only
    (33, 65, 17, 4),     # 2x3 tiles, K = 1 block + 1: 1 wave + 2 tiles of 2 K-steps over 4
    (128, 160, 300, 6),  # 20 tiles: 3 waves + 2 tiles, 19 K-steps (the last 12 wide)
])
def test_matches_numpy(m, n, k, programs):
    c, reference, counters = _run(m, n, k, programs)
    _check(c, reference)
    assert not counters.any()    # the last contributor of each tile resets its counter


def test_fixup_slices_and_tiles_of_other_shapes():
    """128x64 tiles, BLOCK_K 32, fixup in 4 slices of 32 rows; 6 tiles on 4 programs: a
    wave, then 2 tiles of 5 K-steps over 4 programs."""
    c, reference, _ = _run(300, 100, 150, 4, block_m=128, block_n=64, block_k=32,
                           fixup_rows=32)
    _check(c, reference)


def _run_programs_in(order, monkeypatch, *shape):
    """``_run`` with the interpreter running the programs in ``order(grid)``."""
    product = executor.itertools.product

    def ordered(*ranges):
        return order(list(product(*ranges)))
    monkeypatch.setattr(executor, "itertools", SimpleNamespace(product=ordered))
    return _run(*shape)


@pytest.mark.parametrize("shape", [(70, 90, 100, 5), (64, 96, 200, 7)])
def test_result_does_not_depend_on_which_contributor_arrives_last(monkeypatch, shape):
    """Programs in grid order, reversed and shuffled: a different program finds each tile
    complete, yet the sums run in program order, so C is bit for bit the same."""
    forward, reference, _ = _run(*shape)
    backward, _, _ = _run_programs_in(lambda pids: pids[::-1], monkeypatch, *shape)
    shuffled, _, _ = _run_programs_in(
        lambda pids: [pids[i] for i in np.random.default_rng(1).permutation(len(pids))],
        monkeypatch, *shape)
    _check(forward, reference)
    np.testing.assert_array_equal(backward.view(np.uint16), forward.view(np.uint16))
    np.testing.assert_array_equal(shuffled.view(np.uint16), forward.view(np.uint16))


def test_buffers_are_reusable_across_launches():
    """The counters come back zero: a second launch on the same workspace and counters
    (stale partials in the slots) gives the same C."""
    module = _streamk()
    rng = np.random.default_rng(2)
    m, n, k, programs = 70, 90, 100, 5
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    workspace = np.zeros(module.workspace_elements(programs, 32, 32), np.float32)
    counters = np.zeros(module.counter_count(m, n, programs, 32, 32), np.int32)
    results = []
    for _ in range(2):
        c = np.zeros((m, n), np.float16)
        _launch(module, a, b, c, workspace, counters, programs, 32, 32, 16, 8)
        results.append(c)
    np.testing.assert_array_equal(results[0], results[1])
    _check(results[0], a.astype(np.float32) @ b.astype(np.float32))


# -- sm_90 code --------------------------------------------------------------------------

def _compile(block_n, num_warps=8):
    constants = {"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": block_n, "BLOCK_SIZE_K": 64,
                 "GROUP_SIZE_M": 8, "FIXUP_ROWS": 64}
    return aotk.compile(_streamk().matmul_streamk_kernel, SIGNATURE, constants,
                        num_warps=num_warps, num_stages=3, target="sm_90")


@pytest.mark.parametrize("block_n, instruction, registers", [
    (256, "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16", 232),
    (128, "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16", 170),
])
def test_sm_90_k_loop_is_the_tutorials(block_n, instruction, registers):
    """One K loop (whole tiles and stream-K segments share it) pipelined as the tutorial's:
    3 stages of 128B-swizzled cp.async copies, wgmma groups in flight across trips; no
    spills, and no more registers than Triton 3.8 takes for the same source (232 at 128x256;
    at 128x128 Triton's 168, aotk 170 when written; the tutorial: 196 and 124)."""
    kernel = _compile(block_n)
    ptx = kernel.ptx
    assert ".target sm_90a" in ptx
    assert ptx.count(instruction) == 4      # one warpgroup's 64 rows x 4 k16 steps, once
    assert "mma.sync" not in ptx and "ldmatrix" not in ptx
    assert ptx.count("cp.async.commit_group") == 3   # 2 in the prologue, 1 per trip
    assert "cp.async.wait_group 1;" in ptx and "cp.async.wait_group 0;" in ptx
    assert "wgmma.wait_group.sync.aligned 1;" in ptx and "wgmma.wait_group.sync.aligned 0;" in ptx
    assert kernel.metadata["wgmma_serialized"] is False
    assert kernel.metadata["spills"] == 0 and kernel.metadata["registers"] <= registers
    assert kernel.metadata["shared"] == 3 * (128 * 64 + 64 * block_n) * 2
    # A whole tile goes from the loop to its branch without the partial's conversion.
    after_loop = ptx[ptx.index("wgmma.wait_group.sync.aligned 0;"):]
    assert "st.shared" not in after_loop[:after_loop.index("bra")]
    # The operands come only through cp.async; the only global loads are the fixup's, .cg.
    loads = re.findall(r"ld\.global[.\w]*", ptx)
    assert set(loads) == {"ld.global.cg.v4.b32"}
    assert len(loads) == 64 * block_n // (8 * 32 * 4)  # a 64-row fp32 slice, 16 bytes each


def test_sm_90_fixup_publishes_partials_before_the_counter():
    """Partial stores, then a barrier, then one thread's acq_rel atomic on the counter,
    whose old value reaches every thread through shared memory behind a barrier before the
    branch on it; the last contributor's reset is relaxed."""
    ptx = _compile(256).ptx
    body = ptx[ptx.index(".entry"):]
    add = body.index("atom.global.acq_rel.gpu.add.u32")
    before = body[:add]
    # The partial leaves the accumulator's fragments in 8-byte stores, all before the barrier.
    assert len(re.findall(r"^\s*st\.global\.v2\.b32", before, re.M)) == 64
    assert "bar.sync 0;" in before[before.rindex("st.global.v2.b32"):]
    after = body[add:]
    assert after.index("st.shared.b32") < after.index("ld.shared.b32")
    assert "bar.sync 0;" in after[after.index("st.shared.b32"):after.index("ld.shared.b32")]
    assert "atom.global.relaxed.gpu.exch.b32" in after
    assert len(re.findall(r"\batom\.", body)) == 2


# -- GPU ------------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("m, n, k, block_n", [
    (3000, 3000, 3000, 256), (3000, 3000, 3000, 128), (1000, 1531, 777, 256),
    (5120, 1000, 3000, 256), (257, 129, 65, 128), (4096, 4096, 4096, 256)])
def test_gpu_matches_torch(m, n, k, block_n):
    """P = the SM count; twice on the same buffers (the counters must come back zero)."""
    torch = pytest.importorskip("torch")
    module = _streamk()
    programs = torch.cuda.get_device_properties(0).multi_processor_count
    a = torch.randn((m, k), device="cuda", dtype=torch.float16)
    b = torch.randn((k, n), device="cuda", dtype=torch.float16)
    workspace = torch.empty(module.workspace_elements(programs, 128, block_n),
                            device="cuda", dtype=torch.float32)
    counters = torch.zeros(module.counter_count(m, n, programs, 128, block_n),
                           device="cuda", dtype=torch.int32)
    expected = torch.matmul(a.float(), b.float())
    for _ in range(2):
        c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float16)
        module.matmul_streamk_kernel[(programs,)](
            a, b, c, workspace, counters, m, n, k, a.stride(0), 1, b.stride(0), 1, n, 1,
            BLOCK_SIZE_M=128, BLOCK_SIZE_N=block_n, BLOCK_SIZE_K=64, GROUP_SIZE_M=8,
            FIXUP_ROWS=64, num_warps=8, num_stages=3)
        torch.cuda.synchronize()
        assert not torch.isnan(c).any()
        torch.testing.assert_close(c.float(), expected, atol=0.1, rtol=1e-2)
        assert torch.count_nonzero(counters).item() == 0


LIBRARY = """
[library]
name = "streamk"
targets = ["sm_90"]

[[kernel]]
name = "matmul"
source = "{source}"
function = "matmul_streamk_kernel"
# 16-byte rows: sizes and row strides divisible by 8 (3000, 1000)
signature = "*fp16:16, *fp16:16, *fp16:16, *fp32:16, *i32:16, i32:8, i32:8, i32:8, i32:8, i32:1, i32:8, i32:1, i32:8, i32:1"
grid = ["min(num_sms, cdiv(M, BLOCK_SIZE_M) * cdiv(N, BLOCK_SIZE_N))"]
specialize = "none"

[[kernel.variant]]
constants = {{ BLOCK_SIZE_M = 128, BLOCK_SIZE_N = 256, BLOCK_SIZE_K = 64, GROUP_SIZE_M = 8, FIXUP_ROWS = 64 }}
num_warps = 8
"""


@pytest.mark.gpu
def test_gpu_library_with_num_sms_grid_matches_torch(tmp_path):
    """Shipped as a library: the grid is the device's SM count (`num_sms`, read by the
    library at each call), or the tile count where that is smaller."""
    torch = pytest.importorskip("torch")
    module = _streamk()
    manifest = tmp_path / "aotk.toml"
    manifest.write_text(LIBRARY.format(source=module.__file__))
    library = aotk.load(aotk.build(manifest, out_dir=tmp_path / "out").library)
    programs = torch.cuda.get_device_properties(0).multi_processor_count
    workspace = torch.empty(module.workspace_elements(programs, 128, 256), device="cuda",
                            dtype=torch.float32)
    for m, n, k in [(3000, 3000, 3000), (1000, 1000, 1000), (256, 512, 64)]:
        a = torch.randn((m, k), device="cuda", dtype=torch.float16)
        b = torch.randn((k, n), device="cuda", dtype=torch.float16)
        counters = torch.zeros(module.counter_count(m, n, programs, 128, 256), device="cuda",
                               dtype=torch.int32)
        expected = torch.matmul(a.float(), b.float())
        for _ in range(2):
            c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float16)
            library.matmul(a, b, c, workspace, counters, m, n, k, k, 1, n, 1, n, 1)
            torch.cuda.synchronize()
            torch.testing.assert_close(c.float(), expected, atol=0.1, rtol=1e-2)
            assert torch.count_nonzero(counters).item() == 0
