"""``tl.range(..., warp_specialize=True)`` on a TMA loop: a producer warp issues the copies
(passes.warp_specialize). On the CPU the built kernel's shape (threads, the fork, the
barriers after it); on a GPU its results against torch."""

import pytest

import aotk
from tests.kernels.producer_matmul import matmul as _matmul
from tests.kernels.producer_matmul import matmul_halves as _matmul_halves
from tests.kernels.producer_matmul import pairs_manifest, tuned_manifest

SIGNATURE = "*fp16:16, *fp16:16, *fp16:16, i32:8, i32:8, i32:8"
TILE = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64}


def _compile(producer: bool, target="sm_90", num_stages=3, num_ctas=1):
    return aotk.compile(_matmul, SIGNATURE, {**TILE, "PRODUCER": producer}, num_warps=8,
                        num_stages=num_stages, target=target, num_ctas=num_ctas)


def _loops(listing: str) -> list:
    """(head line, body text) of each ``for`` of a gir listing: up to its closing brace."""
    lines = listing.splitlines()
    found = []
    for index, line in enumerate(lines):
        if "= for [" in line:
            close = " " * (len(line) - len(line.lstrip())) + "}"
            end = next(i for i in range(index + 1, len(lines)) if lines[i].startswith(close))
            found.append((line, "\n".join(lines[index + 1:end])))
    return found


def test_a_producer_warp_runs_beside_the_compute_warps():
    """One more warp: .reqntid and the launch's threads count it; it forks before the loop
    and exits; the CTA barriers after the fork are the compute warps' alone, and the loop
    has none (each warp arrives on the stage's mbarrier instead)."""
    plain, specialized = _compile(False), _compile(True)
    assert plain.metadata["threads"] == 256 and specialized.metadata["threads"] == 288
    assert ".reqntid 288" in specialized.ptx and ".reqntid 256" in plain.ptx
    assert "exit;" in specialized.ptx and "exit;" not in plain.ptx
    after_fork = specialized.ptx[specialized.ptx.index("exit;"):]
    assert "bar.sync 0;" not in after_fork and "bar.sync 1, 256;" in after_fork
    # The compute loop (its gir listing): a wait for the tiles, the dot, an arrival; no
    # barrier and no copy (the producer's loop has them).
    loops = _loops(specialized.asm["gir"])
    compute = [body for head, body in loops if "pipeline=" in head]
    producer = [body for head, body in loops if "producer=" in head]
    assert len(compute) == len(producer) == 1
    assert "tma_consumed" in compute[0] and "warp_specialized=True" in compute[0]
    assert "tma_copy" not in compute[0] and "debug_barrier" not in compute[0]
    assert "tma_produce_wait" in producer[0] and producer[0].count("tma_copy") == 2
    assert specialized.metadata["spills"] == 0


def test_two_dots_a_trip_arrive_after_their_one_wait():
    """Several dots leave their groups in flight and one wait after the last retires the
    previous trip's: the arrival goes after that wait, where the barrier was."""
    compiled = aotk.compile(_matmul_halves, SIGNATURE, {**TILE, "PRODUCER": True},
                            num_warps=8, num_stages=3, target="sm_90")
    assert compiled.metadata["threads"] == 288
    (compute,) = [body for head, body in _loops(compiled.asm["gir"]) if "pipeline=" in head]
    after_wait = compute[compute.index("wgmma_wait"):]
    assert "tma_consumed" in after_wait and "debug_barrier" not in compute


def test_warp_specialize_needs_tma_loops():
    """Without TMA (sm_80: cp.async), the request changes nothing."""
    plain, asked = _compile(False, "sm_80"), _compile(True, "sm_80")
    assert asked.metadata["threads"] == 256 and asked.ptx == plain.ptx


def test_num_ctas_2_pairs_the_producers_of_neighbouring_programs():
    """num_ctas=2 on a warp-specialized TMA loop: the program compares its tiles' coordinates
    with its partner's (through the other CTA's shared memory, after a cluster barrier) and
    copies half of each shared tile into both CTAs (multicast); the launch runs it in
    clusters of two (metadata "cluster"), chosen at launch time: nothing in the PTX requires
    a cluster, and a CTA without a partner (%cluster_nctarank 1) shares nothing."""
    alone, paired = _compile(True), _compile(True, num_ctas=2)
    assert alone.metadata["cluster"] == 1 and paired.metadata["cluster"] == 2
    assert "multicast::cluster" in paired.ptx and "multicast::cluster" not in alone.ptx
    assert "mapa.shared::cluster" in paired.ptx and "%cluster_nctarank" in paired.ptx
    assert "barrier.cluster.arrive" in paired.ptx
    assert ".reqnctapercluster" not in paired.ptx and ".explicitcluster" not in paired.ptx
    assert paired.metadata["threads"] == 288 and paired.metadata["spills"] == 0


def test_num_ctas_2_changes_nothing_without_a_producer_warp_or_wgmma():
    """Only the producer warps of a pair share tiles: a loop without one, or sm_80 (no TMA
    loops), compiles as with num_ctas=1 and launches alone."""
    for producer, target in ((False, "sm_90"), (True, "sm_80")):
        alone, asked = _compile(producer, target), _compile(producer, target, num_ctas=2)
        assert asked.metadata["cluster"] == 1 and asked.ptx == alone.ptx


@pytest.mark.gpu
@pytest.mark.parametrize("m, n, k", [(512, 384, 1024), (768, 640, 2048), (300, 512, 640),
                                     (256, 128, 64)])
@pytest.mark.parametrize("kernel", [_matmul, _matmul_halves], ids=["one_dot", "two_dots"])
def test_programs_in_pairs_match_torch(kernel, m, n, k):
    """num_ctas=2 through the JIT: grids of 4, 6 and 2 row tiles run in pairs sharing B's
    tiles (one trip of K at 64); 3 row tiles (an odd grid) run alone. Each result against
    torch."""
    torch = pytest.importorskip("torch")
    a = torch.randn((m, k), device="cuda", dtype=torch.float16)
    b = torch.randn((k, n), device="cuda", dtype=torch.float16)
    c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float16)
    grid = (-(-m // TILE["BLOCK_M"]), -(-n // TILE["BLOCK_N"]))
    kernel[grid](a, b, c, m, n, k, **TILE, PRODUCER=True, num_warps=8, num_stages=3,
                 num_ctas=2)
    torch.cuda.synchronize()
    torch.testing.assert_close(c.float(), torch.matmul(a.float(), b.float()), atol=0.1,
                               rtol=1e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("kernel", [_matmul, _matmul_halves], ids=["one_dot", "two_dots"])
@pytest.mark.parametrize("m, n, k, num_stages", [(512, 384, 1024, 3), (300, 260, 200, 4),
                                                 (128, 128, 64, 3)])
def test_the_producer_warp_matmul_matches_torch(kernel, m, n, k, num_stages):
    torch = pytest.importorskip("torch")
    a = torch.randn((m, k), device="cuda", dtype=torch.float16)
    b = torch.randn((k, n), device="cuda", dtype=torch.float16)
    c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float16)
    grid = (-(-m // TILE["BLOCK_M"]), -(-n // TILE["BLOCK_N"]))
    kernel[grid](a, b, c, m, n, k, **TILE, PRODUCER=True, num_warps=8,
                 num_stages=num_stages)
    torch.cuda.synchronize()
    torch.testing.assert_close(c.float(), torch.matmul(a.float(), b.float()), atol=0.1,
                               rtol=1e-2)



@pytest.mark.gpu
def test_a_library_built_with_num_ctas_2_matches_torch(tmp_path):
    """The built library launches even grids in clusters of two (cuLaunchKernelEx) and odd
    ones alone; both results against torch."""
    torch = pytest.importorskip("torch")
    manifest = tmp_path / "aotk.toml"
    manifest.write_text(pairs_manifest())
    lib = aotk.load(aotk.build(manifest, out_dir=tmp_path / "out").library)
    for m, n, k in ((512, 384, 1024), (384, 256, 320), (1024, 1024, 2048)):
        a = torch.randn((m, k), device="cuda", dtype=torch.float16)
        b = torch.randn((k, n), device="cuda", dtype=torch.float16)
        c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float16)
        lib.matmul(a, b, c, m, n, k)
        torch.cuda.synchronize()
        torch.testing.assert_close(c.float(), torch.matmul(a.float(), b.float()), atol=0.1,
                                   rtol=1e-2)


def test_num_ctas_2_where_nothing_pairs_is_a_build_warning(tmp_path, capfd):
    """A variant asking for pairs whose kernel has no warp-specialized TMA loop gets one
    warning naming it; the pairs manifest (sm_90 pairs its programs) gets none."""
    manifest = tmp_path / "aotk.toml"
    manifest.write_text(pairs_manifest().replace("PRODUCER = true", "PRODUCER = false"))
    aotk.build(manifest, out_dir=tmp_path / "alone")
    warnings = [line for line in capfd.readouterr().err.splitlines() if "warning" in line]
    assert len(warnings) == 1 and "kernel.matmul.variant[0]" in warnings[0]
    assert "num_ctas = 2 pairs nothing" in warnings[0] and str(manifest) in warnings[0]
    manifest.write_text(pairs_manifest())
    aotk.build(manifest, out_dir=tmp_path / "pairs")
    assert "warning" not in capfd.readouterr().err


def test_an_autotune_config_with_num_ctas_2_builds_in_pairs_where_the_tuning_chose_it(
        tmp_path):
    """aotk.Config(num_ctas=2) among an @autotune kernel's configs: the tuning file records
    it, and the variant built for the point where it won launches in clusters of two (its
    entry in the library's variant table), the other config alone."""
    from aotk.buildsys.tuning import tuning_path
    manifest = _tuned_project(tmp_path, tuned_manifest())
    assert '"num_ctas": 2' in tuning_path(manifest).read_text()
    aotk.build(manifest)
    c_source = next((tmp_path / "build" / ".aotk" / "tunedpairs").glob("*_library.c")).read_text()
    entries = [line for line in c_source.splitlines() if '"matmul", "matmul[' in line]
    paired = [line for line in entries if ", 288u, 2u, " in line]
    alone = [line for line in entries if ", 288u, 1u, " in line]
    assert len(paired) == 1 and "config 1" in paired[0]
    assert alone and all("config 0" in line for line in alone)
    # the comments over its dispatch clause and its entry in the variant table
    assert c_source.count("num_ctas=2 (programs in pairs where the grid's x is even)") == 2


def _tuned_project(tmp_path, manifest_text: str, producer: bool = True):
    """A project whose kernel is the producer matmul under @autotune (config 1: num_ctas=2)
    and a tuning file in which config 1 won at N = 3000 and config 0 at N = 1024."""
    from pathlib import Path

    from aotk.buildsys.manifest import load_manifest
    from aotk.buildsys.sources import load_kernel_and_tuner
    from aotk.buildsys.tuning import TunedPoint, describe_builds, tuning_path, write_kernel
    (tmp_path / "kernels").mkdir(exist_ok=True)
    source = (Path(__file__).resolve().parent / "kernels" / "producer_matmul.py").read_text()
    (tmp_path / "kernels" / "tuned.py").write_text(
        source + "\n\nmatmul_tuned = aotk.autotune(configs=[aotk.Config({}, num_warps=8), "
        "aotk.Config({}, num_warps=8, num_ctas=2)], key=['N'])(matmul)\n")
    manifest = tmp_path / "aotk.toml"
    manifest.write_text(manifest_text if producer else
                        manifest_text.replace("PRODUCER = true", "PRODUCER = false"))
    function, tuner, _ = load_kernel_and_tuner(tmp_path / "kernels" / "tuned.py",
                                               "matmul_tuned")
    kernel = load_manifest(manifest).kernels[0]
    points = [TunedPoint({"N": 1024}, 0, [1.0, 2.0]), TunedPoint({"N": 3000}, 1, [2.0, 1.0])]
    write_kernel(tuning_path(manifest), "matmul", function.source_digest, tuner.configs,
                 ["N"], "sm_90", "Stand-in GPU (sm_90)", points,
                 describe_builds(kernel) if kernel.explicit_variants else None)
    return manifest


CLASSES = """
[[kernel.variant]]
signature = "*fp16:16, *fp16:16, *fp16:16, i32:8, i32:8, i32:8"
specialize = "none"

[[kernel.variant]]
specialize = "none"

[kernel.tune]
points = [{ N = 1024 }, { N = 3000 }]
arguments = { a_ptr = "N * N", b_ptr = "N * N", c_ptr = "N * N", M = "N", K = "N" }
"""


@pytest.mark.parametrize("producer", [True, False])
def test_a_config_pairing_in_one_build_class_is_not_warned_about(tmp_path, capfd, producer):
    """An autotuned kernel's pairs config built for 16-byte rows (TMA: pairs) and for any
    size (pointer loads: alone) is as meant: no warning. Without a producer warp it pairs
    nowhere: one warning, naming the config."""
    manifest = _tuned_project(tmp_path, tuned_manifest().replace(
        'signature = "*fp16:16, *fp16:16, *fp16:16, i32:8, i32:8, i32:8"',
        'signature = "*fp16, *fp16, *fp16, i32, i32, i32"') + CLASSES, producer)
    aotk.build(manifest)
    c_source = next((tmp_path / "build" / ".aotk" / "tunedpairs").glob("*_library.c")).read_text()
    assert "config 1" in c_source   # the pairs config is built
    warnings = [line for line in capfd.readouterr().err.splitlines() if "warning" in line]
    if producer:
        assert warnings == []
    else:
        assert len(warnings) == 1 and "config 1 of matmul_tuned's @autotune" in warnings[0]
        assert "num_ctas = 2 pairs nothing" in warnings[0]
