"""TMA for tensor-descriptor loads (issue 6): which builds copy with TMA, what the PTX and the
tensor-map recipes hold, and the C the library generates to encode the maps."""
import importlib.util
import re
from pathlib import Path

import pytest

import aotk
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
    path = ROOT / "examples" / "kernels" / "matmul_descriptor.py"
    spec = importlib.util.spec_from_file_location("matmul_descriptor_example", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.matmul_descriptor_kernel


def _compile(signature=ALIGNED, target="sm_90", **options):
    return aotk.compile(_kernel(), signature, CONSTANTS, num_warps=8, num_stages=3,
                        target=target, **options)


def test_aligned_descriptor_loads_become_tma_copies_on_sm_90():
    compiled = _compile()
    ptx = compiled.ptx
    assert compiled.metadata["arch"] == "sm_90a" and "wgmma.mma_async" in ptx
    # The two maps are 128-byte grid constants after the nine params.
    assert re.search(r"\.param \.align 64 \.b8 matmul_descriptor_kernel_param_9\[128\]", ptx)
    assert re.search(r"\.param \.align 64 \.b8 matmul_descriptor_kernel_param_10\[128\]", ptx)
    assert "cvta.param.u64" in ptx
    # Per trip: A is one [128, 64] box, B four [64, 64] boxes (one per 128-byte panel),
    # each completing on the stage's mbarrier; prologue 2 trips + loop 1 = 3 x 5 copies.
    assert ptx.count("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes") == 15
    assert ptx.count("mbarrier.init.shared::cta.b64") == 3
    assert ptx.count("mbarrier.arrive.expect_tx.shared::cta.b64") == 3
    assert "mbarrier.try_wait.parity.shared::cta.b64" in ptx
    assert ptx.count("mbarrier.inval.shared::cta.b64") == 3
    # No operand goes through cp.async any more; C is still written by ordinary stores.
    assert "cp.async.cg" not in ptx and "cp.async.ca" not in ptx
    assert compiled.metadata["spills"] == 0
    assert compiled.metadata["tensor_maps"] == [
        {"base": "a_ptr", "element": "float16", "itemsize": 2, "data_type": 6,
         "shape": [["param", "M"], ["param", "K"]], "row_stride": ["param", "stride_am"],
         "box": [128, 64], "swizzle": 128},
        {"base": "b_ptr", "element": "float16", "itemsize": 2, "data_type": 6,
         "shape": [["param", "K"], ["param", "N"]], "row_stride": ["param", "stride_bk"],
         "box": [64, 64], "swizzle": 128}]


@pytest.mark.parametrize("signature, copies", [
    # a_ptr not 16-byte aligned: element loads, not pipelined
    ("*fp16, *fp16:16, *fp16:16, i32, i32:8, i32:8, i32:8, i32:8, i32:8", []),
    # A's rows 8-byte aligned only: 8-byte cp.async for A, 16-byte for B (K % 8 == 0
    # and N % 8 == 0 keep the masks from splitting the vectors)
    ("*fp16:16, *fp16:16, *fp16:16, i32, i32:8, i32:8, i32:4, i32:8, i32:8", ["ca", "cg"]),
])
def test_descriptor_loads_without_proven_alignment_use_pointer_loads(signature, copies):
    """The driver refuses maps of unaligned tensors: such builds read the descriptors'
    tiles with masked pointer loads, pipelined with cp.async where the vectors allow."""
    compiled = _compile(signature)
    assert compiled.metadata["tensor_maps"] == []
    assert "cp.async.bulk.tensor" not in compiled.ptx and "mbarrier" not in compiled.ptx
    assert ".b8 matmul_descriptor_kernel_param_9[128]" not in compiled.ptx
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
    assert [len(compiled[("mm", i)].metadata["tensor_maps"]) for i in range(2)] == [2, 0]
    library = cgen.generate(manifest, plans, compiled)["tma_library.c"]
    assert ("M >= 1 && K >= 1 && stride_am >= 1 && N >= 1 && stride_bk >= 1)\n"
            "            return 0;") in library
    assert ('status = aotk_encode_tensor_map(&tma_variants[0], &tensor_maps[0], "a_ptr", 6, '
            'a_ptr, M, K, (int64_t)stride_am * 2, 128u, 64u);') in library
    assert ('status = aotk_encode_tensor_map(&tma_variants[0], &tensor_maps[1], "b_ptr", 6, '
            'b_ptr, K, N, (int64_t)stride_bk * 2, 64u, 64u);') in library
    assert ("void *params[] = {&a_ptr, &b_ptr, &c_ptr, &M, &N, &K, &stride_am, &stride_bk, "
            "&stride_cm, &tensor_maps[0], &tensor_maps[1]};") in library
    assert library.count("aotk_encode_tensor_map(") == 2   # the pointer build encodes none
    # And it builds: the library loads (no GPU needed) and dispatches by those clauses.
    lib = aotk.load(aotk.build(manifest_path, out_dir=tmp_path / "out").library)
    assert lib.mm.select(1 << 20, 1 << 21, 1 << 22, 1000, 1200, 3000, 3000, 1200, 1200) == \
        lib.kernels["mm"]["variants"][0]
    assert lib.mm.select(1 << 20, 1 << 21, 1 << 22, 1000, 1200, 0, 3000, 1200, 1200) == \
        lib.kernels["mm"]["variants"][1]
    assert lib.mm.select(1 << 20, 1 << 21, 1 << 22, 1000, 1200, 3000, 3001, 1200, 1200) == \
        lib.kernels["mm"]["variants"][1]
