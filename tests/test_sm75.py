"""sm_75 (Turing): kernels compile for it through ptxas using only what Turing has.

Turing lacks cp.async, bf16 conversions and tensor-core shapes, Ampere's mma.sync shapes,
and griddepcontrol (``aotk.targets``). Without a GPU: the root manifest's kernels and a
few chosen ones compile for sm_75 with none of those instructions, and an op Turing cannot
do is a CompilationError naming it and the target. On a GPU (marked ``gpu``): sm_75 PTX,
which the driver compiles for whatever newer GPU is present, computes what torch does.
"""
import ctypes
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

import aotk
import aotk.language as tl
from aotk.buildsys.manifest import check_targets, load_manifest
from aotk.buildsys.plan import plan_builds
from aotk.buildsys.sources import load_kernel
from aotk.errors import CompilationError
from aotk.options import CompileOptions
from aotk.toolchain.ptxas import assemble
from aotk_cli.main import main
from examples.kernels.add import add_kernel
from examples.kernels.layer_norm import layer_norm_fwd_kernel
from examples.kernels.matmul import matmul_kernel
from examples.kernels.softmax import softmax_kernel

ROOT = Path(__file__).resolve().parent.parent
# What ptxas rejects for sm_75 (cp.async, redux.sync, m16n8k16, cvt to bf16: sm_80;
# griddepcontrol: sm_90). LLVM writes bf16 values in .b16 registers, so ".bf16" is never
# legitimate in sm_75 PTX.
TURING_LACKS = re.compile(r"cp\.async|redux\.|m16n8k16|\.bf16|griddepcontrol")
TURING_MMA = "mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32"
MATMUL_SIGNATURE = "*fp16, *fp16, *fp16, i32, i32, i32, i32, i32:1, i32, i32:1, i32, i32:1"
MATMUL_TILES = dict(BLOCK_SIZE_M=64, BLOCK_SIZE_N=64, BLOCK_SIZE_K=32, GROUP_SIZE_M=8,
                    ACTIVATION="")


def _assert_turing_ptx(ptx: str):
    assert ".target sm_75" in ptx
    lacking = sorted(set(TURING_LACKS.findall(ptx)))
    assert not lacking, f"sm_75 PTX uses {lacking}"


def test_sm_75_is_a_target_of_compiles_and_manifests():
    assert CompileOptions(target="sm_75").target == "sm_75"
    assert check_targets(["sm_75", "sm_90"]) == ["sm_75", "sm_90"]


def test_every_build_of_the_root_manifest_compiles_for_sm_75():
    """Through ptxas, with none of what Turing lacks. The 128x256 matmul tiles fit Turing's
    64 KB only because their conversion to the store layout drops its row padding."""
    manifest = load_manifest(ROOT / "aotk.toml")
    shared = []
    for plan in plan_builds(manifest):
        kernel, _ = load_kernel(str(plan.kernel.source), plan.kernel.function,
                                plan.kernel.redirect_triton)
        for build in plan.builds:
            options = CompileOptions(num_warps=build.variant.num_warps,
                                     num_stages=build.variant.num_stages,
                                     maxnreg=build.variant.maxnreg, target="sm_75")
            result = aotk.compile(kernel, build.signature, build.constants, options=options)
            _assert_turing_ptx(result.ptx)
            assert result.metadata["arch"] == "sm_75" and result.cubin
            shared.append(result.metadata["shared"])
    assert len(shared) >= 40 and max(shared) == 65536


def test_what_fits_no_block_is_still_the_error_naming_the_target():
    """A dot whose operands alone are 80 KB: no padding to drop."""
    from tests.kernels.dot import dot_kernel
    constants = dict(M=64, N=256, K=128, TRANS_B=False, PRECISION="ieee", OUT16=False)
    with pytest.raises(CompilationError, match="a block on sm_75 may use at most 65536"):
        aotk.compile(dot_kernel, "*fp16, *fp16, *fp32", constants, target="sm_75")


SMALL_MANIFEST = """
[library]
name = "turing"
targets = ["sm_75", "sm_80"]

[[kernel]]
name = "matmul"
source = "examples/kernels/matmul.py"
function = "matmul_kernel"
signature = "*fp16:16, *fp16:16, *fp16:16, i32:8, i32:8, i32:8, i32:8, i32:1, i32:8, i32:1, i32:8, i32:1"
grid = ["cdiv(M, BLOCK_SIZE_M) * cdiv(N, BLOCK_SIZE_N)"]
specialize = "none"

[[kernel.variant]]
constants = { BLOCK_SIZE_M = 64, BLOCK_SIZE_N = 64, BLOCK_SIZE_K = 32, GROUP_SIZE_M = 8, ACTIVATION = "" }
"""


def test_a_library_for_sm_75_and_sm_80(tmp_path):
    """One library holds a cubin for each; the sm_80 one keeps its cp.async pipeline, so
    the two need different amounts of shared memory (each GPU launches with its own)."""
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    (tmp_path / "aotk.toml").write_text(SMALL_MANIFEST)
    result = aotk.build(tmp_path / "aotk.toml", out_dir=tmp_path / "out", jobs=1)
    targets = result.variants[0]["targets"]
    assert sorted(targets) == ["sm_75", "sm_80"]
    assert targets["sm_75"]["shared"] < targets["sm_80"]["shared"]
    rows = CliRunner().invoke(main, ["inspect", str(result.library)]).output.splitlines()[1:]
    assert sorted(row.split()[-5] for row in rows) == ["sm_75", "sm_80"]


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_matmul_on_sm_75_has_no_pipeline_and_turing_instructions(dtype):
    signature = MATMUL_SIGNATURE.replace("*fp16, *fp16", f"*{dtype}, *{dtype}", 1)
    result = aotk.compile(matmul_kernel, signature, MATMUL_TILES, num_stages=3,
                          target="sm_75")
    _assert_turing_ptx(result.ptx)
    if dtype == "fp16":   # two m16n8k8 per 16-deep slice, fragments through ldmatrix
        assert TURING_MMA in result.ptx and "ldmatrix.sync.aligned.m8n8.x4" in result.ptx
    else:                 # no bf16 tensor cores on Turing: FMAs on CUDA cores
        assert "mma.sync" not in result.ptx and "fma.rn.f32" in result.ptx
    # The newer GPU the driver compiles this PTX for takes it too.
    assemble(result.ptx, "sm_90")


@pytest.mark.parametrize("signature, constants", [
    ("*fp32, *fp32, *fp32", dict(M=32, N=32, K=32, TRANS_B=False, PRECISION="tf32",
                                 OUT16=False)),
    ("*i8, *i8, *i32", dict(M=32, N=32, K=32, TRANS_B=False, PRECISION="ieee",
                            OUT16=False))], ids=["tf32", "int8"])
def test_tf32_and_int8_dots_run_on_cuda_cores_on_sm_75(signature, constants):
    from tests.kernels.dot import dot_kernel
    ptx = aotk.compile(dot_kernel, signature, constants, target="sm_75").ptx
    _assert_turing_ptx(ptx)
    assert "mma.sync" not in ptx
    # sm_80 has tensor-core shapes for both.
    assert "mma.sync" in aotk.compile(dot_kernel, signature, constants, target="sm_80").ptx


@aotk.jit
def _bf16_casts(x_ptr, nearest_ptr, toward_zero_ptr, back_ptr, n, BLOCK: tl.constexpr):
    """f32 -> bf16 rounded to nearest and towards zero, and bf16 arithmetic back to f32."""
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    nearest = x.to(tl.bfloat16)
    toward_zero = x.to(tl.bfloat16, fp_downcast_rounding="rtz")
    tl.store(nearest_ptr + offsets, nearest, mask=mask)
    tl.store(toward_zero_ptr + offsets, toward_zero, mask=mask)
    tl.store(back_ptr + offsets, (nearest * toward_zero).to(tl.float32), mask=mask)


def test_bf16_conversions_are_emulated_on_sm_75():
    signature = "*fp32, *bf16, *bf16, *fp32, i32"
    ptx = aotk.compile(_bf16_casts, signature, {"BLOCK": 256}, target="sm_75").ptx
    _assert_turing_ptx(ptx)
    # sm_80 keeps its conversion instructions.
    ptx = aotk.compile(_bf16_casts, signature, {"BLOCK": 256}, target="sm_80").ptx
    assert "cvt.rz.bf16.f32" in ptx and "cvt.rn.bf16.f32" in ptx


@aotk.jit
def _half_atomics(x_ptr, h_ptr, b_ptr, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offsets)
    tl.atomic_add(h_ptr + offsets % 4, x.to(tl.float16))
    tl.atomic_add(b_ptr + offsets % 4, x.to(tl.bfloat16))


def test_half_atomics_on_sm_75():
    """f16 add is an instruction from sm_70 on; bf16 add a 16-bit CAS loop before sm_90."""
    ptx = aotk.compile(_half_atomics, "*fp32, *fp16, *bf16", {"BLOCK": 128},
                       target="sm_75").ptx
    _assert_turing_ptx(ptx)
    assert ".add.noftz.f16" in ptx and ".cas.b16" in ptx


@aotk.jit
def _dependent_copy(x_ptr, y_ptr, BLOCK: tl.constexpr, GUARDED: tl.constexpr):
    if GUARDED:
        if tl.target_info.cuda_capability_geq(9, 0):
            tl.extra.cuda.gdc_wait()
    else:
        tl.extra.cuda.gdc_wait()
    offsets = tl.arange(0, BLOCK)
    tl.store(y_ptr + offsets, tl.load(x_ptr + offsets))


def test_an_op_turing_lacks_is_a_compilation_error_naming_it_and_the_target():
    with pytest.raises(CompilationError) as caught:
        aotk.compile(_dependent_copy, "*fp32, *fp32", {"BLOCK": 64, "GUARDED": False},
                     target="sm_75")
    message = str(caught.value)
    assert "gdc_wait() needs sm_90 or later" in message and "sm_75" in message
    assert "cuda_capability_geq(9, 0)" in message   # how to fix it
    # Guarded by the target, the same kernel builds for both.
    guarded = {"BLOCK": 64, "GUARDED": True}
    assert "griddepcontrol" not in aotk.compile(_dependent_copy, "*fp32, *fp32", guarded,
                                                target="sm_75").ptx
    assert "griddepcontrol.wait" in aotk.compile(_dependent_copy, "*fp32, *fp32", guarded,
                                                 target="sm_90").ptx


# --- on a GPU: sm_75 PTX, compiled by the driver for the GPU present ---------------------

def _run_sm75_ptx(torch, kernel, grid, runtime_args: dict, constants: dict, num_warps=4):
    """Compiles ``kernel`` for sm_75 as a launch with these arguments would be specialized,
    loads its PTX (the driver JIT-compiles it for this GPU) and launches it on torch's
    current stream."""
    from cuda.bindings import driver
    from aotk.launch.arguments import specialize

    def check(result):
        error, *values = result if isinstance(result, tuple) else (result,)
        assert error == driver.CUresult.CUDA_SUCCESS, error
        return values[0] if values else None

    signature, values = specialize(kernel, runtime_args)
    compiled = aotk.compile(kernel, signature, constants, num_warps=num_warps, target="sm_75")
    _assert_turing_ptx(compiled.ptx)
    torch.cuda.synchronize()   # torch's context is current on this thread from here
    module = check(driver.cuModuleLoadData(compiled.ptx.encode() + b"\0"))
    function = check(driver.cuModuleGetFunction(module, compiled.name.encode()))
    shared = compiled.metadata["shared"]
    if shared > 48 * 1024:
        check(driver.cuFuncSetAttribute(
            function, driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            shared))
    holders = [ctype(value) for value, ctype in values]
    pointers = (ctypes.c_void_p * len(holders))(*[ctypes.addressof(h) for h in holders])
    grid = tuple(grid) + (1,) * (3 - len(grid))
    check(driver.cuLaunchKernel(function, *grid, 32 * num_warps, 1, 1, shared,
                                torch.cuda.current_stream().cuda_stream,
                                ctypes.addressof(pointers), 0))
    torch.cuda.synchronize()
    check(driver.cuModuleUnload(module))


@pytest.mark.gpu
def test_sm75_ptx_on_the_gpu_add_softmax_layer_norm():
    torch = pytest.importorskip("torch")
    x, y = torch.randn(10_000, device="cuda"), torch.randn(10_000, device="cuda")
    out = torch.empty_like(x)
    _run_sm75_ptx(torch, add_kernel, (10,), dict(x_ptr=x, y_ptr=y, out_ptr=out, n=10_000),
                  {"BLOCK": 1024})
    torch.testing.assert_close(out, x + y)

    rows = torch.randn(37, 1000, device="cuda")
    out = torch.empty_like(rows)
    _run_sm75_ptx(torch, softmax_kernel, (37,),
                  dict(out_ptr=out, in_ptr=rows, in_row_stride=1000, out_row_stride=1000,
                       n_rows=37, n_cols=1000), {"BLOCK": 1024})
    torch.testing.assert_close(out, torch.softmax(rows, dim=1))

    m, n = 16, 1000
    x = torch.randn(m, n, device="cuda", dtype=torch.float16)
    w = torch.randn(n, device="cuda", dtype=torch.float16)
    b = torch.randn(n, device="cuda", dtype=torch.float16)
    out = torch.empty_like(x)
    mean = torch.empty(m, device="cuda")
    rstd = torch.empty(m, device="cuda")
    _run_sm75_ptx(torch, layer_norm_fwd_kernel, (m,),
                  dict(X=x, Y=out, W=w, B=b, Mean=mean, Rstd=rstd, stride=n, M=m, N=n,
                       eps=1e-5), {"BLOCK_SIZE": 1024})
    want = torch.nn.functional.layer_norm(x.float(), (n,), w.float(), b.float(), 1e-5)
    torch.testing.assert_close(out.float(), want, atol=1e-2, rtol=1e-2)
    torch.testing.assert_close(mean, x.float().mean(dim=1), atol=1e-4, rtol=1e-4)


@pytest.mark.gpu
def test_sm75_ptx_on_the_gpu_bf16_casts():
    torch = pytest.importorskip("torch")
    x = torch.randn(4096, device="cuda") * 1e3
    x[:4] = torch.tensor([float("nan"), float("inf"), -float("inf"), -0.0])
    # A NaN whose payload is in the low half only: truncated, it would be an infinity.
    x.view(torch.int32)[4] = 0x7F800001
    nearest = torch.empty(4096, device="cuda", dtype=torch.bfloat16)
    toward_zero, back = torch.empty_like(nearest), torch.empty_like(x)
    _run_sm75_ptx(torch, _bf16_casts, (16,),
                  dict(x_ptr=x, nearest_ptr=nearest, toward_zero_ptr=toward_zero,
                       back_ptr=back, n=4096), {"BLOCK": 256})
    torch.testing.assert_close(nearest, x.to(torch.bfloat16), equal_nan=True, atol=0, rtol=0)
    bits = x.view(torch.int32)
    truncated = (bits >> 16).to(torch.int16).view(torch.bfloat16)
    want = torch.where(x.isnan(), torch.tensor(float("nan"), device="cuda",
                                                dtype=torch.bfloat16), truncated)
    torch.testing.assert_close(toward_zero, want, equal_nan=True, atol=0, rtol=0)
    product = (x.to(torch.bfloat16) * want).float()
    torch.testing.assert_close(back, product, equal_nan=True, atol=0, rtol=0)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype, block_m, block_n, block_k, num_warps", [
    ("float16", 64, 64, 32, 4), ("bfloat16", 64, 64, 32, 4),
    # the root manifest's large tile: 64 KB of shared memory, its conversion unpadded
    ("float16", 128, 256, 64, 8)])
def test_sm75_ptx_on_the_gpu_matmul(dtype, block_m, block_n, block_k, num_warps):
    """fp16 on Turing's m16n8k8 tensor cores, bf16 on CUDA cores; both into an fp16 C."""
    torch = pytest.importorskip("torch")
    m, n, k = 256, 512, 200
    a = torch.randn(m, k, device="cuda").to(getattr(torch, dtype))
    b = torch.randn(k, n, device="cuda").to(getattr(torch, dtype))
    c = torch.empty(m, n, device="cuda", dtype=torch.float16)
    grid = (-(-m // block_m) * -(-n // block_n),)
    tiles = dict(MATMUL_TILES, BLOCK_SIZE_M=block_m, BLOCK_SIZE_N=block_n,
                 BLOCK_SIZE_K=block_k)
    _run_sm75_ptx(torch, matmul_kernel, grid,
                  dict(a_ptr=a, b_ptr=b, c_ptr=c, M=m, N=n, K=k, stride_am=k, stride_ak=1,
                       stride_bk=n, stride_bn=1, stride_cm=n, stride_cn=1), tiles,
                  num_warps=num_warps)
    torch.testing.assert_close(c.float(), a.float() @ b.float(), atol=5e-2, rtol=1e-2)
