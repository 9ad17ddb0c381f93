"""examples/kernels/matmul_descriptor_split.py: a descriptor matmul whose output tile's
columns are two accumulators (128 x (128 + 64) = 128 x 192 with power-of-two blocks), with a
producer warp and programs in pairs on request."""
import numpy as np
import pytest

import aotk
from tests.examples import example_module

SIGNATURE = "*fp16:16, *fp16:16, *fp16:16, i32:8, i32:8, i32:8, i32:8, i32:8, i32:8"
WIDE = dict(BLOCK_SIZE_M=128, BLOCK_N1=128, BLOCK_N2=64, BLOCK_SIZE_K=64, GROUP_SIZE_M=8)


def _kernel():
    return example_module("matmul_descriptor_split").matmul_descriptor_split_kernel


def _grid(m, n, constants):
    width = constants["BLOCK_N1"] + constants["BLOCK_N2"]
    return (-(-m // constants["BLOCK_SIZE_M"]) * -(-n // width),)


@pytest.mark.parametrize("m, n, k", [(200, 392, 136), (64, 96, 32), (130, 100, 70)])
def test_the_split_tile_on_the_interpreter_matches_numpy(m, n, k):
    """Odd sizes: the descriptors read zeros past M, N and K and the stores clip, both
    halves of the tile (the second starts BLOCK_N1 columns in)."""
    constants = dict(BLOCK_SIZE_M=64, BLOCK_N1=64, BLOCK_N2=32, BLOCK_SIZE_K=32, GROUP_SIZE_M=4)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    out = np.full((m, n), np.nan, np.float16)
    _kernel()[_grid(m, n, constants)](a, b, out, m, n, k, k, n, n, **constants)
    np.testing.assert_allclose(out.astype(np.float32), a.astype(np.float32) @ b.astype(np.float32),
                               atol=0.05, rtol=1e-2)


def test_the_128x192_tile_runs_both_dots_on_wgmma_from_tma_stages_in_pairs():
    """sm_90: one A and two B tiles a trip by TMA into wgmma's stages, no spills; with
    WARP_SPECIALIZE and num_ctas=2 a producer warp copies them and shares B's halves with
    the partner program (multicast): 288 threads, clusters of two at launch."""
    plain = aotk.compile(_kernel(), SIGNATURE, WIDE, num_warps=8, num_stages=3, target="sm_90")
    paired = aotk.compile(_kernel(), SIGNATURE, {**WIDE, "WARP_SPECIALIZE": True}, num_warps=8,
                          num_stages=3, target="sm_90", num_ctas=2)
    for compiled in (plain, paired):
        assert "wgmma.mma_async" in compiled.ptx and "cp.async.bulk.tensor" in compiled.ptx
        assert compiled.metadata["spills"] == 0 and compiled.metadata["registers"] <= 128
    assert (plain.metadata["threads"], plain.metadata["cluster"]) == (256, 1)
    assert (paired.metadata["threads"], paired.metadata["cluster"]) == (288, 2)
    assert "multicast::cluster" in paired.ptx and "multicast::cluster" not in plain.ptx


@pytest.mark.gpu
@pytest.mark.parametrize("m, n, k", [(3000, 3000, 3000), (2816, 3000, 1000), (1000, 4096, 520),
                                     (640, 192, 64)])
@pytest.mark.parametrize("paired", [False, True])
def test_the_split_tile_on_the_gpu_matches_torch(m, n, k, paired):
    torch = pytest.importorskip("torch")
    a = torch.randn((m, k), device="cuda", dtype=torch.float16)
    b = torch.randn((k, n), device="cuda", dtype=torch.float16)
    out = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float16)
    _kernel()[_grid(m, n, WIDE)](a, b, out, m, n, k, k, n, n, **WIDE, WARP_SPECIALIZE=paired,
                                 num_warps=8, num_stages=3, num_ctas=2 if paired else 1)
    torch.cuda.synchronize()
    torch.testing.assert_close(out.float(), a.float() @ b.float(), atol=0.5, rtol=1e-2)


def test_examples_tuned_builds_its_committed_tuning_without_a_gpu(tmp_path, capfd):
    """examples/tuned: the three matmuls from the committed tuning file (an H200's, written
    by bench/tuning.py's `aotk tune`), with no warning. The descriptor matmul's winners
    include a pairs config (5120 x 1000 x 3000), whose TMA build launches in clusters of
    two; the split-tail matmul's include its producer-warp config (3000^3)."""
    from pathlib import Path
    manifest = Path(__file__).resolve().parent.parent / "examples" / "tuned" / "aotk.toml"
    library = aotk.load(aotk.build(manifest, out_dir=tmp_path / "out").library)
    assert [line for line in capfd.readouterr().err.splitlines() if "warning" in line] == []
    tail = library.info["kernels"]["matmul_tail"]["builds"]
    assert any(b["tuned"] and "WARP_SPECIALIZE=True" in b["variant"] for b in tail)
    builds = library.info["kernels"]["matmul_descriptor"]["builds"]
    tuned = {b["variant"].split(" config ")[1].split()[0] for b in builds
             if " tuned" in b["variant"]}
    assert tuned == {"0", "2", "3", "4", "5"}
    paired = [b for b in builds if "WARP_SPECIALIZE=True" in b["variant"]]
    assert {b["targets"]["sm_90"]["cluster"] for b in paired} == {1, 2}
    assert all(b["tuned"] for b in paired)
