"""Every interpreter case on the GPU through the JIT launcher, matching the interpreter."""
import numpy as np
import pytest

from tests.examples import example_module
from tests.kernels import atomics as atomic_kernels
from tests.kernels import batched_matmul
from tests.kernels import (combine, control_flow, descriptors, dot, libdevice, operand_tiles,
                           reductions, scans, views)
from tests.kernels.elementwise import CASES as ELEMENTWISE_CASES, run_interpreter

CASES = (ELEMENTWISE_CASES + reductions.CASES + control_flow.CASES + views.CASES + dot.CASES + operand_tiles.CASES
         + atomic_kernels.CASES + scans.CASES + combine.CASES + batched_matmul.CASES
         + descriptors.CASES + libdevice.CASES)

pytestmark = pytest.mark.gpu


def _to_device(torch, value):
    if not isinstance(value, np.ndarray):
        return value
    # Keep the view's offset from its base: unaligned views stay unaligned on the GPU.
    base = value
    while isinstance(base.base, np.ndarray):
        base = base.base
    offset = (value.ctypes.data - base.ctypes.data) // value.itemsize
    flat = torch.from_numpy(np.ascontiguousarray(base).reshape(-1).view(
        np.uint8 if base.dtype == np.bool_ else base.dtype)).cuda()
    if base.dtype == np.bool_:
        flat = flat.view(torch.bool)
    strides = [s // value.itemsize for s in value.strides]
    return flat.as_strided(value.shape, strides, offset)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_gpu_matches_interpreter(case):
    torch = pytest.importorskip("torch")
    args, expected = run_interpreter(case)
    fresh = case.make_args(np.random.default_rng(0))
    device_args = {k: _to_device(torch, v) for k, v in fresh.items()}
    case.kernel[case.launch_grid(fresh)](**device_args, **case.constants,
                                          num_warps=case.num_warps)
    torch.cuda.synchronize()
    for name in case.outputs:
        got = device_args[name].cpu().numpy()
        want = expected[name]
        if case.exact:
            np.testing.assert_array_equal(got, want, err_msg=name)
        else:
            np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64),
                                       rtol=max(case.rtol, 4e-7) * 4, atol=case.rtol * 4,
                                       err_msg=name)


def test_stream_and_unaligned_specialization():
    torch = pytest.importorskip("torch")
    from tests.kernels.elementwise import add_kernel
    x = torch.randn(10_001, device="cuda")
    y = torch.randn(10_001, device="cuda")
    out = torch.empty(10_001, device="cuda")
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        add_kernel[(40,)](x[1:], y[1:], out[1:], 10_000, BLOCK=256)
    stream.synchronize()
    torch.testing.assert_close(out[1:], x[1:] + y[1:])


def _descriptor_matmul(torch, m, n, k, block_n=256, warps=8):
    module = example_module("matmul_descriptor")
    a = torch.randn(m, k, device="cuda", dtype=torch.float16)
    b = torch.randn(k, n, device="cuda", dtype=torch.float16)
    out = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float16)
    grid = (-(-m // 128) * -(-n // block_n),)
    module.matmul_descriptor_kernel[grid](a, b, out, m, n, k, max(k, 16), n, n, BLOCK_SIZE_M=128,
                                          BLOCK_SIZE_N=block_n, BLOCK_SIZE_K=64, GROUP_SIZE_M=8,
                                          num_warps=warps)
    torch.cuda.synchronize()
    return a, b, out


@pytest.mark.parametrize("m, n, k, block_n, warps", [(1024, 2048, 512, 256, 8),
                                                     (528, 272, 1040, 128, 4)])
def test_jit_copies_descriptor_tiles_with_tma(m, n, k, block_n, warps):
    """Through the JIT launcher, on sm_90: the tensor maps are encoded per launch and the
    tiles arrive by TMA and C leaves by TMA (the compiled kernel takes three maps); sizes
    end mid-tile."""
    torch = pytest.importorskip("torch")
    from aotk.launch import device
    device._launchable.clear()
    a, b, out = _descriptor_matmul(torch, m, n, k, block_n, warps)
    reference = a.float() @ b.float()
    assert (torch.linalg.norm(out.float() - reference) / torch.linalg.norm(reference)) < 1e-2
    maps = [len(metadata["tensor_maps"]) for _, metadata in device._launchable.values()]
    target = torch.cuda.get_device_capability()
    assert maps == ([3] if target == (9, 0) else [0])


def test_jit_reuses_tensor_maps_of_repeated_arguments():
    """A launch with the arguments of an earlier one reuses its encoded maps; new
    arguments encode new ones, and the results follow the new data."""
    torch = pytest.importorskip("torch")
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("TMA builds exist on sm_90 only")
    from aotk.launch import tensor_maps
    tensor_maps._encoded.clear()
    # The first call's tensors stay alive, so the second call's (from torch's caching
    # allocator) cannot reuse their addresses.
    first = _descriptor_matmul(torch, 512, 512, 256)
    assert len(tensor_maps._encoded) == 3
    encoded = dict(tensor_maps._encoded)
    a, b, out = _descriptor_matmul(torch, 512, 512, 256)   # fresh tensors: new addresses
    del first
    assert len(tensor_maps._encoded) == 6
    reference = a.float() @ b.float()
    assert (torch.linalg.norm(out.float() - reference) / torch.linalg.norm(reference)) < 1e-2
    assert all(tensor_maps._encoded[key] is value for key, value in encoded.items())


def test_jit_descriptor_with_empty_dimension_runs_without_tma():
    """K = 0 has no tensor map: the launcher compiles the build without TMA and runs it."""
    torch = pytest.importorskip("torch")
    from aotk.launch import device
    device._launchable.clear()
    _, _, out = _descriptor_matmul(torch, 512, 512, 0)
    assert torch.count_nonzero(out).item() == 0
    if torch.cuda.get_device_capability() == (9, 0):
        assert sorted(len(m["tensor_maps"]) for _, m in device._launchable.values()) == [0, 3]


@pytest.mark.parametrize("dtype, acc_fp16, stages, block_n, warps", [
    ("float16", False, 3, 256, 8), ("bfloat16", False, 4, 128, 4),
    ("float16", True, 2, 128, 4), ("float16", False, 3, 128, 4)])
def test_jit_tma_persistent_matmul(dtype, acc_fp16, stages, block_n, warps):
    """The TMA loop inside an outer loop (mbarriers made and retired per tile, phases
    restarting), bf16 tiles, fp16 accumulation (no wgmma in flight: the stage is freed by
    a barrier), 2 to 4 stages; fewer programs than tiles, K ending mid-tile."""
    torch = pytest.importorskip("torch")
    from aotk.launch import device
    from tests.kernels.descriptors import persistent_matmul_kernel
    device._launchable.clear()
    m, n, k = 640, 768, 1000
    element = getattr(torch, dtype)
    a = torch.randn(m, k + 8, device="cuda", dtype=element)[:, :k]   # row stride 1008
    b = torch.randn(k, n, device="cuda", dtype=element)
    out = torch.full((m, n), float("nan"), device="cuda", dtype=element)
    persistent_matmul_kernel[(7,)](a, b, out, m, n, k, a.stride(0), n, n, BLOCK_M=128,
                                   BLOCK_N=block_n, BLOCK_K=64, ACC_FP16=acc_fp16,
                                   num_warps=warps, num_stages=stages)
    torch.cuda.synchronize()
    reference = a.float() @ b.float()
    error = torch.linalg.norm(out.float() - reference) / torch.linalg.norm(reference)
    assert error < (2e-2 if acc_fp16 or dtype == "bfloat16" else 1e-2)
    if torch.cuda.get_device_capability() == (9, 0):
        assert [len(md["tensor_maps"]) for _, md in device._launchable.values()] == [3]
