"""CompileOptions (validated, frozen, unknown options named) and CompiledKernel's stages."""
import dataclasses
import json

import pytest

import aotk
from aotk.compiler import CompiledKernel
from aotk.options import CompileOptions
from tests.kernels.elementwise import add_kernel

SIGNATURE = "*fp32:16, *fp32:16, *fp32:16, i32"


def test_defaults_and_frozen():
    options = CompileOptions()
    assert (options.num_warps, options.num_stages, options.target, options.debug,
            options.tma) == (4, 3, "sm_90", None, True)
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.num_warps = 8


@pytest.mark.parametrize("keywords, message", [
    ({"target": "sm_70"}, "unsupported target 'sm_70'; expected one of sm_75, sm_80, sm_86, "
                          "sm_89, sm_90"),
    ({"num_warps": 3}, "num_warps must be a power of two from 1 to 32, got 3"),
    ({"num_warps": 64}, "num_warps must be a power of two from 1 to 32, got 64"),
    ({"num_warps": 0}, "num_warps must be a power of two from 1 to 32, got 0"),
    ({"num_warps": True}, "num_warps must be a power of two from 1 to 32, got True"),
    ({"num_stages": 0}, r"num_stages must be an integer >= 1, got 0"),
    ({"num_stages": 2.0}, r"num_stages must be an integer >= 1, got 2.0"),
    ({"maxnreg": 8}, r"maxnreg must be an integer from 16 to 255 \(registers per thread\), "
                     "got 8"),
    ({"num_ctas": 4}, r"num_ctas=4: aotk runs programs alone \(1\) or in pairs sharing their "
                      r"TMA tiles \(2\); use 1 or 2"),
    ({"enable_fp_fusion": 1}, "enable_fp_fusion must be True or False, got 1"),
])
def test_values_are_checked_on_construction(keywords, message):
    with pytest.raises(ValueError, match=message):
        CompileOptions(**keywords)
    with pytest.raises(ValueError, match=message):
        aotk.compile(add_kernel, SIGNATURE, {"BLOCK": 256}, **keywords)


def test_unknown_option_is_a_type_error_naming_it():
    with pytest.raises(TypeError, match="unknown compile option 'num_warp'; did you mean "
                                        "'num_warps'"):
        CompileOptions.from_keywords(num_warp=8)
    with pytest.raises(TypeError, match=r"unknown compile option 'colour' \(known: "
                                        r"num_warps, num_stages, target, debug, tma, "
                                        r"maxnreg, num_ctas, enable_fp_fusion\)"):
        CompileOptions.from_keywords(colour="red")
    assert CompileOptions.from_keywords(num_warps=8) == CompileOptions(num_warps=8)


def test_cache_key_is_what_the_jit_cache_keyed_on():
    assert CompileOptions().cache_key() == {"num_warps": 4, "num_stages": 3, "target": "sm_90"}
    assert CompileOptions(num_warps=8, num_stages=2, target="sm_80", tma=False).cache_key() \
        == {"num_warps": 8, "num_stages": 2, "target": "sm_80", "tma": False}
    assert CompileOptions(maxnreg=64).cache_key() == {"num_warps": 4, "num_stages": 3,
                                                      "target": "sm_90", "maxnreg": 64}
    assert CompileOptions(enable_fp_fusion=False).cache_key() == {
        "num_warps": 4, "num_stages": 3, "target": "sm_90", "enable_fp_fusion": False}
    # debug reaches the cache through the kir (its device asserts).
    assert CompileOptions(debug=True).cache_key() == CompileOptions().cache_key()


def test_compile_takes_options_or_keywords_not_both():
    options = CompileOptions(num_warps=8, target="sm_80")
    by_options = aotk.compile(add_kernel, SIGNATURE, {"BLOCK": 256}, options=options)
    by_keywords = aotk.compile(add_kernel, SIGNATURE, {"BLOCK": 256}, num_warps=8,
                               target="sm_80")
    assert by_options.options == by_keywords.options == options
    assert by_options.ptx == by_keywords.ptx
    assert by_options.metadata == by_keywords.metadata
    with pytest.raises(TypeError, match="options= or the keyword options, not both"):
        aotk.compile(add_kernel, SIGNATURE, {"BLOCK": 256}, num_warps=8, options=options)


def test_compiled_kernel_holds_every_stage_in_order(tmp_path):
    compiled = aotk.compile(add_kernel, SIGNATURE, {"BLOCK": 256})
    assert isinstance(compiled, CompiledKernel)
    assert list(compiled.asm) == ["kir", "gir", "lowered", "llir", "ptx", "cubin"]
    assert compiled.kir is compiled.asm["kir"] and "add_kernel" in str(compiled.kir)
    assert compiled.gir == compiled.asm["gir"] and isinstance(compiled.gir, str)
    assert compiled.lowered == compiled.asm["lowered"] and "define" in compiled.lowered
    assert compiled.llir == compiled.asm["llir"] and "define" in compiled.llir
    assert compiled.ptx == compiled.asm["ptx"] and ".entry add_kernel" in compiled.ptx
    assert compiled.cubin == compiled.asm["cubin"] and compiled.cubin[:4] == b"\x7fELF"
    assert compiled.name == "add_kernel"
    assert str(compiled.signature) == SIGNATURE and compiled.options == CompileOptions()
    assert set(compiled.metadata) == {"name", "target", "arch", "ptx_arch", "num_warps", "threads",
                                      "cluster", "num_stages", "shared", "registers", "spills",
                                      "wgmma_serialized", "vector_widths", "tensor_maps"}

    written = compiled.dump(str(tmp_path / "out"))
    assert [p.rsplit("/", 1)[1] for p in written] == [
        "add_kernel.kir", "add_kernel.gir", "add_kernel.lowered", "add_kernel.llir",
        "add_kernel.ptx",
        "add_kernel.cubin", "add_kernel.json"]
    out = tmp_path / "out"
    assert (out / "add_kernel.kir").read_text() == str(compiled.kir)
    assert (out / "add_kernel.gir").read_text() == compiled.gir
    assert (out / "add_kernel.lowered").read_text() == compiled.lowered
    assert (out / "add_kernel.llir").read_text() == compiled.llir
    assert (out / "add_kernel.ptx").read_text() == compiled.ptx
    assert (out / "add_kernel.cubin").read_bytes() == compiled.cubin
    assert json.loads((out / "add_kernel.json").read_text()) == compiled.metadata


@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
def test_maxnreg_caps_the_registers_of_a_thread_as_in_triton(target):
    capped = aotk.compile(add_kernel, SIGNATURE, {"BLOCK": 1024}, maxnreg=32, target=target)
    assert ".maxnreg 32" in capped.ptx
    assert capped.metadata["registers"] <= 32
    free = aotk.compile(add_kernel, SIGNATURE, {"BLOCK": 1024}, target=target)
    assert ".maxnreg" not in free.ptx


@aotk.jit
def _scaled_sum(x_ptr, y_ptr, out_ptr, BLOCK: aotk.language.constexpr):
    offs = aotk.language.arange(0, BLOCK)
    x = aotk.language.load(x_ptr + offs)
    aotk.language.store(out_ptr + offs, x * 3.0 + aotk.language.load(y_ptr + offs))


@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
def test_a_product_plus_a_value_is_one_fma_unless_fp_fusion_is_off(target):
    signature, constants = "*fp32:16, *fp32:16, *fp32:16", {"BLOCK": 256}
    fused = aotk.compile(_scaled_sum, signature, constants, target=target)
    assert "fma.rn.f32" in fused.ptx and "mul.rn.f32" not in fused.ptx
    kept = aotk.compile(_scaled_sum, signature, constants, target=target,
                        enable_fp_fusion=False)
    # .rn on both: ptxas may not fuse them either.
    assert "fma.rn.f32" not in kept.ptx
    assert "mul.rn.f32" in kept.ptx and "add.rn.f32" in kept.ptx


def test_launch_options_maxnreg_and_num_ctas_as_triton_takes_them():
    import numpy as np
    x, y = np.arange(256, dtype=np.float32), np.ones(256, np.float32)
    out = np.zeros_like(x)
    add_kernel[(1,)](x, y, out, 256, BLOCK=256, maxnreg=64, num_ctas=1)
    np.testing.assert_array_equal(out, x + 1)
    out[:] = 0   # in pairs (nothing to share here): the same result
    add_kernel[(1,)](x, y, out, 256, BLOCK=256, num_ctas=2)
    np.testing.assert_array_equal(out, x + 1)
    with pytest.raises(ValueError, match="num_ctas=4"):
        add_kernel[(1,)](x, y, out, 256, BLOCK=256, num_ctas=4)
    with pytest.raises(ValueError, match="maxnreg must be an integer from 16 to 255"):
        add_kernel[(1,)](x, y, out, 256, BLOCK=256, maxnreg=1000)
    add_kernel[(1,)](x, y, out, 256, BLOCK=256, enable_fp_fusion=False)
    np.testing.assert_array_equal(out, x + 1)
    with pytest.raises(ValueError, match="enable_fp_fusion must be True or False"):
        add_kernel[(1,)](x, y, out, 256, BLOCK=256, enable_fp_fusion="no")



@pytest.mark.gpu
def test_a_gpu_launch_with_maxnreg_runs_the_capped_build():
    torch = pytest.importorskip("torch")
    x, y = torch.arange(4096, device="cuda", dtype=torch.float32), torch.ones(4096, device="cuda")
    out = torch.empty_like(x)
    add_kernel[(4,)](x, y, out, 4096, BLOCK=1024, maxnreg=24)
    assert torch.equal(out, x + 1)


@pytest.mark.gpu
def test_a_gpu_launch_without_fp_fusion_rounds_the_product_first():
    torch = pytest.importorskip("torch")
    generator = torch.Generator(device="cuda").manual_seed(0)
    x, y = (torch.randn(256, generator=generator, device="cuda") for _ in range(2))
    out = torch.empty_like(x)
    _scaled_sum[(1,)](x, y, out, BLOCK=256, enable_fp_fusion=False)
    assert torch.equal(out, x * 3.0 + y)   # torch rounds the product, then the sum
    _scaled_sum[(1,)](x, y, out, BLOCK=256)
    torch.testing.assert_close(out, x * 3.0 + y)


@aotk.jit
def _transpose_tile(x_ptr, out_ptr, N: aotk.language.constexpr):
    rows = aotk.language.arange(0, N)
    tile = aotk.language.load(x_ptr + rows[:, None] * N + rows[None, :])
    aotk.language.store(out_ptr + rows[:, None] * N + rows[None, :], aotk.language.trans(tile))


def test_more_shared_memory_than_a_block_gets_is_a_compile_error_naming_the_target():
    """A [256, 256] fp32 transpose goes through 257 KB of shared memory: more than any GPU
    gives a block. The error comes at compile time, naming the kernel and the target's
    limit (the consumer GPUs' 99 KB, Hopper's 227 KB), not as a failed launch."""
    compiled = aotk.compile(_transpose_tile, "*fp32:16, *fp32:16", constants=dict(N=128),
                            target="sm_86")
    assert compiled.metadata["shared"] <= 99 * 1024
    for target, limit in (("sm_86", 101376), ("sm_90", 232448)):
        with pytest.raises(aotk.CompilationError,
                           match=rf"_transpose_tile needs \d+ bytes of shared memory, but a "
                                 rf"block on {target} may use at most {limit}"):
            aotk.compile(_transpose_tile, "*fp32:16, *fp32:16", constants=dict(N=256),
                         target=target)
