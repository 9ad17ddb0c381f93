"""Dot loops pipelined beyond one dot of two plain loads (``rewrite.dot_operand_loads``,
``passes.pipeline``): two dots sharing a tile, a transposed B, a 3-d descriptor tile
reshaped to 2-d, and liger's fused SwiGLU forward with all three. Compiled for sm_80 and
sm_90 without a GPU (the operand tiles arrive by cp.async or TMA, none by ld.global;
registers without spills), run on the interpreter against numpy, and (marked ``gpu``)
launched against torch."""
import re

import numpy as np
import pytest

import aotk
from aotk.launch.arguments import specialize
from aotk.tools.tensor_descriptor import TensorDescriptor
from tests.kernels import pipeline_shapes as kernels

TARGETS = ("sm_80", "sm_90")
DTYPES = (np.float16, np.float32)


def _blocks(dtype):
    """Triton-sized tiles: fp16 128x128x64 on 8 warps, fp32 (tf32) 64x64x32 on 4."""
    if dtype == np.float16:
        return dict(BM=128, BN=128, BK=64), 8
    return dict(BM=64, BN=64, BK=32), 4


def _cases(dtype, M, N, K, batches=2, empty=np.empty):
    """(name, kernel, arguments, grid, reference) per kernel: the reference computes the
    outputs from the inputs (filled by the caller) after the launch."""
    blocks, _ = _blocks(dtype)
    a, b, bt = empty((M, K), dtype), empty((K, N), dtype), empty((N, K), dtype)
    b2, bt2 = empty((K, N), dtype), empty((N, K), dtype)
    x3 = empty((batches, M, K), dtype)
    c, c2 = empty((M, N), np.float32), empty((M, N), np.float32)
    c3, out = empty((batches, M, N), np.float32), empty((batches, M, N), dtype)
    bm, bn, bk = blocks["BM"], blocks["BN"], blocks["BK"]
    grid = (M // bm, N // bn)
    grid3 = grid + (batches,)
    f32 = lambda v: v.astype(np.float32)   # noqa: E731
    silu = lambda v: v / (1 + np.exp(-v))   # noqa: E731
    return [
        ("two_dots", kernels.two_dots_kernel,
         dict(a_ptr=a, b_ptr=b, b2_ptr=b2, c_ptr=c, c2_ptr=c2, M=M, N=N, K=K), grid,
         lambda: [(c, f32(a) @ f32(b)), (c2, f32(a) @ f32(b2))]),
        ("trans_b", kernels.trans_b_kernel, dict(a_ptr=a, b_ptr=bt, c_ptr=c, M=M, N=N, K=K),
         grid, lambda: [(c, f32(a) @ f32(bt).T)]),
        ("trans_b_descriptor", kernels.trans_b_descriptor_kernel,
         dict(a_desc=TensorDescriptor.from_tensor(a, [bm, bk]),
              b_desc=TensorDescriptor.from_tensor(bt, [bn, bk]), c_ptr=c, M=M, N=N, K=K),
         grid, lambda: [(c, f32(a) @ f32(bt).T)]),
        ("reshape_3d", kernels.reshape_3d_kernel,
         dict(x_desc=TensorDescriptor.from_tensor(x3, [1, bm, bk]),
              w_desc=TensorDescriptor.from_tensor(b, [bk, bn]), c_ptr=c3, S=M, N=N, K=K),
         grid3, lambda: [(c3, f32(x3) @ f32(b))]),
        ("reshape_3d_device_descriptor", kernels.reshape_3d_device_descriptor_kernel,
         dict(x_ptr=x3, w_ptr=b, c_ptr=c3, B=batches, S=M, N=N, K=K), grid3,
         lambda: [(c3, f32(x3) @ f32(b))]),
        ("swiglu", kernels.swiglu_kernel,
         dict(x_desc=TensorDescriptor.from_tensor(x3, [1, bm, bk]),
              wg_desc=TensorDescriptor.from_tensor(bt, [bn, bk]),
              wu_desc=TensorDescriptor.from_tensor(bt2, [bn, bk]), out_ptr=out,
              S=M, N=N, K=K), grid3,
         lambda: [(out, silu(f32(x3) @ f32(bt).T) * (f32(x3) @ f32(bt2).T))]),
    ]


CASE_NAMES = [case[0] for case in _cases(np.float32, 64, 64, 64)]


def _compile(kernel, arguments, dtype, target):
    blocks, warps = _blocks(dtype)
    runtime, constants = kernel._split_arguments((), {**arguments, **blocks})
    signature, _ = specialize(kernel, runtime, host_memory=True)
    return aotk.compile(kernel, signature, constants, warps, 3, target=target)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", DTYPES, ids=["fp16", "fp32"])
@pytest.mark.parametrize("name", CASE_NAMES)
def test_the_loop_is_pipelined(name, dtype, target):
    _, kernel, arguments, _, _ = next(c for c in _cases(dtype, 512, 512, 512) if c[0] == name)
    compiled = _compile(kernel, arguments, dtype, target)
    ptx = compiled.ptx
    tma = "cp.async.bulk.tensor.2d" in ptx
    assert tma or re.search(r"cp\.async\.cg\.shared\.global", ptx)
    assert "cp.async.wait_group" in ptx or "mbarrier.try_wait" in ptx
    # Every operand tile arrives by cp.async / TMA; the epilogue only stores.
    assert "ld.global" not in ptx
    # fp32 (tf32) dots take wgmma only with B staged K-major: the transposed-B kernels.
    k_major_b = name in ("trans_b", "trans_b_descriptor", "swiglu")
    wgmma = target == "sm_90" and (dtype == np.float16 or k_major_b)
    assert ("wgmma.mma_async" in ptx) == wgmma and ("mma.sync" in ptx) == (not wgmma)
    # TMA on sm_90 where every tile is a load of a host descriptor, whether wgmma or
    # mma.sync (ldmatrix) reads it, as in Triton; a [1, BM, BK] block of a 3-d one through
    # a 3-d tensor map.
    host_descriptors = name in ("trans_b_descriptor", "reshape_3d", "swiglu")
    assert tma == (target == "sm_90" and host_descriptors)
    assert ("cp.async.bulk.tensor.3d" in ptx) == (tma and name != "trans_b_descriptor")
    metadata = compiled.metadata
    assert metadata["spills"] == 0, metadata
    # Two 128x128 fp32 accumulators of mma.sync on 8 warps take Triton all 255 registers
    # (and 572 bytes of spills, Triton 3.8 on two_dots, sm_80).
    full = target == "sm_80" and dtype == np.float16 and name in ("two_dots", "swiglu")
    assert full or metadata["registers"] < 255, metadata


def test_a_transposed_b_is_read_k_major():
    """The stage holds B as loaded, [N, K]: mma.sync reads it with plain ldmatrix (no
    .trans), wgmma through a K-major descriptor (imm-trans-b 0)."""
    _, kernel, arguments, _, _ = _cases(np.float16, 512, 512, 512)[1]
    sm80 = _compile(kernel, arguments, np.float16, "sm_80").ptx
    assert "ldmatrix.sync.aligned.m8n8.x4.shared.b16" in sm80
    assert "ldmatrix.sync.aligned.m8n8.x4.trans" not in sm80
    sm90 = _compile(kernel, arguments, np.float16, "sm_90").ptx
    assert re.search(r"wgmma\.mma_async[^;]*, 1, 1, 0, 0;", sm90)
    assert not re.search(r"wgmma\.mma_async[^;]*, 1, 1, 0, 1;", sm90)


def test_two_dots_keep_both_wgmma_groups_in_flight():
    """Each trip commits two groups, the second right after the first; one wait after the
    second, until two are left (this trip's), retires the previous trip's, and one barrier
    then frees their stages, as Triton orders it. Before, the first dot waited too, so the
    second's group waited for the previous trip's first (liger's SwiGLU MLP forward, the
    same configuration on both sides: 0.93x Triton's time on an H200)."""
    _, kernel, arguments, _, _ = _cases(np.float16, 512, 512, 512)[0]
    compiled = _compile(kernel, arguments, np.float16, "sm_90")
    loop = compiled.ptx[:compiled.ptx.index("wgmma.wait_group.sync.aligned 0;")]
    commits = [m.start() for m in re.finditer(r"wgmma\.commit_group", loop)]
    waits = [m.start() for m in re.finditer(r"wgmma\.wait_group\.sync\.aligned 2;", loop)]
    assert len(commits) == 2 and len(waits) == 1 and commits[1] < waits[0]
    assert "wgmma.wait_group.sync.aligned 1;" not in compiled.ptx
    assert loop[waits[0]:].count("bar.sync") == 1
    assert not compiled.metadata.get("wgmma_serialized")


@pytest.mark.parametrize("warps", [4, 8])
def test_the_warpgroup_is_the_same_across_each_warp(warps):
    """With two warpgroups, each one's A descriptor starts 64 rows further. The warpgroup
    is broadcast from lane 0 (``shfl.sync.idx``, once, before the loop), which ptxas knows
    is the same across the warp: the descriptors stay in uniform registers. Computed as
    tid / 128 they were moved there before each wgmma (R2UR; this 8-warp loop ran 102
    SASS instructions a trip, 8 of them R2UR, now 90). One warpgroup: 0, no shuffle."""
    _, kernel, arguments, _, _ = _cases(np.float16, 512, 512, 512)[0]
    runtime, constants = kernel._split_arguments((), {**arguments, **_blocks(np.float16)[0]})
    signature, _ = specialize(kernel, runtime, host_memory=True)
    ptx = aotk.compile(kernel, signature, constants, warps, 3, target="sm_90").ptx
    assert ptx.count("shfl.sync.idx") == (warps > 4)
    if warps > 4:
        assert ptx.index("shfl.sync.idx") < ptx.index("wgmma.mma_async")


def _fill(arrays, rng):
    for array in arrays:
        array[...] = rng.standard_normal(array.shape).astype(array.dtype) / 4


@pytest.mark.parametrize("dtype", DTYPES, ids=["fp16", "fp32"])
@pytest.mark.parametrize("name", CASE_NAMES)
def test_the_interpreter_matches_numpy(name, dtype, monkeypatch):
    monkeypatch.setenv("AOTK_INTERPRET", "1")
    rng = np.random.default_rng(0)
    M, N, K = 2 * _blocks(dtype)[0]["BM"], 2 * _blocks(dtype)[0]["BN"], 128
    _, kernel, arguments, grid, reference = next(
        c for c in _cases(dtype, M, N, K, empty=np.zeros) if c[0] == name)
    outputs = {id(out) for out, _ in reference()}
    inputs = {id(a): a for a in _arrays(arguments) if id(a) not in outputs}
    _fill(inputs.values(), rng)
    kernel[grid](**arguments, **_blocks(dtype)[0])
    for out, expected in reference():
        np.testing.assert_allclose(out.astype(np.float32), expected, rtol=2e-2, atol=2e-2)


def _arrays(arguments):
    for value in arguments.values():
        if isinstance(value, TensorDescriptor):
            yield value.base
        elif isinstance(value, np.ndarray):
            yield value


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=["fp16", "fp32"])
@pytest.mark.parametrize("name", CASE_NAMES)
def test_the_gpu_matches_torch(name, dtype):
    """Sizes of several tiles and K trips, so stages wrap and the pipeline drains."""
    torch = pytest.importorskip("torch")
    torch_dtype = {np.float16: torch.float16, np.float32: torch.float32}

    def empty(shape, element):
        return torch.empty(shape, dtype=torch_dtype[element], device="cuda")

    blocks, warps = _blocks(dtype)
    M, N, K = 3 * blocks["BM"], 2 * blocks["BN"], 8 * blocks["BK"]
    _, kernel, arguments, grid, reference = next(
        c for c in _cases(dtype, M, N, K, empty=empty) if c[0] == name)
    generator = torch.Generator(device="cuda").manual_seed(0)
    written = {id(out) for out, _ in _torch_reference(torch, name, arguments)}
    for value in _tensors(arguments):
        if id(value) not in written:
            value.copy_(torch.randn(value.shape, generator=generator, device="cuda") / 4)
        else:
            value.fill_(float("nan"))
    kernel[grid](**arguments, **blocks, num_warps=warps, num_stages=3)
    torch.cuda.synchronize()
    # tf32 products (fp32 inputs) keep 10 mantissa bits, as fp16 ones do.
    for out, expected in _torch_reference(torch, name, arguments):
        torch.testing.assert_close(out.float(), expected, rtol=2e-2, atol=3e-2)


def _tensors(arguments):
    for value in arguments.values():
        if isinstance(value, TensorDescriptor):
            yield value.base
        elif hasattr(value, "is_cuda"):
            yield value


def _torch_reference(torch, name, arguments):
    """(output tensor, expected fp32 values) per output, with torch.matmul in fp32 (tf32
    off) on the inputs."""
    torch.backends.cuda.matmul.allow_tf32 = False
    a = lambda key: (arguments[key].base if isinstance(arguments[key], TensorDescriptor)   # noqa: E731
                     else arguments[key]).float()
    if name == "two_dots":
        return [(arguments["c_ptr"], a("a_ptr") @ a("b_ptr")),
                (arguments["c2_ptr"], a("a_ptr") @ a("b2_ptr"))]
    if name == "trans_b":
        return [(arguments["c_ptr"], a("a_ptr") @ a("b_ptr").T)]
    if name == "trans_b_descriptor":
        return [(arguments["c_ptr"], a("a_desc") @ a("b_desc").T)]
    if name == "reshape_3d":
        return [(arguments["c_ptr"], torch.matmul(a("x_desc"), a("w_desc")))]
    if name == "reshape_3d_device_descriptor":
        return [(arguments["c_ptr"], torch.matmul(a("x_ptr"), a("w_ptr")))]
    gate = torch.matmul(a("x_desc"), a("wg_desc").T)
    up = torch.matmul(a("x_desc"), a("wu_desc").T)
    return [(arguments["out_ptr"], torch.nn.functional.silu(gate) * up)]
