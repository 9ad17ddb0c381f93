"""fp32 dots (tf32 products) on Hopper's ``wgmma`` (``mma_layout.wgmma_fits``): only where
both operands reach it K-major, since tf32 wgmma has no transpose: a pipelined loop stages
A as loaded and B through a transpose, or the threads store B K-major themselves.
Compiled for sm_90 without a GPU (the instruction in the PTX, ptxas's registers and spills
against the mma.sync build of sm_80), run on the interpreter against numpy, and (marked
``gpu``) launched against torch."""
import re

import numpy as np
import pytest

import aotk
from aotk.launch.arguments import specialize
from aotk.tools.tensor_descriptor import TensorDescriptor
from tests.kernels import pipeline_shapes as kernels

TF32_WGMMA = re.compile(r"wgmma\.mma_async\.sync\.aligned\.m64n\d+k8\.f32\.tf32\.tf32 "
                        r"\{[^}]*\}, %rd\d+, %rd\d+, %p\d+, 1, 1;")


def _arguments(name, M, N, K, bm, bn, bk, empty=np.empty, batches=2):
    """(kernel, arguments, grid) of fp32 case ``name`` with [bm, bn, bk] blocks."""
    f32 = np.float32
    a, b, bt, bt2 = empty((M, K), f32), empty((K, N), f32), empty((N, K), f32), \
        empty((N, K), f32)
    grid = (M // bm, N // bn)
    if name == "trans_b":
        return kernels.trans_b_kernel, dict(a_ptr=a, b_ptr=bt, c_ptr=empty((M, N), f32),
                                            M=M, N=N, K=K), grid
    if name == "trans_b_descriptor":
        return kernels.trans_b_descriptor_kernel, dict(
            a_desc=TensorDescriptor.from_tensor(a, [bm, bk]),
            b_desc=TensorDescriptor.from_tensor(bt, [bn, bk]), c_ptr=empty((M, N), f32),
            M=M, N=N, K=K), grid
    if name == "n_major_b":
        return kernels.two_dots_kernel, dict(
            a_ptr=a, b_ptr=b, b2_ptr=empty((K, N), f32), c_ptr=empty((M, N), f32),
            c2_ptr=empty((M, N), f32), M=M, N=N, K=K), grid
    x3 = empty((batches, M, K), f32)
    return kernels.swiglu_kernel, dict(
        x_desc=TensorDescriptor.from_tensor(x3, [1, bm, bk]),
        wg_desc=TensorDescriptor.from_tensor(bt, [bn, bk]),
        wu_desc=TensorDescriptor.from_tensor(bt2, [bn, bk]),
        out_ptr=empty((batches, M, N), f32), S=M, N=N, K=K), grid + (batches,)


def _compile(kernel, arguments, blocks, warps, target="sm_90", stages=3):
    runtime, constants = kernel._split_arguments((), {**arguments, **blocks})
    signature, _ = specialize(kernel, runtime, host_memory=True)
    return aotk.compile(kernel, signature, constants, warps, stages, target=target)


# (BM, BN, BK, warps): Triton-sized fp32 tiles on 4 warps; liger's SwiGLU tile on 8 (two
# warpgroups split N: ``mma_layout.wgmma_warps``); a 128x128 tile on 8.
CONFIGS = [(64, 64, 32, 4), (64, 128, 64, 4), (64, 128, 64, 8), (128, 128, 64, 8)]
# K rows of 64 and 32 bytes: wgmma's 64B and 32B swizzles (TMA boxes want 128).
NARROW_CONFIGS = [(64, 64, 16, 4), (64, 64, 8, 4)]


@pytest.mark.parametrize("config", CONFIGS + NARROW_CONFIGS, ids=lambda c: "x".join(map(str, c)))
@pytest.mark.parametrize("name", ["trans_b", "trans_b_descriptor", "swiglu"])
def test_a_staged_transposed_b_runs_on_tf32_wgmma(name, config):
    bm, bn, bk, warps = config
    blocks = dict(BM=bm, BN=bn, BK=bk)
    kernel, arguments, _ = _arguments(name, 512, 512, 512, bm, bn, bk)
    compiled = _compile(kernel, arguments, blocks, warps)
    ptx = compiled.ptx
    if name == "swiglu" and bm == 128:
        # Three 32 KB tiles and two TMA mbarriers (8 bytes, one per dot's tiles) per stage:
        # two stages take the whole block's budget (``compiler.whole_block_budget``;
        # tests/test_pipeline_budget.py).
        assert compiled.metadata["shared"] == 2 * (3 * 32768 + 2 * 8)
    assert TF32_WGMMA.search(ptx), "no tf32 wgmma without imm-trans operands"
    assert "mma.sync" not in ptx
    # Descriptor operands are TMA copies where their rows are 128 bytes (the only box
    # swizzle aotk's tensor maps use); liger's [1, BM, BK] input block a 3-d one.
    tma = bk * 4 % 128 == 0
    assert ("cp.async.bulk.tensor.2d" in ptx) == (name != "trans_b" and tma)
    assert ("cp.async.bulk.tensor.3d" in ptx) == (name == "swiglu" and tma)
    # ptxas's count against the same kernel on sm_80's mma.sync (equal at 64x64x8 since
    # SwiGLU's fp32 output is stored from the fragments on both: 96).
    mma_sync = _compile(kernel, arguments, blocks, warps, target="sm_80").metadata
    metadata = compiled.metadata
    assert metadata["spills"] == 0, metadata
    assert metadata["registers"] <= mma_sync["registers"] or \
        mma_sync["spills"] > 0, (metadata, mma_sync)


def test_an_n_major_b_stays_on_mma_sync():
    """B staged [K, N] is N-major, which tf32 wgmma cannot read."""
    kernel, arguments, _ = _arguments("n_major_b", 512, 512, 512, 64, 64, 32)
    ptx = _compile(kernel, arguments, dict(BM=64, BN=64, BK=32), 4).ptx
    assert "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32" in ptx
    assert "wgmma" not in ptx


@pytest.mark.parametrize("precision", ["ieee", "tf32x3"])
def test_other_input_precisions_stay_off_wgmma(precision):
    """ieee and tf32x3 keep their CUDA-core products: one tf32 product each is too coarse."""
    f32 = np.float32
    arguments = dict(a_ptr=np.empty((256, 256), f32), b_ptr=np.empty((256, 256), f32),
                     c_ptr=np.empty((256, 256), f32), M=256, N=256, K=256)
    blocks = dict(BM=64, BN=64, BK=32, PRECISION=precision)
    ptx = _compile(kernels.trans_b_kernel, arguments, blocks, 4).ptx
    assert "wgmma" not in ptx and "mma.sync" not in ptx
    tf32 = _compile(kernels.trans_b_kernel, arguments, {**blocks, "PRECISION": "tf32"}, 4)
    assert TF32_WGMMA.search(tf32.ptx)


def test_two_warpgroups_split_n_of_a_64_row_tile():
    """64 rows on 8 warps: each warpgroup computes half of N (m64n64 for N = 128)."""
    kernel, arguments, _ = _arguments("swiglu", 512, 512, 512, 64, 128, 64)
    compiled = _compile(kernel, arguments, dict(BM=64, BN=128, BK=64), 8)
    instructions = TF32_WGMMA.findall(compiled.ptx)
    assert instructions and all(".m64n64k8." in i for i in instructions)
    assert compiled.metadata["spills"] == 0


def test_the_k_steps_move_32_bytes():
    """BK = 64 fp32 is two 128-byte panels of four k8 steps each: eight instructions per
    trip, one chain over K per accumulator."""
    kernel, arguments, _ = _arguments("trans_b_descriptor", 512, 512, 512, 64, 128, 64)
    ptx = _compile(kernel, arguments, dict(BM=64, BN=128, BK=64), 4).ptx
    assert len(TF32_WGMMA.findall(ptx)) == 64 // 8


def _reference(name, arguments):
    """(output, expected fp32 values) per output of an fp32 case, in float64 numpy."""
    base = lambda key: (arguments[key].base if isinstance(arguments[key], TensorDescriptor)   # noqa: E731
                        else arguments[key]).astype(np.float64)
    if name == "trans_b":
        return [(arguments["c_ptr"], base("a_ptr") @ base("b_ptr").T)]
    if name == "trans_b_descriptor":
        return [(arguments["c_ptr"], base("a_desc") @ base("b_desc").T)]
    gate = base("x_desc") @ base("wg_desc").T
    up = base("x_desc") @ base("wu_desc").T
    return [(arguments["out_ptr"], gate / (1 + np.exp(-gate)) * up)]


def _inputs(arguments, outputs):
    written = {id(out) for out, _ in outputs}
    for value in arguments.values():
        array = value.base if isinstance(value, TensorDescriptor) else value
        if hasattr(array, "shape") and id(array) not in written:
            yield array


@pytest.mark.parametrize("name", ["trans_b", "trans_b_descriptor", "swiglu"])
def test_the_interpreter_matches_numpy(name, monkeypatch):
    monkeypatch.setenv("AOTK_INTERPRET", "1")
    rng = np.random.default_rng(0)
    kernel, arguments, grid = _arguments(name, 128, 128, 128, 64, 64, 32, empty=np.zeros)
    for array in _inputs(arguments, _reference(name, arguments)):
        array[...] = rng.standard_normal(array.shape).astype(np.float32) / 4
    kernel[grid](**arguments, BM=64, BN=64, BK=32)
    for out, expected in _reference(name, arguments):
        np.testing.assert_allclose(out, expected, rtol=2e-2, atol=2e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("config", CONFIGS[:3] + NARROW_CONFIGS,
                         ids=lambda c: "x".join(map(str, c)))
@pytest.mark.parametrize("name", ["trans_b", "trans_b_descriptor", "swiglu"])
def test_the_gpu_matches_torch(name, config):
    """Several tiles and 8 K trips (stages wrap, the last groups drain); the kernel is the
    one whose sm_90 PTX has tf32 wgmma. Reference: fp32 torch (tf32 off); tolerance of
    tf32 products (10 mantissa bits) summed over K."""
    torch = pytest.importorskip("torch")
    bm, bn, bk, warps = config
    M, N, K = 3 * bm, 2 * bn, 8 * bk
    empty = lambda shape, _: torch.empty(shape, dtype=torch.float32, device="cuda")   # noqa: E731
    kernel, arguments, grid = _arguments(name, M, N, K, bm, bn, bk, empty=empty)
    blocks = dict(BM=bm, BN=bn, BK=bk)
    _, host_arguments, _ = _arguments(name, M, N, K, bm, bn, bk)
    assert TF32_WGMMA.search(_compile(kernel, host_arguments, blocks, warps).ptx)
    generator = torch.Generator(device="cuda").manual_seed(0)
    outputs = _torch_reference(torch, name, arguments)
    written = {id(out) for out, _ in outputs}
    for value in arguments.values():
        tensor = value.base if isinstance(value, TensorDescriptor) else value
        if not hasattr(tensor, "is_cuda"):
            continue
        if id(tensor) in written:
            tensor.fill_(float("nan"))
        else:
            tensor.copy_(torch.randn(tensor.shape, generator=generator, device="cuda") / 4)
    kernel[grid](**arguments, **blocks, num_warps=warps, num_stages=3)
    torch.cuda.synchronize()
    for out, expected in _torch_reference(torch, name, arguments):
        torch.testing.assert_close(out, expected(), rtol=2e-2, atol=3e-2)


def _torch_reference(torch, name, arguments):
    """(output, a function giving its expected values) per output; the function runs after
    the inputs are filled, in fp32 with tf32 off."""
    torch.backends.cuda.matmul.allow_tf32 = False
    base = lambda key: (arguments[key].base if isinstance(arguments[key], TensorDescriptor)   # noqa: E731
                        else arguments[key])
    if name == "trans_b":
        return [(arguments["c_ptr"], lambda: base("a_ptr") @ base("b_ptr").T)]
    if name == "trans_b_descriptor":
        return [(arguments["c_ptr"], lambda: base("a_desc") @ base("b_desc").T)]

    def swiglu():
        gate = torch.matmul(base("x_desc"), base("wg_desc").T)
        return torch.nn.functional.silu(gate) * torch.matmul(base("x_desc"), base("wu_desc").T)
    return [(arguments["out_ptr"], swiglu)]


@aotk.jit
def _register_operands_kernel(a_ptr, b_ptr, x_ptr, c_ptr, d_ptr, M: aotk.language.constexpr,
                              N: aotk.language.constexpr, K: aotk.language.constexpr):
    """No loop, so nothing is staged: both dots' operands come from registers, the threads
    store them. c = a @ (2 b), B read [K, N] along its rows (N-major); d = x^T @ g, the
    transpose of a tile read along its rows as A and a product as B (liger's mhc backward:
    dphi = x^T @ grad_z)."""
    tl = aotk.language
    rm, rn, rk = tl.arange(0, M), tl.arange(0, N), tl.arange(0, K)
    a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * N + rn[None, :]) * 2.0
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], tl.dot(a, b))
    x = tl.load(x_ptr + rk[:, None] * M + rm[None, :])       # [K, M]: x^T is [M, K]
    g = tl.load(b_ptr + rk[:, None] * N + rn[None, :]) * 0.5
    tl.store(d_ptr + rm[:, None] * N + rn[None, :], tl.dot(tl.trans(x), g))


def _register_operands_arguments(empty, M=128, N=64, K=32):
    f32 = np.float32
    return dict(a_ptr=empty((M, K), f32), b_ptr=empty((K, N), f32), x_ptr=empty((K, M), f32),
                c_ptr=empty((M, N), f32), d_ptr=empty((M, N), f32), M=M, N=N, K=K)


def test_operands_the_threads_store_run_on_tf32_wgmma():
    """A B that no loop staged is stored by the threads K-major (as an int8 B is), so tf32
    wgmma reads it whatever its layout; an A they store goes K-major, row by row. liger's
    mhc backward (its x^T @ grad_z) spilled 72 bytes on mma.sync, 24 now (Triton: wgmma
    too, none)."""
    arguments = _register_operands_arguments(np.empty)
    runtime, constants = _register_operands_kernel._split_arguments((), arguments)
    signature, _ = specialize(_register_operands_kernel, runtime, host_memory=True)
    compiled = aotk.compile(_register_operands_kernel, signature, constants, 4, 3,
                            target="sm_90")
    assert len(TF32_WGMMA.findall(compiled.ptx)) == 2 * 2 * (32 // 8)   # 2 dots, M 128, k8
    assert "mma.sync" not in compiled.ptx
    assert compiled.metadata["spills"] == 0


@pytest.mark.gpu
def test_operands_the_threads_store_match_torch_on_the_gpu():
    torch = pytest.importorskip("torch")
    torch.backends.cuda.matmul.allow_tf32 = False
    empty = lambda shape, _: torch.randn(shape, device="cuda") / 4   # noqa: E731
    arguments = _register_operands_arguments(empty)
    arguments["c_ptr"].fill_(float("nan"))
    arguments["d_ptr"].fill_(float("nan"))
    _register_operands_kernel[(1,)](**arguments, num_warps=4)
    torch.cuda.synchronize()
    a, b, x = arguments["a_ptr"], arguments["b_ptr"], arguments["x_ptr"]
    torch.testing.assert_close(arguments["c_ptr"], a @ (2 * b), rtol=2e-2, atol=3e-2)
    torch.testing.assert_close(arguments["d_ptr"], x.T @ (0.5 * b), rtol=2e-2, atol=3e-2)


def test_operands_the_threads_store_on_the_interpreter(monkeypatch):
    monkeypatch.setenv("AOTK_INTERPRET", "1")
    rng = np.random.default_rng(0)
    arguments = _register_operands_arguments(
        lambda shape, dtype: (rng.standard_normal(shape) / 4).astype(dtype))
    _register_operands_kernel[(1,)](**arguments)
    a, b, x = (arguments[k].astype(np.float64) for k in ("a_ptr", "b_ptr", "x_ptr"))
    np.testing.assert_allclose(arguments["c_ptr"], a @ (2 * b), rtol=2e-2, atol=2e-2)
    np.testing.assert_allclose(arguments["d_ptr"], x.T @ (0.5 * b), rtol=2e-2, atol=2e-2)


@aotk.jit
def _chained_dots_kernel(a_ptr, b_ptr, c_ptr, M: aotk.language.constexpr,
                         N: aotk.language.constexpr):
    """p = a @ b, then p @ b: the second dot's A is the first's result."""
    tl = aotk.language
    rm, rn = tl.arange(0, M), tl.arange(0, N)
    a = tl.load(a_ptr + rm[:, None] * N + rn[None, :])
    b = tl.load(b_ptr + rn[:, None] * N + rn[None, :])
    p = tl.where(rm[:, None] >= rn[None, :], tl.dot(a, b), 0.0)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], tl.dot(p, b))


def test_a_dot_whose_a_is_another_dots_result_keeps_it_in_registers():
    """mma.sync takes that A from the registers it was computed in; tf32 wgmma would read it
    from shared memory (fla's chunk_fwd_kernel_o: 217 registers there, 165 so)."""
    f32 = np.float32
    arguments = dict(a_ptr=np.empty((64, 64), f32), b_ptr=np.empty((64, 64), f32),
                     c_ptr=np.empty((64, 64), f32), M=64, N=64)
    runtime, constants = _chained_dots_kernel._split_arguments((), arguments)
    signature, _ = specialize(_chained_dots_kernel, runtime, host_memory=True)
    ptx = aotk.compile(_chained_dots_kernel, signature, constants, 4, 3, target="sm_90").ptx
    assert len(TF32_WGMMA.findall(ptx)) == 64 // 8          # the first dot
    assert "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32" in ptx   # the second
