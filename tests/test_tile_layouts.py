"""Block shapes get a layout of their own where their rank's would replicate them
(``layout_facts.blocked_layouts``). The rank's layout is shaped by its largest block: here
a [32, 256] tile gives every thread 4 columns of 256, and a [256, 32] tile in it would be
held 8 times over, each thread loading 512 floats (liger's fused RMS-scaled matmul spilled
6.8 KB per thread that way). Checked on the PTX without a GPU, on the interpreter, and
(marked gpu) against numpy, with the tall tile's values reduced, scanned, added atomically
and stored beside the wide one's, and handed across an ``if`` and into a ``while`` loop,
whose values keep their rank's layout."""
import re

import numpy as np
import pytest

import aotk
import aotk.language as tl


@aotk.jit
def wide_and_tall(x_ptr, w_ptr, mix_ptr, sums_ptr, column_max_ptr, scan_ptr, atomic_ptr,
                  ROWS: tl.constexpr, K: tl.constexpr, COLS: tl.constexpr):
    r, k, c = tl.arange(0, ROWS), tl.arange(0, K), tl.arange(0, COLS)
    x = tl.load(x_ptr + r[:, None] * K + k[None, :])             # [ROWS, K]: the rank's shape
    w = tl.load(w_ptr + k[:, None] * COLS + c[None, :], mask=k[:, None] < K - 3, other=1.0)
    tl.store(sums_ptr + r, tl.sum(x * x, axis=1))
    tl.store(mix_ptr + r[:, None] * COLS + c[None, :], tl.dot(x, w))
    tl.store(column_max_ptr + c, tl.max(w, axis=0))                # a reduction of the tall tile
    tl.store(scan_ptr + k[:, None] * COLS + c[None, :], tl.cumsum(w, axis=0))
    tl.atomic_add(atomic_ptr + k[:, None] * COLS + c[None, :], w)


@aotk.jit
def tall_across_regions(x_ptr, w_ptr, wide_ptr, branch_ptr, loop_ptr, flag, trips,
                        ROWS: tl.constexpr, K: tl.constexpr, COLS: tl.constexpr):
    r, k, c = tl.arange(0, ROWS), tl.arange(0, K), tl.arange(0, COLS)
    wide = r[:, None] * K + k[None, :]                            # shapes the rank's layout
    tl.store(wide_ptr + wide, tl.load(x_ptr + wide) * 2.0)
    tall = k[:, None] * COLS + c[None, :]
    if flag > 0:
        w = tl.load(w_ptr + tall)
    else:
        w = tl.zeros((K, COLS), tl.float32) - 1.0
    tl.store(branch_ptr + tall, w)
    doubled = tl.load(w_ptr + tall)
    i = 0
    while i < trips:
        doubled = doubled * 2.0
        i += 1
    tl.store(loop_ptr + tall, doubled)


SIGNATURE = "*fp32:16, *fp32:16, *fp32:16, *fp32:16, *fp32:16, *fp32:16, *fp32:16"
CONSTANTS = dict(ROWS=32, K=256, COLS=32)


@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
def test_each_thread_loads_its_own_share_of_each_tile(target):
    compiled = aotk.compile(wide_and_tall, SIGNATURE, CONSTANTS, num_warps=4, target=target)
    loads = re.findall(r"ld\.global(?:\.\w+)*\.v4\.b32", compiled.ptx)
    # 32x256 + 256x32 floats over 128 threads, 4 per load: 32 loads, no replicas.
    assert len(loads) == 32, len(loads)
    assert compiled.metadata["spills"] == 0


def test_regions_keep_the_tall_tile_in_its_own_layout():
    compiled = aotk.compile(tall_across_regions, "*fp32:16, *fp32:16, *fp32:16, *fp32:16, "
                            "*fp32:16, i32, i32", CONSTANTS, num_warps=4, target="sm_90")
    loads = re.findall(r"ld\.global(?:\.\w+)*\.v4\.b32", compiled.ptx)
    # x once, w twice (the branch's and the loop's), 64 floats per thread each.
    assert len(loads) == 3 * 16, len(loads)
    assert compiled.metadata["spills"] == 0


def _run_regions(x, w, flag, trips, to_device, to_host):
    outputs = dict(wide=np.zeros((32, 256), np.float32), branch=np.zeros((256, 32), np.float32),
                   loop=np.zeros((256, 32), np.float32))
    device = {name: to_device(array) for name, array in outputs.items()}
    tall_across_regions[(1,)](to_device(x), to_device(w), device["wide"], device["branch"],
                              device["loop"], flag, trips, **CONSTANTS)
    return {name: to_host(array) for name, array in device.items()}


def _check_regions(got, x, w, flag, trips):
    np.testing.assert_array_equal(got["wide"], x * 2)
    np.testing.assert_array_equal(got["branch"], w if flag > 0 else np.full_like(w, -1.0))
    np.testing.assert_array_equal(got["loop"], w * 2.0 ** trips)


@pytest.mark.parametrize("flag, trips", [(1, 3), (0, 0)])
def test_the_interpreter_runs_the_regions(monkeypatch, flag, trips):
    monkeypatch.setenv("AOTK_INTERPRET", "1")
    x, w = _inputs()
    _check_regions(_run_regions(x, w, flag, trips, lambda a: a, lambda a: a), x, w, flag, trips)


def _reference(x, w):
    w = w.copy()
    w[256 - 3:] = 1.0
    return dict(mix=x @ w, sums=(x * x).sum(1), column_max=w.max(0), scan=np.cumsum(w, 0),
                atomic=w)


def _inputs():
    rng = np.random.default_rng(0)
    return (rng.standard_normal((32, 256)).astype(np.float32),
            rng.standard_normal((256, 32)).astype(np.float32))


def _run(x, w, to_device, to_host):
    outputs = dict(mix=np.zeros((32, 32), np.float32), sums=np.zeros(32, np.float32),
                   column_max=np.zeros(32, np.float32), scan=np.zeros((256, 32), np.float32),
                   atomic=np.zeros((256, 32), np.float32))
    device = {name: to_device(array) for name, array in outputs.items()}
    wide_and_tall[(1,)](to_device(x), to_device(w), device["mix"], device["sums"],
                        device["column_max"], device["scan"], device["atomic"], **CONSTANTS)
    return {name: to_host(array) for name, array in device.items()}


def _check(got, want):
    for name in want:
        # The dot rounds its inputs to tf32 (Triton's default precision).
        tolerance = 0.1 if name == "mix" else 1e-3
        np.testing.assert_allclose(got[name], want[name], rtol=1e-4, atol=tolerance,
                                   err_msg=name)


def test_the_interpreter_matches_numpy(monkeypatch):
    monkeypatch.setenv("AOTK_INTERPRET", "1")
    x, w = _inputs()
    _check(_run(x, w, lambda a: a, lambda a: a), _reference(x, w))


@pytest.mark.gpu
def test_the_gpu_matches_numpy():
    torch = pytest.importorskip("torch")
    x, w = _inputs()
    got = _run(x, w, lambda a: torch.from_numpy(a).cuda(), lambda t: t.cpu().numpy())
    _check(got, _reference(x, w))


@pytest.mark.gpu
@pytest.mark.parametrize("flag, trips", [(1, 3), (0, 0)])
def test_the_gpu_runs_the_regions(flag, trips):
    torch = pytest.importorskip("torch")
    x, w = _inputs()
    got = _run_regions(x, w, flag, trips, lambda a: torch.from_numpy(a).cuda(),
                       lambda t: t.cpu().numpy())
    _check_regions(got, x, w, flag, trips)


@aotk.jit
def two_aligned_one_not(a_ptr, b_ptr, out_ptr, stride_unaligned, BLOCK: tl.constexpr):
    rows, cols = tl.arange(0, BLOCK), tl.arange(0, BLOCK)
    tile = rows[:, None] * BLOCK + cols[None, :]
    a = tl.load(a_ptr + tile)
    b = tl.load(b_ptr + tile)
    tl.store(out_ptr + tile, a + b)
    tl.store(out_ptr + BLOCK * BLOCK + tile, a * b)
    # A row stride the launch gave no hint for: this store alone stays scalar.
    unaligned = 2 * BLOCK * BLOCK + rows[:, None] * stride_unaligned + cols[None, :]
    tl.store(out_ptr + unaligned, a - b)


@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
def test_one_unaligned_access_leaves_the_others_vectorized(target):
    """A shape's layout takes the vector width most of its memory elements can use: the
    one store without an alignment hint stays scalar, the four aligned accesses keep their
    16-byte vectors (the narrowest width made all of them scalar: liger's fused MoE
    up-projection held 255 registers so, Triton 128)."""
    compiled = aotk.compile(two_aligned_one_not, "*fp32:16, *fp32:16, *fp32:16, i32",
                            {"BLOCK": 64}, num_warps=4, target=target)
    ptx = compiled.ptx
    per_thread = 64 * 64 // 128
    assert ptx.count("ld.global.v4.b32") == 2 * per_thread // 4
    assert ptx.count("st.global.v4.b32") == 2 * per_thread // 4
    assert len(re.findall(r"st\.global\.b32", ptx)) == per_thread


@pytest.mark.parametrize("device", [pytest.param("cuda", marks=pytest.mark.gpu), "interpreter"])
def test_the_mixed_widths_compute_what_numpy_does(device, monkeypatch):
    """The layout the aligned accesses chose, the unaligned store written through it: every
    element lands where numpy puts it (a row stride of 65 floats)."""
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((64, 64)).astype(np.float32) for _ in range(2))
    out = np.zeros(2 * 64 * 64 + 64 * 65, np.float32)
    if device == "cuda":
        torch = pytest.importorskip("torch")
        arrays = [torch.from_numpy(x).cuda() for x in (a, b, out)]
    else:
        monkeypatch.setenv("AOTK_INTERPRET", "1")
        arrays = [a, b, out]
    two_aligned_one_not[(1,)](*arrays, 65, BLOCK=64)
    got = arrays[2].cpu().numpy() if device == "cuda" else arrays[2]
    np.testing.assert_allclose(got[:4096].reshape(64, 64), a + b, rtol=1e-6)
    np.testing.assert_allclose(got[4096:8192].reshape(64, 64), a * b, rtol=1e-6)
    unaligned = got[8192:8192 + 64 * 65].reshape(64, 65)[:, :64]
    np.testing.assert_allclose(unaligned, a - b, rtol=1e-6)
