"""Where a load is computed (``passes.layout_demands._load``). A load whose value is wanted
only in a dot's mma layout is loaded in a blocked layout and converted: a tile added to the
accumulator a K loop keeps in its mma layout crashed the backend ('Mma' object has no
attribute 'order') before. A load wanted only in a slice that many threads share is loaded
in its own layout and converted."""
import re

import numpy as np
import pytest

import aotk
from tests.kernels.pipeline_shapes import matmul_fp32_out_kernel as dot_plus_tile_per_trip
from tests.kernels.dot import column_major_a_dot_kernel, column_major_b_dot_kernel, dot_kernel
from tests.kernels.views import column_major_tile_kernel, row_scaled_tile_kernel


TILES = dict(BM=64, BN=64, BK=32, ADD_TILE=True)
SIGNATURE = "*fp16:16, *fp16:16, *fp32:16, *fp32:16, i32:16, i32:16, i32:16"


def _expected(a, b, d, K):
    return a.astype(np.float32) @ b.astype(np.float32) + (K // TILES["BK"]) * d


@pytest.mark.parametrize("target", ["sm_75", "sm_80", "sm_90"])
@pytest.mark.parametrize("stages", [1, 3])
def test_it_compiles(target, stages):
    compiled = aotk.compile(dot_plus_tile_per_trip, SIGNATURE, constants=TILES, num_warps=4,
                            num_stages=stages, target=target)
    assert "mma" in compiled.asm["ptx"]


def test_on_the_interpreter():
    M, N, K = 64, 128, 96
    rng = np.random.default_rng(0)
    a = (rng.standard_normal((M, K)) / 4).astype(np.float16)
    b = (rng.standard_normal((K, N)) / 4).astype(np.float16)
    d = rng.standard_normal((M, N)).astype(np.float32)
    c = np.zeros((M, N), np.float32)
    dot_plus_tile_per_trip[(M // 64, N // 64)](a, b, d, c, M, N, K, **TILES)
    np.testing.assert_allclose(c, _expected(a, b, d, K), rtol=1e-3, atol=1e-3)


@pytest.mark.gpu
@pytest.mark.parametrize("stages", [1, 3])
def test_on_the_gpu(stages):
    torch = pytest.importorskip("torch")
    M, N, K = 128, 128, 256
    generator = torch.Generator(device="cuda").manual_seed(0)
    a = (torch.randn(M, K, device="cuda", generator=generator) / 4).half()
    b = (torch.randn(K, N, device="cuda", generator=generator) / 4).half()
    d = torch.randn(M, N, device="cuda", generator=generator)
    c = torch.empty(M, N, device="cuda")
    dot_plus_tile_per_trip[(M // 64, N // 64)](a, b, d, c, M, N, K, **TILES, num_warps=4,
                                               num_stages=stages)
    torch.cuda.synchronize()
    expected = a.float() @ b.float() + (K // TILES["BK"]) * d
    torch.testing.assert_close(c, expected, rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
def test_a_row_read_as_a_column_of_a_tile_is_loaded_once_and_converted(target):
    """[256] read only as x[:, None] beside a [256, 64] tile, whose layout spreads each row
    over 16 threads: loaded in the row's own layout (two elements a thread) and converted
    through shared memory, not read by each of the 16 threads, 32 scalar loads each. Its
    results: the view case "row-read-as-a-column-of-a-tile" (interpreter and GPU)."""
    compiled = aotk.compile(row_scaled_tile_kernel, "*fp32:16, *fp32:16, *fp32:16",
                            constants={"BLOCK_M": 256, "BLOCK_N": 64}, num_warps=4,
                            target=target)
    loads = re.findall(r"ld\.global\S*", compiled.asm["ptx"])
    tile_loads = [load for load in loads if ".v4." in load]
    assert len(tile_loads) == 32            # the tile: 128 elements a thread, in vectors
    assert len(loads) - len(tile_loads) <= 2


@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
def test_a_column_major_tile_is_read_and_written_in_vectors_down_its_columns(target):
    """Memory contiguous along the first dimension only: the load and the store each get a
    layout of their own, fastest along it (``layout_facts.access_layouts``), and move four
    rows a vector instead of one element an instruction. Results: the view case
    "column-major-tile-read-and-written" (interpreter and GPU)."""
    compiled = aotk.compile(column_major_tile_kernel, "*fp32:16, *fp32:16, i32:16, i32",
                            constants={"BLOCK_M": 64, "BLOCK_N": 32}, num_warps=4,
                            target=target)
    ptx = compiled.asm["ptx"]
    # 64 x 32 elements over 128 threads: 16 a thread, four vectors of four.
    assert re.findall(r"ld\.global\S*", ptx) == ["ld.global.v4.b32"] * 4
    assert re.findall(r"st\.global\S*", ptx) == ["st.global.v4.b32"] * 4
    assert "along=0" in compiled.asm["gir"]


@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
@pytest.mark.parametrize("element, vector", [("fp16", 8), ("fp32", 4), ("i8", 16)])
def test_a_dot_stores_a_column_major_b_k_major_in_vectors(target, element, vector):
    """A B read down its columns (contiguous along K) is loaded in vectors along K, in a
    layout of its own, and stored K-major into the dot's [N, K] tile from there, one
    16-byte vector per run (``layout_facts.k_major_b_loads``): 16 bytes a load and a
    store, where it was one element each. Before, the row layout's vector width was
    measured along the columns and the dot read B at wrong addresses: the gir is checked
    for the width along K. Results: the dot cases "...-b-column-major" (interpreter and
    GPU), on mma.sync and wgmma, 4 and 8 warps."""
    out = "i32" if element == "i8" else "fp32"
    compiled = aotk.compile(column_major_b_dot_kernel, f"*{element}:16, *{element}:16, *{out}:16",
                            constants={"M": 64, "N": 64, "K": 64,
                                       "PRECISION": "tf32" if element == "fp32" else "ieee"},
                            num_warps=4, target=target)
    gir = compiled.asm["gir"]
    loads = [line for line in gir.splitlines() if " = load " in line]
    assert len(loads) == 2 and f"vec={vector}]" in loads[0]
    assert f"vec={vector} along=0 in" in loads[1]
    assert "b=k_major]" in next(line for line in gir.splitlines() if " = dot " in line)
    ptx = compiled.asm["ptx"]
    # 64 x 64 elements of A and of B over 128 threads, in 16-byte vectors.
    per_operand = 64 * 64 // 128 // vector
    assert re.findall(r"ld\.global\S*", ptx) == ["ld.global.v4.b32"] * (2 * per_operand)
    assert re.findall(r"st\.shared\.v4\S*", ptx) == ["st.shared.v4.b32"] * (2 * per_operand)
    assert not re.findall(r"st\.shared\.(?:b|u)(?:8|16)\b", ptx)


def test_eight_warps_on_64_rows_split_n_over_warpgroups():
    """64 rows are one warpgroup's wgmma: with 8 warps, each warpgroup computes its own half
    of N (``Mma.warp_columns``), reading B from its descriptor's start at that half, K-major
    (stored by columns) or N-major (a whole 128-byte panel further). fp16 fell back to
    mma.sync before. Results: the dot cases "...-8-warps" (interpreter and GPU)."""
    column_major = aotk.compile(column_major_b_dot_kernel, "*fp16:16, *fp16:16, *fp32:16",
                                constants={"M": 64, "N": 128, "K": 128, "PRECISION": "ieee"},
                                num_warps=8, target="sm_90")
    row_major = aotk.compile(dot_kernel, "*fp16:16, *fp16:16, *fp32:16",
                             constants={"M": 64, "N": 128, "K": 128, "TRANS_B": False,
                                        "PRECISION": "ieee", "OUT16": False},
                             num_warps=8, target="sm_90")
    for compiled, b_transposed in ((column_major, 0), (row_major, 1)):
        assert "#mma<m16n8 wpc=[4, 2] warp_columns=64 wgmma>" in compiled.asm["gir"]
        instructions = re.findall(r"wgmma\.mma_async\S* [^;]*", compiled.asm["ptx"])
        # Per warpgroup: its 64 of the 128 columns, over K = 128 in 8 steps of 16.
        assert len(instructions) == 8
        assert all(text.startswith("wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16")
                   and text.replace(" ", "").endswith(f",1,1,0,{b_transposed}")
                   for text in instructions)
        assert "mma.sync" not in compiled.asm["ptx"]


@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
def test_a_dot_stores_a_column_major_a_m_major_in_vectors(target):
    """An fp16 A read down its columns (contiguous along M) is loaded in 16-byte vectors
    along M and stored into the dot's [K, M] tile from there; mma.sync takes its fragments
    through ldmatrix.trans, wgmma through an M-major descriptor (imm-trans-a = 1). It was
    one 2-byte load an element (fla's chunk_delta_h: 128 of its 153 global loads).
    Results: the dot cases "...-a-column-major-..." (interpreter and GPU)."""
    compiled = aotk.compile(column_major_a_dot_kernel, "*fp16:16, *fp16:16, *fp32:16",
                            constants={"M": 64, "N": 64, "K": 64, "B_COLUMN_MAJOR": False},
                            num_warps=4, target=target)
    gir = compiled.asm["gir"]
    loads = [line for line in gir.splitlines() if " = load " in line]
    assert "vec=8 along=0 in" in loads[0] and "vec=8]" in loads[1]
    assert "a=m_major]" in next(line for line in gir.splitlines() if " = dot " in line)
    ptx = compiled.asm["ptx"]
    # 64 x 64 fp16 of A and of B over 128 threads: 4 vectors of 8 each, loaded and stored.
    assert re.findall(r"ld\.global\S*", ptx) == ["ld.global.v4.b32"] * 8
    assert re.findall(r"st\.shared\.v4\S*", ptx) == ["st.shared.v4.b32"] * 8
    if target == "sm_80":
        assert "ldmatrix.sync.aligned.m8n8.x4.trans" in ptx
    else:
        instructions = re.findall(r"wgmma\.mma_async\S* [^;]*", ptx)
        assert instructions and all(text.replace(" ", "").endswith(",1,1,1,1")
                                    for text in instructions)
