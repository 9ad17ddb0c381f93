"""GPU code generation without a GPU: PTX shape checks, and every case through ptxas."""
import re

import llvmlite.binding as llvm
import pytest

import aotk
from tests.examples import example_module
import aotk.language as tl
from aotk.launch.arguments import NUMPY_DTYPES, scalar_type_of
from tests.kernels import atomics as atomic_kernels
from tests.kernels import batched_matmul
from tests.kernels import (combine, control_flow, dot, libdevice, operand_tiles, reductions,
                           scans, views)
from tests.kernels.elementwise import CASES as ELEMENTWISE_CASES, add_kernel, copy2d_kernel

CASES = (ELEMENTWISE_CASES + reductions.CASES + control_flow.CASES + views.CASES + dot.CASES + operand_tiles.CASES
         + atomic_kernels.CASES + scans.CASES + combine.CASES + batched_matmul.CASES
         + libdevice.CASES)
import numpy as np

ALIGNED_ADD = "*fp32:16, *fp32:16, *fp32:16, i32:16"


def _memory_lines(ptx):
    return [l.strip() for l in ptx.splitlines() if "ld.global" in l or "st.global" in l]


def test_aligned_add_uses_16_byte_vectors():
    compiled = aotk.compile(add_kernel, ALIGNED_ADD, {"BLOCK": 1024})
    lines = _memory_lines(compiled.ptx)
    assert any("ld.global.v4.b32" in l for l in lines)
    assert any("st.global.v4.b32" in l for l in lines)
    # Masked lanes are predicates, not branches.
    assert all(l.startswith("@%p") or "@%p" in l for l in lines if "ld.global" in l)
    assert "bra" not in compiled.ptx.split(".entry")[1]
    assert compiled.metadata["vector_widths"] == [4]


@pytest.mark.parametrize("signature", [
    "*fp32, *fp32, *fp32, i32",            # pointers not known aligned
    "*fp32:16, *fp32:16, *fp32:16, i32",   # n not divisible: the mask varies inside a vector
])
def test_unproven_alignment_never_vectorizes(signature):
    compiled = aotk.compile(add_kernel, signature, {"BLOCK": 1024})
    lines = _memory_lines(compiled.ptx)
    assert lines and not any(".v2." in l or ".v4." in l for l in lines)


def test_2d_copy_vectorizes_along_rows_when_strides_divisible():
    compiled = aotk.compile(copy2d_kernel, "*fp16:16, *fp16:16, i32:16, i32:16, i32:16, i32:16",
                            {"BLOCK_M": 32, "BLOCK_N": 64})
    assert any("ld.global.v4.b32" in l for l in _memory_lines(compiled.ptx))
    unhinted = aotk.compile(copy2d_kernel, "*fp16:16, *fp16:16, i32, i32, i32, i32",
                            {"BLOCK_M": 32, "BLOCK_N": 64})
    assert not any(".v4." in l for l in _memory_lines(unhinted.ptx))


def test_divisibility_hints_set_the_vector_width():
    """":8" on fp16 strides proves 16-byte rows as ":16" does; ":4" proves 8 bytes, ":2"
    one 4-byte pair; unsupported hints are refused by name."""
    def widths(hint):
        signature = f"*fp16:16, *fp16:16, i32:{hint}, i32:{hint}, i32:{hint}, i32:{hint}"
        return aotk.compile(copy2d_kernel, signature,
                            {"BLOCK_M": 32, "BLOCK_N": 64}).metadata["vector_widths"]
    assert widths(16) == widths(8) == [8] and widths(4) == [4] and widths(2) == [2]
    with pytest.raises(ValueError, match=r"hint :32 on M is not supported \(use :1, :2"):
        aotk.compile(copy2d_kernel, "*fp16:16, *fp16:16, i32:32, i32, i32, i32",
                     {"BLOCK_M": 32, "BLOCK_N": 64})


def test_compiled_kernel_api():
    compiled = aotk.compile(add_kernel, ALIGNED_ADD, {"BLOCK": 256}, num_warps=2, target="sm_80")
    assert compiled.name == "add_kernel"
    assert ".entry add_kernel" in compiled.ptx and ".target sm_80" in compiled.ptx
    assert "define ptx_kernel void @\"add_kernel\"" in compiled.llir or \
        "define ptx_kernel void @add_kernel" in compiled.llir
    llvm.parse_assembly(compiled.llir).verify()
    assert "kir.func @add_kernel" in str(compiled.kir)
    assert compiled.cubin[:4] == b"\x7fELF"
    assert isinstance(compiled.metadata["shared"], int)
    assert compiled.metadata["num_warps"] == 2 and compiled.metadata["registers"] > 0
    assert ".reqntid 64" in compiled.ptx


def test_math_links_libdevice_only_what_is_used():
    from tests.kernels.elementwise import math_kernel
    compiled = aotk.compile(math_kernel, "*fp32:16, *fp32:16, i32", {"FN": "exp", "BLOCK": 256})
    assert "__nv_" not in compiled.ptx.replace("// ", "")  # inlined, nothing left to call
    assert "__nvvm_reflect" not in compiled.ptx
    assert compiled.ptx.count(".func") == 0


def test_bad_signature_is_clear():
    with pytest.raises(ValueError, match="3 entries but add_kernel has 4"):
        aotk.compile(add_kernel, "*fp32, *fp32, *fp32", {"BLOCK": 16})
    with pytest.raises(ValueError, match="unknown type 'fp33'"):
        aotk.compile(add_kernel, "*fp33, *fp32, *fp32, i32", {"BLOCK": 16})


def _signature(case, args):
    parts = []
    for name in case.kernel.runtime_names:
        value = args[name]
        if isinstance(value, np.ndarray):
            aligned = value.ctypes.data % 16 == 0
            parts.append("*" + NUMPY_DTYPES[value.dtype].short + (":16" if aligned else ""))
        else:
            parts.append(scalar_type_of(value).short)
    return ", ".join(parts)


@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_every_case_passes_ptxas(case, target):
    """No spills anywhere; libdevice's fp64 sinpi on sm_90 spilled 16 bytes until offsets
    scaled onto a base became one mad.wide (nvptx-mad-wide-opt), as in Triton's code."""
    args = case.make_args(np.random.default_rng(0))
    compiled = aotk.compile(case.kernel, _signature(case, args), case.constants, num_warps=case.num_warps, target=target)
    assert compiled.cubin[:4] == b"\x7fELF"
    assert compiled.metadata["spills"] == 0


@aotk.jit
def _hinted_copy(src, dst, start, BLOCK: tl.constexpr):
    offs = tl.max_contiguous(tl.multiple_of(start + tl.arange(0, BLOCK), BLOCK), BLOCK)
    tl.store(dst + offs, tl.load(src + offs))


def test_multiple_of_and_max_contiguous_license_vectors():
    """`start` carries no hint, so only the user's hints prove alignment."""
    compiled = aotk.compile(_hinted_copy, "*fp32:16, *fp32:16, i32", {"BLOCK": 512})
    assert any("ld.global.v4.b32" in l for l in _memory_lines(compiled.ptx))


def test_cache_modifier_reaches_the_instruction():
    @aotk.jit
    def streaming(src, dst, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.store(dst + offs, tl.load(src + offs, cache_modifier=".cg"), cache_modifier=".cs")
    compiled = aotk.compile(streaming, "*fp32:16, *fp32:16", {"BLOCK": 512})
    lines = _memory_lines(compiled.ptx)
    assert any("ld.global.cg.v4.b32" in l for l in lines)
    assert any("st.global.cs.v4.b32" in l for l in lines)


@aotk.jit
def _evicting_copy(src, dst, keep, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    value = tl.load(src + offs, mask=mask, other=0.0, eviction_policy="evict_first")
    value += tl.load(keep + offs, mask=mask, other=0.0, eviction_policy="evict_last")
    value += tl.load(keep + offs + BLOCK, mask=mask, other=0.0, cache_modifier=".cg",
                     eviction_policy="evict_last")
    tl.store(dst + offs, value, mask=mask, eviction_policy="evict_first")


@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
def test_eviction_policy_reaches_l1_and_l2(target):
    """Triton's lowering from sm_80: ``.L1::evict_*`` and an L2 policy from ``createpolicy``
    (one per policy, shared by the op's vectors); a cache modifier wins over the policy."""
    compiled = aotk.compile(_evicting_copy, "*fp32:16, *fp32:16, *fp32:16, i32:16",
                            {"BLOCK": 512}, target=target)
    lines = _memory_lines(compiled.ptx)
    for opcode in ("ld.global.L1::evict_first.L2::cache_hint.v4.b32",
                   "ld.global.L1::evict_last.L2::cache_hint.v4.b32",
                   "st.global.L1::evict_first.L2::cache_hint.v4.b32"):
        assert sum(opcode in line for line in lines) == 1, opcode
    assert sum("ld.global.cg.v4.b32" in line for line in lines) == 1
    policies = [l.strip() for l in compiled.ptx.splitlines() if "createpolicy" in l]
    assert [p.split()[0] for p in policies] == ["createpolicy.fractional.L2::evict_first.b64",
                                                "createpolicy.fractional.L2::evict_last.b64"]


def test_eviction_policy_before_sm80_marks_l1_only():
    compiled = aotk.compile(_evicting_copy, "*fp32:16, *fp32:16, *fp32:16, i32:16",
                            {"BLOCK": 512}, target="sm_75")
    lines = _memory_lines(compiled.ptx)
    assert sum("ld.global.L1::evict_first.v4.b32" in line for line in lines) == 1
    assert sum("st.global.L1::evict_first.v4.b32" in line for line in lines) == 1
    assert "createpolicy" not in compiled.ptx and "cache_hint" not in compiled.ptx


def test_llir_is_a_ptx_kernel_reading_thread_ids():
    compiled = aotk.compile(add_kernel, ALIGNED_ADD, {"BLOCK": 1024})
    assert "ptx_kernel" in compiled.llir
    assert "llvm.nvvm.read.ptx.sreg.tid.x" in compiled.llir
    assert "llvm.nvvm.read.ptx.sreg.ctaid.x" in compiled.llir


def _matmul_example():
    """examples/kernels/matmul.py, Triton's tutorial matmul, as a module."""
    return example_module("matmul")


def _k32_matmul(target):
    """The tutorial matmul with Triton's BLOCK_SIZE_K = 32 tile (64-byte rows of A), aligned."""
    return aotk.compile(_matmul_example().matmul_kernel,
                        signature="*fp16:16, *fp16:16, *fp16:16, i32:16, i32:16, i32:16, "
                                  "i32:16, i32:1, i32:16, i32:1, i32:16, i32:1",
                        constants={"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 128,
                                   "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 8, "ACTIVATION": ""},
                        num_warps=8, target=target)


def test_fp16_dot_runs_on_mma_sync():
    """On sm_80 the tutorial matmul's dot is mma.sync m16n8k16 fed by ldmatrix from stages
    that 16-byte cp.async copies fill two trips ahead (num_stages=3), with no spills."""
    kernel = _k32_matmul("sm_80")
    assert "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" in kernel.ptx
    assert "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16" in kernel.ptx
    assert "cp.async.cg.shared.global" in kernel.ptx and ", 16, " in kernel.ptx
    assert "cp.async.wait_group 1;" in kernel.ptx and "cp.async.wait_group 0;" in kernel.ptx
    assert "ld.global" not in kernel.ptx   # both operands arrive through cp.async only
    # The copies use a layout shaped by each tile: no thread holds a replica to skip.
    assert "@p cp.async" not in kernel.ptx
    assert kernel.metadata["spills"] == 0


def _descriptor_bits(leading: int, stride: int, mode: int) -> str:
    """A wgmma descriptor's constant bits as LLVM prints them (signed decimal)."""
    value = ((leading >> 4) << 16) | ((stride >> 4) << 32) | (mode << 62)
    return str(value - (1 << 64) if value >= 1 << 63 else value)


def test_k32_fp16_dot_runs_on_wgmma_with_a_64_byte_swizzle():
    """On sm_90 a BLOCK_SIZE_K = 32 fp16 tile is wgmma's too, as in Triton: A's 64-byte rows
    are read through the 64B swizzle (layout type 2, 8-row groups 512 bytes apart), B's
    [32, 128] N-major tile through the 128B one (panels 32 * 128 bytes apart)."""
    kernel = _k32_matmul("sm_90")
    assert "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16" in kernel.ptx
    assert "mma.sync" not in kernel.ptx and "ldmatrix" not in kernel.ptx
    assert _descriptor_bits(16, 512, 2) in kernel.ptx
    assert _descriptor_bits(32 * 128, 1024, 1) in kernel.ptx
    assert kernel.metadata["spills"] == 0


@pytest.mark.parametrize("name, instruction, target", [
    ("dot-fp32-tf32-64x64x32-trans-b", "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32",
     "sm_80"),
    # B = trans(a tile read along its rows) is stored K-major, which tf32 wgmma reads (Triton
    # 3.8 takes wgmma here too).
    ("dot-fp32-tf32-64x64x32-trans-b", "wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32",
     "sm_90"),
    ("dot-int8-64x32x128-trans-b", "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32", "sm_80"),
    ("dot-int8-64x32x128-trans-b", "wgmma.mma_async.sync.aligned.m64n32k32.s32.s8.s8",
     "sm_90"),
    ("dot-fp16-64x32x128-trans-b", "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", "sm_80"),
    ("dot-fp16-64x32x128-trans-b", "wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16",
     "sm_90"),
])
def test_tf32_int8_and_fp16_dots_use_their_mma_sync(name, instruction, target):
    """Each input type takes its own tensor-core instruction (on sm_90 fp16 takes wgmma,
    B's 32 columns read through the 64B swizzle, and int8 too, as Triton 3.8 does, B stored
    K-major); fp32 with ieee precision does not
    (tensor cores would round its inputs to tf32)."""
    case = next(c for c in CASES if c.name == name)
    args = case.make_args(np.random.default_rng(0))
    compiled = aotk.compile(case.kernel, _signature(case, args), case.constants, num_warps=case.num_warps, target=target)
    assert instruction in compiled.ptx
    assert compiled.metadata["spills"] == 0
    ieee = next(c for c in CASES if c.name == "dot-fp32-ieee-32x32x64")
    args = ieee.make_args(np.random.default_rng(0))
    assert "mma.sync" not in aotk.compile(ieee.kernel, _signature(ieee, args), ieee.constants,
                                          target=target).ptx


MATMUL_ALIGNED = ("*fp16:16, *fp16:16, *fp16:16, i32:16, i32:16, i32:16, i32:16, i32:1, "
                  "i32:16, i32:1, i32:16, i32:1")


@pytest.mark.parametrize("block_n, num_warps, instruction", [
    (256, 8, "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16"),
    (128, 4, "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16"),
])
def test_matmul_on_sm_90_runs_wgmma_from_swizzled_stages(block_n, num_warps, instruction):
    """On sm_90 the tutorial matmul's dot is Hopper's wgmma (so the PTX and cubin target
    sm_90a): operands from 128B-swizzled cp.async stages through the async proxy, one wgmma
    group left in flight across trips and drained after the loop, and nothing that makes
    ptxas serialize the wgmmas."""
    module = _matmul_example()
    constants = {"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": block_n, "BLOCK_SIZE_K": 64,
                 "GROUP_SIZE_M": 8, "ACTIVATION": "leaky_relu"}
    kernel = aotk.compile(module.matmul_kernel, MATMUL_ALIGNED, constants,
                          num_warps=num_warps, target="sm_90")
    ptx = kernel.ptx
    assert ".target sm_90a" in ptx and kernel.metadata["arch"] == "sm_90a"
    assert kernel.cubin[:4] == b"\x7fELF"
    # 2 (or 1 per warpgroup with 8 warps) slices of 64 rows x 4 k16 steps, in the loop.
    assert ptx.count(instruction) == 4 * (128 // (64 * num_warps // 4))
    assert "mma.sync" not in ptx and "ldmatrix" not in ptx
    assert ptx.count("cp.async.cg.shared.global") >= 16 and "ld.global" not in ptx
    assert "fence.proxy.async.shared::cta;" in ptx and "wgmma.fence.sync.aligned;" in ptx
    assert "wgmma.wait_group.sync.aligned 1;" in ptx and "wgmma.wait_group.sync.aligned 0;" in ptx
    assert kernel.metadata["spills"] == 0 and kernel.metadata["wgmma_serialized"] is False
    # sm_80 has no wgmma: the same kernel there is mma.sync from swizzled stages.
    ampere = aotk.compile(module.matmul_kernel, MATMUL_ALIGNED, constants,
                          num_warps=num_warps, target="sm_80")
    assert ".target sm_80" in ampere.ptx and ampere.metadata["arch"] == "sm_80"
    assert "wgmma" not in ampere.ptx and "mma.sync.aligned.m16n8k16" in ampere.ptx
    assert ampere.metadata["spills"] == 0


@pytest.mark.parametrize("activation", ["", "leaky_relu"])
def test_matmul_epilogue_converts_two_accumulators_per_instruction(activation):
    """The fp32 -> fp16 epilogue as Triton emits it: cvt.rn.f16x2.f32, two accumulators an
    instruction (128 a thread: 64). LLVM's vectorizer paired them only sometimes (with the
    activation, not without: 128 cvt.rn.f16.f32 and as many half moves)."""
    constants = {"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 64,
                 "GROUP_SIZE_M": 8, "ACTIVATION": activation}
    kernel = aotk.compile(_matmul_example().matmul_kernel, MATMUL_ALIGNED, constants,
                          num_warps=8, target="sm_90")
    assert kernel.ptx.count("cvt.rn.f16x2.f32") == 64 and "cvt.rn.f16.f32" not in kernel.ptx
    assert "mov.b16" not in kernel.ptx and kernel.metadata["spills"] == 0


@pytest.mark.parametrize("name", [c.name for c in CASES if c.name.endswith("-wgmma")])
def test_dots_wgmma_fits_run_on_wgmma_on_sm_90_only(name):
    """Dots outside pipelined loops too: the threads store the operands into the swizzled
    tiles, fence them for the async proxy, and wait for the wgmma group at once."""
    case = next(c for c in CASES if c.name == name)
    signature = _signature(case, case.make_args(np.random.default_rng(0)))
    hopper = aotk.compile(case.kernel, signature, case.constants, num_warps=case.num_warps, target="sm_90")
    assert "wgmma.mma_async" in hopper.ptx and hopper.metadata["arch"] == "sm_90a"
    assert "fence.proxy.async.shared::cta;" in hopper.ptx
    assert "wgmma.wait_group.sync.aligned 0;" in hopper.ptx
    assert "wgmma.wait_group.sync.aligned 1;" not in hopper.ptx
    assert hopper.metadata["wgmma_serialized"] is False
    ampere = aotk.compile(case.kernel, signature, case.constants, num_warps=case.num_warps, target="sm_80")
    assert "wgmma" not in ampere.ptx and "mma.sync" in ampere.ptx


@pytest.mark.parametrize("name", ["dot-fp16-out-fp16", "dot-fp32-tf32"])
def test_dots_wgmma_cannot_take_stay_on_mma_sync_and_plain_sm_90(name):
    """wgmma wants 64-row warpgroup slices, rows of K and N a swizzle mode reads, and 16-bit
    or int8 inputs (B is stored N-major, which only f16/bf16 wgmma reads; int8's the threads
    store K-major): other dots keep mma.sync,
    and a kernel without Hopper-only instructions stays a plain sm_90 cubin."""
    case = next(c for c in CASES if c.name == name)
    signature = _signature(case, case.make_args(np.random.default_rng(0)))
    compiled = aotk.compile(case.kernel, signature, case.constants, num_warps=case.num_warps, target="sm_90")
    assert "wgmma" not in compiled.ptx and "mma.sync" in compiled.ptx
    assert ".target sm_90\n" in compiled.ptx and compiled.metadata["arch"] == "sm_90"


@pytest.mark.parametrize("activation", ["", "leaky_relu"])
def test_matmul_epilogue_runs_in_the_accumulator_layout(activation):
    """The activation and the cast to fp16 run where the fp32 accumulator lives (the mma
    fragments): only the fp16 tile crosses shared memory on its way to the store."""
    module = _matmul_example()
    kernel = aotk.compile(module.matmul_kernel,
                          signature="*fp16:16, *fp16:16, *fp16:16, i32:16, i32:16, i32:16, "
                                    "i32:16, i32:1, i32:16, i32:1, i32:16, i32:1",
                          constants={"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 128,
                                     "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 8,
                                     "ACTIVATION": activation},
                          num_warps=8, num_stages=1)
    # Rows padded by the blocked layout's 16-byte vector (8 fp16), so that its rows are
    # read 16 bytes at a time (they were 32 single words, rows padded by one word).
    fp16_tile = 128 * (128 + 8) * 2
    assert kernel.metadata["shared"] == fp16_tile
    assert kernel.metadata["spills"] == 0
    assert kernel.ptx.count("ld.shared.v4.b32") == 8 and "ld.shared.b32" not in kernel.ptx


def test_kernel_parameters_are_noundef():
    """A launch passes a defined value for every parameter, and the LLVM IR says so: NVPTX's
    straight-line strength reduction (LLVM 22) asks, for every pair of address computations
    it compares, whether one may be poison, and without ``noundef`` each question walked up
    to the parameters (the generic matmul's SLSR: 47 -> 38 ms, the same PTX)."""
    kernel = aotk.compile(_matmul_example().matmul_kernel,
                          signature="*fp16, *fp16, *fp16, i32, i32, i32, i32, i32, i32, i32, "
                                    "i32, i32",
                          constants={"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 64,
                                     "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 8, "ACTIVATION": ""},
                          num_warps=4, target="sm_90")
    definition = re.search(r"^define ptx_kernel void @\"?matmul_kernel\"?\((.*)\)",
                           kernel.llir, re.MULTILINE).group(1)
    parameters = definition.split(", ")
    assert len(parameters) == 12
    assert all(" noundef " in parameter for parameter in parameters), parameters


def test_asm_register_structs_are_named():
    """A multi-output asm returns a named struct (``%floatx128``), so the LLVM text names it
    at each use instead of listing its fields: the 128x256 wgmma matmul's 768 extractvalues
    of a literal 128-float struct made 1 MB of text (llvmlite printing it, LLVM parsing it:
    186 -> 159 ms of CPU per compile), the same PTX. Each compile's LLVM has a context of its
    own, so the name stays the same in a process's later compiles (in LLVM's global context
    the second one's was %floatx128.0)."""
    from aotk.compiler import forget_machine_code
    for _ in range(2):
        forget_machine_code()
        kernel = aotk.compile(_matmul_example().matmul_kernel,
                              signature="*fp16:16, *fp16:16, *fp16:16, i32:16, i32:16, i32:16, "
                                        "i32:16, i32:1, i32:16, i32:1, i32:16, i32:1",
                              constants={"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 256,
                                         "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 8,
                                         "ACTIVATION": ""},
                              num_warps=8, target="sm_90")
        assert "wgmma.mma_async" in kernel.ptx
        assert "%floatx128 = type {" in kernel.llir
        assert "extractvalue %floatx128 " in kernel.llir
        assert "extractvalue {" not in kernel.llir


def _carried_types(listing):
    line = next(l for l in str(listing).splitlines() if "= for [" in l)
    return line.split(" : ", 1)[1].split(" {")[0]


def test_dot_loops_are_pipelined_through_shared_memory():
    """With num_stages = S > 1 and 16-byte operand vectors, the loop copies trip i+S-1's
    tiles with async_copy into one of S stages and the dot reads trip i's stage; with
    num_stages=1 nothing changes, and the memoized kir (what the interpreter runs) is never
    rewritten."""
    from tests.kernels.dot import matmul_loop_kernel
    signature = "*fp16:16, *fp16:16, *fp16:16, i32:16, i32:16, i32:16"
    constants = {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32}
    pipelined = aotk.compile(matmul_loop_kernel, signature, constants, num_stages=4)
    listing = str(pipelined.kir)
    assert _carried_types(listing) == "fp32[64,64], i32"      # the accumulator, the stage
    assert listing.count("async_copy [") == 2 * 4              # 3 prologue trips + the loop
    assert "async_wait [pending=2" in listing and "async_wait [pending=0]" in listing
    assert listing.count("shared_read [") == 2
    plain = aotk.compile(matmul_loop_kernel, signature, constants, num_stages=1)
    assert _carried_types(plain.kir) == "fp32[64,64]" and "async" not in str(plain.kir)
    assert "async" not in str(matmul_loop_kernel.kir(plain.signature, constants=constants))


def test_dot_loads_too_narrow_for_cp_async_are_prefetched_a_trip_early():
    """Without alignment hints the operands move one element at a time, which cp.async
    cannot copy: the loop carries the next trip's operand tiles in registers instead."""
    from tests.kernels.dot import matmul_loop_kernel
    signature = "*fp16, *fp16, *fp16, i32, i32, i32"
    constants = {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32}
    prefetched = aotk.compile(matmul_loop_kernel, signature, constants, num_stages=3)
    assert _carried_types(prefetched.kir) == "fp32[64,64], fp16[64,32], fp16[32,64]"
    assert "async" not in str(prefetched.kir)


@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
def test_reductions_use_warp_shuffles(target):
    """Rows split over lanes and warps reduce with shfl.sync.bfly and one barrier for the
    partials of the warps. Moving the row results to the store's layout takes none: each
    thread already holds the rows it stores (``backend.lane_plan``; through shared memory
    it took two more barriers). Nothing else synchronizes."""
    from tests.kernels.reductions import reduce_2d_kernel
    for op in ("sum", "max", "argmax"):
        compiled = aotk.compile(reduce_2d_kernel, "*fp32:16, *fp32:16, i32, i32",
                                {"OP": op, "AXIS": 1, "BLOCK_M": 16, "BLOCK_N": 1024},
                                num_warps=8, target=target)
        assert "shfl.sync.bfly.b32" in compiled.ptx, op
        assert compiled.ptx.count("bar.sync") == 1, op


@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
def test_scans_use_shuffle_up_and_down(target):
    from tests.kernels.scans import scan_1d_kernel
    for reverse, mode in ((False, "up"), (True, "down")):
        compiled = aotk.compile(scan_1d_kernel, "*i32:16, *i32:16, i32", {"REVERSE": reverse,
                                "BLOCK": 1024}, target=target)
        assert f"shfl.sync.{mode}.b32" in compiled.ptx


@pytest.mark.parametrize("reverse", [False, True])
def test_a_column_scans_segment_totals_sit_segment_major(reverse):
    """cumsum down the columns of a [64, 64] tile over 2 warps: each thread holds 4 adjacent
    columns, and the segments' totals go through shared memory. Stored [segment][column],
    a thread's 4 totals of one segment are adjacent words (one st.shared.v4) and the lanes
    of a warp touch consecutive words; stored [column][segment], lanes 16 words apart hit
    one bank (fla's chunk_local_cumsum_vector ran at half Triton's speed, L1-bound)."""
    from tests.kernels.scans import scan_2d_kernel
    compiled = aotk.compile(scan_2d_kernel, "*fp32:16, *fp32:16, i32, i32:16",
                            {"OP": "cumsum", "AXIS": 0, "REVERSE": reverse, "BLOCK_M": 64,
                             "BLOCK_N": 64}, num_warps=2, target="sm_90")
    stores = re.findall(r"st\.shared(?:\.\w+)*", compiled.ptx)
    assert stores and all(".v4." in store for store in stores), stores
    assert compiled.metadata["spills"] == 0


@pytest.mark.parametrize("op", ["sum", "argmax"])
def test_a_column_reductions_partials_sit_warp_major(op):
    """A [64, 64] tile summed down its columns over 4 warps: lanes hold different columns,
    4 adjacent ones each. Each warp's partials stored in column order put a thread's 4 in
    one st.shared.v4 and the lanes on consecutive words; column-major (a column's 4
    partials side by side) put lanes 16 words apart: 8-way bank conflicts on each store."""
    from tests.kernels.reductions import reduce_2d_kernel
    compiled = aotk.compile(reduce_2d_kernel, "*fp32:16, *fp32:16, i32, i32:16",
                            {"OP": op, "AXIS": 0, "BLOCK_M": 64, "BLOCK_N": 64},
                            num_warps=4, target="sm_90")
    stores = re.findall(r"st\.shared(?:\.\w+)*", compiled.ptx)
    assert stores and all(".v4." in store for store in stores), stores
