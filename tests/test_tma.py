"""TMA for tensor descriptors (issue 6; stores: tests/test_tma_stores.py): which builds copy
with TMA, what the PTX and the tensor-map recipes hold, and the C the library generates to
encode the maps."""
import re
from pathlib import Path

import pytest

import aotk
import aotk.language as tl
from tests.examples import example_module
from aotk.buildsys import cgen
from aotk.buildsys.compile_builds import compile_builds
from aotk.buildsys.manifest import load_manifest
from aotk.buildsys.plan import plan_builds

ROOT = Path(__file__).resolve().parent.parent
CONSTANTS = {"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 8}
# The manifest's large build: 16-byte rows; N and K % 8 == 0 also let the pointer fallback
# (sm_80) keep 16-byte vectors under its masks.
ALIGNED = "*fp16:16, *fp16:16, *fp16:16, i32, i32:8, i32:8, i32:8, i32:8, i32:8"


def _kernel():
    return example_module("matmul_descriptor").matmul_descriptor_kernel


def _compile(signature=ALIGNED, target="sm_90", **options):
    return aotk.compile(_kernel(), signature, CONSTANTS, num_warps=8, num_stages=3,
                        target=target, **options)


def test_aligned_descriptor_loads_become_tma_copies_on_sm_90():
    compiled = _compile()
    ptx = compiled.ptx
    assert compiled.metadata["arch"] == "sm_90a" and "wgmma.mma_async" in ptx
    # The three maps (A, B, then C's) are 128-byte grid constants after the nine params.
    for index in (9, 10, 11):
        assert re.search(rf"\.param \.align 64 \.b8 matmul_descriptor_kernel_param_{index}\[128\]",
                         ptx)
    assert "cvta.param.u64" in ptx
    # Per trip: A is one [128, 64] box, B four [64, 64] boxes (one per 128-byte panel),
    # each completing on the stage's mbarrier; prologue 2 trips + loop 1 = 3 x 5 copies.
    assert ptx.count("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes") == 15
    assert ptx.count("mbarrier.init.shared::cta.b64") == 3
    assert ptx.count("mbarrier.arrive.expect_tx.shared::cta.b64") == 3
    assert "mbarrier.try_wait.parity.shared::cta.b64" in ptx
    assert ptx.count("mbarrier.inval.shared::cta.b64") == 3
    # No operand goes through cp.async any more; C's [128, 256] tile goes out as four
    # [128, 64] TMA stores (pointer stores, one element at a time, only where a box would
    # start before the tensor: tests/test_tma_stores.py).
    assert "cp.async.cg" not in ptx and "cp.async.ca" not in ptx
    assert ptx.count("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group") == 4
    assert "st.global.v" not in ptx
    assert compiled.metadata["spills"] == 0
    assert compiled.metadata["tensor_maps"] == [
        {"base": "a_ptr", "element": "float16", "itemsize": 2, "data_type": 6,
         "shape": [["param", "M"], ["param", "K"]], "strides": [["param", "stride_am"]],
         "box": [128, 64], "swizzle": 128},
        {"base": "b_ptr", "element": "float16", "itemsize": 2, "data_type": 6,
         "shape": [["param", "K"], ["param", "N"]], "strides": [["param", "stride_bk"]],
         "box": [64, 64], "swizzle": 128},
        {"base": "c_ptr", "element": "float16", "itemsize": 2, "data_type": 6,
         "shape": [["param", "M"], ["param", "N"]], "strides": [["param", "stride_cm"]],
         "box": [128, 64], "swizzle": 128}]


@pytest.mark.parametrize("signature, copies", [
    # a_ptr not 16-byte aligned: element loads, not pipelined
    ("*fp16, *fp16:16, *fp16:16, i32, i32:8, i32:8, i32:8, i32:8, i32:8", []),
    # A's rows 8-byte aligned only: 8-byte cp.async for A, 16-byte for B (K % 8 == 0
    # and N % 8 == 0 keep the masks from splitting the vectors)
    ("*fp16:16, *fp16:16, *fp16:16, i32, i32:8, i32:8, i32:4, i32:8, i32:8", ["ca", "cg"]),
])
def test_descriptor_loads_without_proven_alignment_use_pointer_loads(signature, copies):
    """The driver refuses maps of unaligned tensors: such builds read the descriptors'
    tiles with masked pointer loads, pipelined with cp.async where the vectors allow (C,
    aligned, keeps its TMA store: its map is the only one)."""
    compiled = _compile(signature)
    assert [recipe["base"] for recipe in compiled.metadata["tensor_maps"]] == ["c_ptr"]
    assert "cp.async.bulk.tensor.2d.shared" not in compiled.ptx
    assert "mbarrier" not in compiled.ptx
    assert ".b8 matmul_descriptor_kernel_param_10[128]" not in compiled.ptx
    assert sorted(set(re.findall(r"cp\.async\.(ca|cg)\.shared", compiled.ptx))) == copies


def test_descriptor_loads_on_sm_80_and_without_tma_are_pointer_loads():
    sm80 = _compile(target="sm_80")
    assert "mma.sync" in sm80.ptx and "cp.async.cg" in sm80.ptx
    assert "mbarrier" not in sm80.ptx and sm80.metadata["tensor_maps"] == []
    no_tma = _compile(tma=False)
    assert "wgmma.mma_async" in no_tma.ptx and "cp.async.cg" in no_tma.ptx
    assert "cp.async.bulk.tensor" not in no_tma.ptx and no_tma.metadata["tensor_maps"] == []


def test_library_encodes_tensor_maps_for_its_tma_builds(tmp_path):
    """The generated C: TMA builds are picked only for sizes a map can describe, encode
    both maps per launch (cuTensorMapEncodeTiled via the runtime) and pass them after the
    params; the pointer builds ignore them."""
    manifest_path = tmp_path / "aotk.toml"
    (tmp_path / "kernels").mkdir()
    source = ROOT / "examples" / "kernels" / "matmul_descriptor.py"
    (tmp_path / "kernels" / "matmul_descriptor.py").write_text(source.read_text())
    manifest_path.write_text(
        '[library]\nname = "tma"\ntargets = ["sm_80", "sm_90"]\n\n'
        '[[kernel]]\nname = "mm"\nsource = "kernels/matmul_descriptor.py"\n'
        'function = "matmul_descriptor_kernel"\n'
        'signature = "*fp16, *fp16, *fp16, i32, i32, i32, i32, i32, i32"\n'
        'grid = ["cdiv(M, BLOCK_SIZE_M) * cdiv(N, BLOCK_SIZE_N)"]\n\n'
        '[[kernel.variant]]\n'
        f'signature = "{ALIGNED}"\n'
        'constants = { BLOCK_SIZE_M = 128, BLOCK_SIZE_N = 256, BLOCK_SIZE_K = 64, GROUP_SIZE_M = 8 }\n'
        'num_warps = 8\nspecialize = "none"\n\n'
        '[[kernel.variant]]\n'
        'constants = { BLOCK_SIZE_M = 64, BLOCK_SIZE_N = 64, BLOCK_SIZE_K = 64, GROUP_SIZE_M = 8 }\n'
        'num_warps = 4\nspecialize = "none"\n')
    manifest = load_manifest(manifest_path)
    plans = plan_builds(manifest)
    compiled = compile_builds(plans, manifest.targets, jobs=1)
    assert [len(compiled[("mm", i)].metadata["tensor_maps"]) for i in range(2)] == [3, 0]
    library = cgen.generate(manifest, plans, compiled)["tma_library.c"]
    assert ("M >= 1 && K >= 1 && stride_am >= 1 && N >= 1 && stride_bk >= 1 && "
            "stride_cm >= 1)\n            return 0;") in library
    assert ("const int64_t shape[2] = {M, K};\n"
            "            const int64_t strides[1] = {(int64_t)stride_am * 2};\n"
            '            status = aotk_encode_tensor_map(&tma_variants[0], &tensor_maps[0], "a_ptr", '
            "6, a_ptr, 2, shape, strides, 128u, 64u);") in library
    assert ("const int64_t shape[2] = {K, N};\n"
            "            const int64_t strides[1] = {(int64_t)stride_bk * 2};\n"
            '            status = aotk_encode_tensor_map(&tma_variants[0], &tensor_maps[1], "b_ptr", '
            "6, b_ptr, 2, shape, strides, 64u, 64u);") in library
    assert ("void *params[] = {&a_ptr, &b_ptr, &c_ptr, &M, &N, &K, &stride_am, &stride_bk, "
            "&stride_cm, &tensor_maps[0], &tensor_maps[1], &tensor_maps[2]};") in library
    assert library.count("aotk_encode_tensor_map(") == 3   # the pointer build encodes none
    # And it builds: the library loads (no GPU needed) and dispatches by those clauses.
    lib = aotk.load(aotk.build(manifest_path, out_dir=tmp_path / "out").library)
    assert lib.mm.select(1 << 20, 1 << 21, 1 << 22, 1000, 1200, 3000, 3000, 1200, 1200) == \
        lib.kernels["mm"]["variants"][0]
    assert lib.mm.select(1 << 20, 1 << 21, 1 << 22, 1000, 1200, 0, 3000, 1200, 1200) == \
        lib.kernels["mm"]["variants"][1]
    assert lib.mm.select(1 << 20, 1 << 21, 1 << 22, 1000, 1200, 3000, 3001, 1200, 1200) == \
        lib.kernels["mm"]["variants"][1]


BATCHED_KERNEL = '''
import aotk
import aotk.language as tl


@aotk.jit
def batched_matmul(x_desc, w_desc, c_ptr, S, N, K, BM: tl.constexpr, BN: tl.constexpr,
                   BK: tl.constexpr):
    """c[b] = x[b] @ w.T: x [B, S, K] read in [1, BM, BK] blocks, w [N, K]."""
    batch = tl.program_id(2)
    row, col = tl.program_id(0) * BM, tl.program_id(1) * BN
    acc = tl.zeros((BM, BN), tl.float32)
    for k in range(0, K, BK):
        x = tl.reshape(x_desc.load([batch, row, k]), [BM, BK])
        acc = tl.dot(x, tl.trans(w_desc.load([col, k])), acc)
    rows = row + tl.arange(0, BM)
    cols = col + tl.arange(0, BN)
    mask = (rows[:, None] < S) & (cols[None, :] < N)
    tl.store(c_ptr + batch * S * N + rows[:, None] * N + cols[None, :], acc, mask=mask)
'''


@pytest.fixture(scope="module")
def batched_library(tmp_path_factory):
    """A library whose operand A is a 3-d host descriptor read in [1, 64, 64] blocks."""
    directory = tmp_path_factory.mktemp("batched")
    (directory / "batched.py").write_text(BATCHED_KERNEL)
    (directory / "aotk.toml").write_text(
        '[library]\nname = "batched"\ntargets = ["sm_80", "sm_90"]\n\n'
        '[[kernel]]\nname = "bmm"\nsource = "batched.py"\nfunction = "batched_matmul"\n'
        'signature = "tensordesc<fp16[1, 64, 64]>, tensordesc<fp16[128, 64]>, *fp16, i32, '
        'i32, i32"\n'
        'grid = ["cdiv(S, BM)", "cdiv(N, BN)", "x_desc_shape0"]\n'
        'num_warps = 4\nconstants = { BM = 64, BN = 128, BK = 64 }\n')
    return directory, aotk.build(directory / "aotk.toml")


def test_a_3d_descriptor_is_encoded_with_its_rank(batched_library):
    """A [1, BM, BK] block of a 3-d descriptor: a 3-d tensor map (two strides, a box of 1
    in the batch dimension) beside the 2-d one of the weights."""
    _, built = batched_library
    library = next((built.library.parent / ".aotk").glob("*/batched_library.c")).read_text()
    assert ("const int64_t shape[3] = {x_desc_shape0, x_desc_shape1, x_desc_shape2};\n"
            "            const int64_t strides[2] = {(int64_t)x_desc_stride0 * 2, "
            "(int64_t)x_desc_stride1 * 2};\n") in library
    assert '"x_desc_base", 6, x_desc_base, 3, shape, strides, 64u, 64u);' in library
    assert '"w_desc_base", 6, w_desc_base, 2, shape, strides, 128u, 64u);' in library


def test_a_batch_count_of_3_keeps_the_aligned_build(batched_library):
    """The aligned build assumes no divisibility of a descriptor's leading extents (batch,
    rows): TMA needs the base and strides aligned, not those."""
    from aotk.tools.tensor_descriptor import TensorDescriptor
    _, built = batched_library
    library = aotk.load(built.library)
    x = TensorDescriptor(1 << 20, [3, 200, 512], [200 * 512, 512, 1], [1, 64, 64])
    w = TensorDescriptor(1 << 22, [256, 512], [512, 1], [128, 64])
    variants = library.kernels["bmm"]["variants"]
    assert library.bmm.select(x, w, 1 << 24, 208, 256, 512) == variants[0]
    assert library.bmm.select(x, w, 1 << 24, 200, 256, 512) == variants[1]
    unaligned = TensorDescriptor(1 << 20, [3, 200, 520], [200 * 520, 520, 1], [1, 64, 64])
    assert library.bmm.select(unaligned, w, 1 << 24, 208, 256, 512) == variants[1]


@pytest.mark.gpu
@pytest.mark.parametrize("rows", [256, 200])
def test_the_3d_tma_build_matches_torch(batched_library, rows):
    """Rows past S read zeros from the box (200 is not a multiple of BM = 64); every batch
    reads its own [S, K] slice."""
    torch = pytest.importorskip("torch")
    from aotk.tools.tensor_descriptor import TensorDescriptor
    _, built = batched_library
    library = aotk.load(built.library)
    batches, n, k = 3, 256, 512
    x = torch.randn(batches, rows, k, device="cuda", dtype=torch.float16)
    w = torch.randn(n, k, device="cuda", dtype=torch.float16)
    out = torch.full((batches, rows, n), float("nan"), device="cuda", dtype=torch.float16)
    chosen = library.bmm.select(TensorDescriptor.from_tensor(x, [1, 64, 64]),
                                TensorDescriptor.from_tensor(w, [128, 64]), out, rows, n, k)
    # S = 200 is not divisible by 16: the generic build (pointer loads) runs it.
    assert chosen == library.kernels["bmm"]["variants"][0 if rows % 16 == 0 else 1]
    library.bmm(TensorDescriptor.from_tensor(x, [1, 64, 64]),
                TensorDescriptor.from_tensor(w, [128, 64]), out, rows, n, k)
    torch.cuda.synchronize()
    torch.testing.assert_close(out, (x.float() @ w.float().T).half(), rtol=1e-2, atol=5e-2)


# -- a TMA loop inside another loop --------------------------------------------------------

PERSISTENT = "*fp16:16, *fp16:16, *fp16:16, i32:8, i32:8, i32:8, i32:8, i32:8, i32:8"
PERSISTENT_TILE = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "ACC_FP16": False}
# tile_then_segments_kernel's build: an fp32 C, 128x256 tiles.
SEGMENTS = ("*fp16:16, *fp16:16, *fp32:16, i32:8, i32:8, i32:8, i32:8, i32:8, i32:8",
            {"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 64})


def _barriers(text: str) -> int:
    return len(re.findall(r'"bar\.sync 0;"', text))


@pytest.mark.parametrize("name", ["tile_then_segments_kernel",
                                  "persistent_matmul_kernel"])
def test_llvm_never_copies_a_barrier_into_a_branch(name):
    """The elected thread initializes the mbarriers, every thread meets at a barrier, then
    the elected thread issues the first copies. With barriers as plain inline asm, LLVM's
    jump threading merged the two `if elected` branches of the stream-K-shaped loop by
    copying the barrier into both (6 barriers lowered, 7 after O3), and warp 0, one thread
    on each side, hung on the H200. Barriers are `convergent` calls: O3 keeps exactly the
    barriers the backend wrote, and the PTX has them."""
    import tests.kernels.descriptors as kernels
    signature, constants = SEGMENTS if name.startswith("tile") else (PERSISTENT,
                                                                     PERSISTENT_TILE)
    compiled = aotk.compile(getattr(kernels, name), signature, constants, num_warps=8,
                            num_stages=3, target="sm_90")
    assert "cp.async.bulk.tensor" in compiled.ptx and "mbarrier.init" in compiled.ptx
    groups = dict(re.findall(r"attributes (#\d+) = \{(.*)\}", compiled.llir))
    calls = re.findall(r'call void asm sideeffect "bar\.sync 0;", ""\(\) (#\d+)', compiled.llir)
    assert calls and all("convergent" in groups[group] for group in calls)
    assert _barriers(compiled.lowered) == _barriers(compiled.llir) == \
        compiled.ptx.count("bar.sync 0;")


@pytest.mark.gpu
@pytest.mark.parametrize("m, n, k, programs", [(1000, 1000, 3000, 7), (512, 384, 64, 5),
                                               (300, 200, 100, 132)])
def test_a_tma_loop_inside_a_persistent_loop_matches_torch(m, n, k, programs):
    """Fewer programs than tiles: each runs the TMA loop for several tiles (a hang before
    the barriers were convergent)."""
    torch = pytest.importorskip("torch")
    from tests.kernels.descriptors import persistent_matmul_kernel
    a = torch.randn((m, k), device="cuda", dtype=torch.float16)
    b = torch.randn((k, n), device="cuda", dtype=torch.float16)
    c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float16)
    persistent_matmul_kernel[(programs,)](a, b, c, m, n, k, k, n, n, num_warps=8,
                                          num_stages=3, **PERSISTENT_TILE)
    torch.cuda.synchronize()
    torch.testing.assert_close(c.float(), torch.matmul(a.float(), b.float()), atol=0.1,
                               rtol=1e-2)


@aotk.jit
def _matmul_from(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, k_start, BLOCK: tl.constexpr):
    """c = a[:, k_start:] @ b[k_start:, :], read through descriptors from column (A) and
    row (B) k_start: A's boxes start k_start elements into a row."""
    a_desc = tl.make_tensor_descriptor(a_ptr, [M, K], [stride_am, 1], [BLOCK, BLOCK])
    b_desc = tl.make_tensor_descriptor(b_ptr, [K, N], [N, 1], [BLOCK, BLOCK])
    row, col = tl.program_id(0) * BLOCK, tl.program_id(1) * BLOCK
    acc = tl.zeros((BLOCK, BLOCK), tl.float32)
    for k in range(k_start, K, BLOCK):
        acc = tl.dot(a_desc.load([row, k]), b_desc.load([k, col]), acc)
    rows = row + tl.arange(0, BLOCK)[:, None]
    cols = col + tl.arange(0, BLOCK)[None, :]
    tl.store(c_ptr + rows * N + cols, acc, mask=(rows < M) & (cols < N))


@pytest.mark.parametrize("k_start, tma", [("i32", False), ("i32:8", True), ("i32:4", False)])
def test_tma_loads_start_on_16_bytes_of_a_row(k_start, tma):
    """A's first box of a trip starts k elements into a row: TMA copies it only where k is
    proven a multiple of 8 fp16 elements (16 bytes; the hardware faults on any other
    start, an illegal instruction); otherwise pointer loads read them (cp.async where
    their vectors allow: 8 bytes at k % 4 == 0; not pipelined at all for 2 bytes)."""
    signature = f"*fp16:16, *fp16:16, *fp32:16, i32, i32:16, i32:16, i32:16, {k_start}"
    compiled = aotk.compile(_matmul_from, signature, {"BLOCK": 64}, num_warps=4,
                            num_stages=3, target="sm_90")
    assert ("cp.async.bulk.tensor" in compiled.ptx) == tma
    assert ("cp.async.ca.shared.global [%r" in compiled.ptx.replace("\t", " ")) == \
        (k_start == "i32:4")


@pytest.mark.gpu
@pytest.mark.parametrize("k_start, k", [(0, 256), (3, 256), (8, 256), (0, 250), (8, 250)])
def test_descriptor_loads_from_any_column_on_the_gpu(k_start, k):
    """TMA loads (k_start 0 and 8 on sm_90) and pointer loads (3), rows 256 elements apart;
    K = 250 ends A's rows 12 bytes into a 16-byte chunk: the boxes over that edge read
    zeros past it, not the row's padding (filled with NaN here)."""
    torch = pytest.importorskip("torch")
    m, n = 192, 128
    a = torch.full((m, 256), float("nan"), device="cuda", dtype=torch.float16)
    a[:, :k] = torch.randn(m, k, device="cuda", dtype=torch.float16)
    b = torch.randn(k, n, device="cuda", dtype=torch.float16)
    c = torch.empty(m, n, device="cuda", dtype=torch.float32)
    _matmul_from[(m // 64, n // 64)](a, b, c, m, n, k, a.stride(0), k_start, BLOCK=64)
    want = a[:, k_start:k].float() @ b[k_start:, :].float()
    torch.testing.assert_close(c, want, atol=2e-2, rtol=1e-3)
