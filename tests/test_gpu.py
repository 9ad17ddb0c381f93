"""Every interpreter case on the GPU through the JIT launcher, matching the interpreter."""
import numpy as np
import pytest

from tests.kernels import atomics as atomic_kernels
from tests.kernels import batched_matmul
from tests.kernels import combine, control_flow, descriptors, dot, reductions, scans, views
from tests.kernels.elementwise import CASES as ELEMENTWISE_CASES, run_interpreter

CASES = (ELEMENTWISE_CASES + reductions.CASES + control_flow.CASES + views.CASES + dot.CASES
         + atomic_kernels.CASES + scans.CASES + combine.CASES + batched_matmul.CASES
         + descriptors.CASES)

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
    case.kernel[case.launch_grid(fresh)](**device_args, **case.constants)
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

