"""How much shared memory a dot pipeline's stages may take (``compiler.whole_block_budget``
and ``pipeline_budget``).

The stages may take the whole block: what runs after the loop reuses their bytes (the
drain comes first), so only shared memory the loop body itself needs can push the kernel
past the block limit. Then the compiler builds it again with the stages keeping
``PIPELINE_RESERVE`` free, as every kernel was built before. On an H100/H200 (227 KB a
block) that gives two 96 KB stages to liger's fused SwiGLU in fp32 at 128x128x64 and to two
dots sharing a tile in fp16 at 128x128x128 (Triton takes 196,640 bytes for the former),
four 48 KB stages to the latter at 128x128x64; a 99 KB GPU (sm_86) keeps what it had.
Compiled without a GPU; the kernels that gained stages run against torch (``gpu``).
"""
import re

import numpy as np
import pytest

import aotk
from aotk import compiler
from aotk.ir.signature import Signature
from aotk.launch.arguments import specialize
from aotk.tools.tensor_descriptor import TensorDescriptor
from tests.kernels import pipeline_shapes as kernels

TWO_DOTS_SIGNATURE = "*fp16:16, *fp16:16, *fp16:16, *fp32:16, *fp32:16, i32:16, i32:16, i32:16"


def _two_dots(target, tiles, num_stages):
    signature = Signature.parse(TWO_DOTS_SIGNATURE, kernels.two_dots_kernel.runtime_names)
    return aotk.compile(kernels.two_dots_kernel, signature, tiles, 8, num_stages,
                        target=target)


TILES_128x128x64 = dict(BM=128, BN=128, BK=64)
# The epilogue's conversion of a 128x128 fp32 accumulator: rows padded by 8 words, for the
# fragments' 8-byte stores (``backend.shared``).
CONVERSION_BYTES = 128 * (128 + 8) * 4


def _swiglu_arguments(empty, S=512, N=512, K=512):
    """liger's SwiGLU forward at 128x128x64: x [2, S, K], both weights [N, K], out
    [2, S, N], each from ``empty(shape)``."""
    x, gate, up, out = empty((2, S, K)), empty((N, K)), empty((N, K)), empty((2, S, N))
    return dict(x_desc=TensorDescriptor.from_tensor(x, [1, 128, 64]),
                wg_desc=TensorDescriptor.from_tensor(gate, [128, 64]),
                wu_desc=TensorDescriptor.from_tensor(up, [128, 64]), out_ptr=out,
                S=S, N=N, K=K)


def _swiglu(target, num_stages, out=np.float32):
    """liger's SwiGLU forward in fp32 at 128x128x64 on 8 warps (its output in ``out``)."""
    kernel = kernels.swiglu_kernel
    arguments = _swiglu_arguments(lambda shape: np.empty(shape, np.float32))
    arguments["out_ptr"] = np.empty(arguments["out_ptr"].shape, out)
    runtime, constants = kernel._split_arguments((), {**arguments, **TILES_128x128x64})
    signature, _ = specialize(kernel, runtime, host_memory=True)
    return aotk.compile(kernel, signature, constants, 8, num_stages, target=target)


@pytest.fixture
def reserved_budget(monkeypatch):
    """Builds as before: the stages keep ``PIPELINE_RESERVE`` free on every target."""
    monkeypatch.setattr(compiler, "whole_block_budget", compiler.pipeline_budget)


def test_the_budgets():
    assert compiler.whole_block_budget("sm_90") == 232448
    assert compiler.whole_block_budget("sm_90a") == 232448
    assert compiler.pipeline_budget("sm_90") == 160 * 1024
    assert compiler.whole_block_budget("sm_86") == 101376
    assert compiler.pipeline_budget("sm_86") == 101376 - compiler.PIPELINE_RESERVE


def _in_loop_wait(ptx):
    """The ``cp.async.wait_group N`` inside the loop: N = stages - 2 (0 also drains)."""
    return max(int(n) for n in re.findall(r"cp\.async\.wait_group (\d+);", ptx))


@pytest.mark.parametrize("tiles, num_stages, gained, before", [
    # Not pipelined before: the operand tiles only (the fp32 accumulators are stored from
    # their fragments, ``layout_demands._store``; with their conversion: CONVERSION_BYTES).
    (dict(BM=128, BN=128, BK=128), 2, 2 * 3 * 32768, 66560),
    (dict(BM=128, BN=128, BK=64), 4, 4 * 3 * 16384, 3 * 3 * 16384),
])
def test_two_dots_gain_stages_on_sm_90(tiles, num_stages, gained, before, request):
    compiled = _two_dots("sm_90", tiles, num_stages)
    metadata, ptx = compiled.metadata, compiled.ptx
    # The epilogue's conversion of the accumulators reuses the stages' bytes.
    assert metadata["shared"] == gained
    assert "wgmma.mma_async" in ptx and "cp.async.cg.shared.global" in ptx
    assert _in_loop_wait(ptx) == num_stages - 2
    assert metadata["spills"] == 0
    request.getfixturevalue("reserved_budget")
    assert _two_dots("sm_90", tiles, num_stages).metadata["shared"] == before


def test_swiglu_fp32_gains_two_stages_on_sm_90(request):
    compiled = _swiglu("sm_90", 3)
    ptx = compiled.ptx
    # Its fp32 output is stored from the accumulators' fragments: no shared memory after
    # the loop. A 16-bit output is converted through shared memory (checked below).
    lines = ptx.splitlines()
    last_copy = max(i for i, line in enumerate(lines) if "cp.async.bulk.tensor" in line)
    assert not any("st.shared" in line for line in lines[last_copy:])
    ptx = _swiglu("sm_90", 3, out=np.float16).ptx
    # Three 128x64 fp32 tiles (x, both weights) and two TMA mbarriers a stage (x and the
    # gate's weights for the first dot, the up weights for the second), two stages:
    # Triton's 196,640 bytes.
    assert compiled.metadata["shared"] == 2 * (3 * 32768 + 2 * 8)
    assert compiled.metadata["arch"] == "sm_90a" and "wgmma.mma_async" in ptx
    assert "cp.async.bulk.tensor.3d" in ptx and compiled.metadata["spills"] == 0
    # The epilogue reuses the stages' bytes only after the copies are released.
    lines = ptx.splitlines()
    last_copy = max(i for i, line in enumerate(lines) if "cp.async.bulk.tensor" in line)
    release = min(i for i, line in enumerate(lines) if i > last_copy and
                  "mbarrier.inval" in line)
    epilogue = [i for i, line in enumerate(lines) if i > last_copy and "st.shared" in line]
    assert epilogue and release < epilogue[0]
    request.getfixturevalue("reserved_budget")
    before = _swiglu("sm_90", 3)
    # Unpipelined: no copies; the weight tiles, transposed, are still stored K-major from
    # their rows, which tf32 wgmma reads.
    assert "cp.async" not in before.ptx and "wgmma.mma_async" in before.ptx


@pytest.mark.parametrize("build", ["two_dots_128", "two_dots_64_s4", "swiglu"])
def test_a_99_kb_gpu_keeps_its_build(build, monkeypatch):
    def compile_for_sm_86():
        if build == "swiglu":
            return _swiglu("sm_86", 3)
        bk, stages = (128, 2) if build == "two_dots_128" else (64, 4)
        return _two_dots("sm_86", dict(BM=128, BN=128, BK=bk), stages)

    now = compile_for_sm_86()
    monkeypatch.setattr(compiler, "whole_block_budget", compiler.pipeline_budget)
    assert now.ptx == compile_for_sm_86().ptx


def _converting(tiles, budgets, monkeypatch):
    """Compiles ``two_dots_kernel`` converting in its loop for sm_90, noting each run's
    budget."""
    lower = compiler._lower

    def noting(generated, options, target, budget):
        budgets.append(budget)
        return lower(generated, options, target, budget)

    monkeypatch.setattr(compiler, "_lower", noting)
    signature = Signature.parse(TWO_DOTS_SIGNATURE, kernels.two_dots_kernel.runtime_names)
    return aotk.compile(kernels.two_dots_kernel, signature,
                        {**tiles, "CONVERT_IN_LOOP": True}, 8, 3, target="sm_90")


def test_stages_that_leave_too_little_for_the_loop_keep_the_reserve(monkeypatch):
    """Two 96 KB stages and the 68 KB conversion exceed 227 KB: the second run keeps the
    reserve, where 96 KB stages do not fit at all (no pipeline, as before)."""
    budgets = []
    compiled = _converting(dict(BM=128, BN=128, BK=128), budgets, monkeypatch)
    assert budgets == [compiler.whole_block_budget("sm_90"), compiler.pipeline_budget("sm_90")]
    # The unpipelined loop keeps x's [128, 128] fp16 tile, which both dots read, below the
    # conversion of acc (backend.operand_tiles).
    assert compiled.metadata["shared"] == 128 * 128 * 2 + CONVERSION_BYTES
    assert "cp.async" not in compiled.ptx
    monkeypatch.setattr(compiler, "whole_block_budget", compiler.pipeline_budget)
    before = _converting(dict(BM=128, BN=128, BK=128), [], monkeypatch)
    assert compiled.ptx == before.ptx


def test_no_second_run_when_the_stages_fit_the_reserved_budget(monkeypatch):
    """Three 48 KB stages (144 KB, within 160 KB) and the conversion above them: one run."""
    budgets = []
    compiled = _converting(dict(BM=128, BN=128, BK=64), budgets, monkeypatch)
    assert budgets == [compiler.whole_block_budget("sm_90")]
    assert compiled.metadata["shared"] == 3 * 3 * 16384 + CONVERSION_BYTES


def test_stages_give_way_to_what_the_loop_body_needs(monkeypatch):
    """On an A100 (163 KB) the 144 KB stages and the 68 KB conversion do not fit with the
    reserve either, nor do two 48 KB stages: a third run gives the stages only what the
    body leaves, and the loop runs unpipelined, saying why."""
    signature = Signature.parse(TWO_DOTS_SIGNATURE, kernels.two_dots_kernel.runtime_names)
    compiled = aotk.compile(kernels.two_dots_kernel, signature,
                            dict(BM=128, BN=128, BK=64, CONVERT_IN_LOOP=True), 8, 3,
                            target="sm_80")
    # x's [128, 64] fp16 tile, read by both dots, stays below the conversion of acc.
    assert compiled.metadata["shared"] == 128 * 64 * 2 + CONVERSION_BYTES
    assert "not_pipelined='2 stages take 98304 bytes of shared memory, over the 97280" in \
        compiled.asm["gir"]


def test_a_kernel_too_large_either_way_names_the_limit(monkeypatch):
    """A [256, 256] accumulator's conversion alone exceeds an A100's block: the error says
    what the kernel needs and what the target allows."""
    signature = Signature.parse(TWO_DOTS_SIGNATURE, kernels.two_dots_kernel.runtime_names)
    with pytest.raises(aotk.CompilationError, match="may use at most 166912"):
        aotk.compile(kernels.two_dots_kernel, signature,
                     dict(BM=256, BN=256, BK=32, CONVERT_IN_LOOP=True), 8, 3, target="sm_80")
