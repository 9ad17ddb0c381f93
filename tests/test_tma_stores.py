"""Descriptor stores written with TMA on sm_90 (``passes.tma_stores``, ``backend.tma``): which
stores qualify, the code they become, and the fallback everywhere else. The GPU runs the
cases of tests/kernels/descriptors.py (test_gpu.py), these among them."""
import re

import pytest

import aotk
from aotk.ir import kir
from aotk.passes.descriptors import lower_descriptors
from aotk.passes.tma_stores import tma_store_candidates
from tests.kernels.descriptors import gated_product_3d_kernel, tile_copy_kernel

GATED_SIGNATURE = ("*fp16:16, *fp16:16, *fp16:16, *fp32:16, i32, i32, i32, i32, i32:16, i32:16, "
                   "i32:16, i32:16, i32:16, i32:16, i32:16")
GATED_BLOCKS = dict(BLOCK_M=64, BLOCK_N=64, BLOCK_K=16)
TMA_STORE = re.compile(r"cp\.async\.bulk\.tensor\.(\d)d\.global\.shared::cta\.bulk_group")


def _tile_copy_signature(dst_stride_hint: str) -> str:
    return f"*fp16:16, *fp16:16, *fp16:16, i32, i32, i32:16, i32{dst_stride_hint}"


def _gated(target="sm_90", **options):
    return aotk.compile(gated_product_3d_kernel, GATED_SIGNATURE, GATED_BLOCKS, 4, 3,
                        target=target, **options)


def test_a_dot_epilogue_is_stored_from_its_fragments_with_tma():
    """out (fp16, one 128-byte panel a row) and acc (fp32, two panels), both rank-3
    stores of a reshape: three bulk tensor stores, no store through pointers, and the
    accumulator never leaves its fragments (no barrier for a layout conversion)."""
    compiled = _gated()
    ptx = compiled.ptx
    assert TMA_STORE.findall(ptx) == ["3", "3", "3"]
    # Beside each, the path for boxes starting before the tensor (which the hardware
    # refuses), never taken here: a loop copying the tile out of shared memory 16 bytes at
    # a time, element by element (8 fp16, 4 fp32).
    assert ptx.count("st.global.b16") == 8 and ptx.count("st.global.b32") == 4
    assert "st.global.v" not in ptx
    assert ptx.count("cp.async.bulk.commit_group") == 2
    assert ptx.count("cp.async.bulk.wait_group.read 0") == 2
    assert compiled.metadata["spills"] == 0
    stores = [op for op in kir.walk(compiled.kir.body) if op.opcode == "descriptor_store"]
    assert [op.attrs["tensor_map"] for op in stores] == [0, 1]
    # Stored from the 2-d values themselves: the reshape before the store is gone.
    assert all(len(op.operands[-1].type.shape) == 2 for op in stores)
    assert not [op for op in kir.walk(compiled.kir.body) if op.opcode == "reshape"]
    # The fp16 product is cast where the accumulator lives, and only there (no second
    # layout to convert it to); so is the accumulator the loop carries.
    gir = compiled.gir.splitlines()
    stored = next(line for line in gir if "descriptor_store" in line).split("//")[0].split()[-1]
    definition = next(line for line in gir if line.strip().startswith(f"{stored} = cast"))
    assert re.search(r"fp16\[64,64\] in #mma\d+ \(home\)$", definition.split("//")[0].strip())
    loop = next(line for line in gir if " = for " in line)
    assert re.search(r": fp32\[64,64\] in #mma\d+ \(home\), fp16", loop), loop
    assert len(compiled.metadata["tensor_maps"]) == 2
    assert compiled.metadata["tensor_maps"][0]["box"] == [64, 64]
    assert compiled.metadata["tensor_maps"][1]["box"] == [64, 32]


def test_the_stored_tile_takes_fewer_registers_than_the_pointer_stores():
    with_tma = _gated()
    pointers = _gated(tma=False)
    assert not TMA_STORE.search(pointers.ptx) and "st.global" in pointers.ptx
    assert with_tma.metadata["registers"] < pointers.metadata["registers"]


def test_older_targets_and_unaligned_rows_keep_pointer_stores():
    sm80 = _gated("sm_80")
    assert not TMA_STORE.search(sm80.ptx) and "st.global" in sm80.ptx
    # dst's row stride not known to be a multiple of 16 elements: no tensor map.
    blocks = dict(SHIFT_M=0, SHIFT_N=0, BLOCK_M=32, BLOCK_N=64)
    unaligned = aotk.compile(tile_copy_kernel, _tile_copy_signature(""), blocks, 4, 1,
                             target="sm_90")
    assert not TMA_STORE.search(unaligned.ptx)
    aligned = aotk.compile(tile_copy_kernel, _tile_copy_signature(":16"), blocks, 4, 1,
                           target="sm_90")
    assert TMA_STORE.findall(aligned.ptx) == ["2"]


@pytest.mark.parametrize("shift, tma", [(0, True), (8, True), (9, False), (4, False)])
def test_a_store_must_start_on_16_bytes_of_a_row(shift, tma):
    """The hardware faults on a TMA store whose first column is not 16 bytes into a row
    (an illegal instruction on the H200): only columns proven to be multiples of 8 fp16
    elements qualify (pid_n * 64 - shift)."""
    blocks = dict(SHIFT_M=3, SHIFT_N=shift, BLOCK_M=32, BLOCK_N=64)
    compiled = aotk.compile(tile_copy_kernel, _tile_copy_signature(":16"), blocks, 4, 1,
                            target="sm_90")
    assert bool(TMA_STORE.search(compiled.ptx)) == tma


def test_rows_narrower_than_a_panel_keep_pointer_stores():
    blocks = dict(SHIFT_M=0, SHIFT_N=0, BLOCK_M=32, BLOCK_N=32)   # 64-byte rows
    compiled = aotk.compile(tile_copy_kernel, _tile_copy_signature(":16"), blocks, 4, 1,
                            target="sm_90")
    assert not TMA_STORE.search(compiled.ptx)


@pytest.mark.parametrize("shape", [(1, 64, 64), (2, 64, 64)])
def test_only_stores_of_a_reshaped_2d_block_qualify_at_rank_3(shape):
    """A [2, BM, BN] block has no 2-d tile; a [1, BM, BN] one that was not made by a
    reshape (here, loaded as it is) has none either: both keep the fallback."""
    import aotk.language as tl

    @aotk.jit
    def copy_kernel(src, dst, B, M, N, stride_b, stride_m, BLOCK_B: tl.constexpr,
                    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
        src_desc = tl.make_tensor_descriptor(src, [B, M, N], [stride_b, stride_m, 1],
                                             [BLOCK_B, BLOCK_M, BLOCK_N])
        dst_desc = tl.make_tensor_descriptor(dst, [B, M, N], [stride_b, stride_m, 1],
                                             [BLOCK_B, BLOCK_M, BLOCK_N])
        dst_desc.store([0, 0, 0], src_desc.load([0, 0, 0]))

    signature = "*fp16:16, *fp16:16, i32, i32, i32, i32:16, i32:16"
    constants = dict(BLOCK_B=shape[0], BLOCK_M=shape[1], BLOCK_N=shape[2])
    function = copy_kernel.kir(signature, constants=constants)
    assert tma_store_candidates(function) == set()
    assert function.tensor_maps == []
    lower_descriptors(function)
    assert not [op for op in kir.walk(function.body) if op.opcode in kir.DESCRIPTOR_OPS]
