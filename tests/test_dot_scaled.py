"""tl.dot_scaled (microscaling formats e2m1 / e4m3 / e5m2 with e8m0 scales, against bf16 or
fp16), tl.interleave, and None arguments (a compile-time None, as in Triton), in the
interpreter against a numpy reference, compiled for sm_80 and sm_90, and on the GPU."""
import numpy as np
import pytest

import aotk
import aotk.language as tl
from aotk.ir import float8 as F

E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6])


@aotk.jit
def _dot_scaled_kernel(a_ptr, stride_a0, stride_a1, a_scale, b_ptr, stride_b0, stride_b1,
                       b_scale, out_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr,
                       FORMAT_A: tl.constexpr, FORMAT_B: tl.constexpr):
    PACKED_A: tl.constexpr = K // 2 if FORMAT_A == "e2m1" else K
    PACKED_B: tl.constexpr = K // 2 if FORMAT_B == "e2m1" else K
    a = tl.load(a_ptr + tl.arange(0, M)[:, None] * stride_a0
                + tl.arange(0, PACKED_A)[None, :] * stride_a1)
    b = tl.load(b_ptr + tl.arange(0, PACKED_B)[:, None] * stride_b0
                + tl.arange(0, N)[None, :] * stride_b1)
    GROUPS: tl.constexpr = K // 32
    if a_scale is not None:
        a_scale = tl.load(a_scale + tl.arange(0, M)[:, None] * GROUPS
                          + tl.arange(0, GROUPS)[None, :])
    if b_scale is not None:
        b_scale = tl.load(b_scale + tl.arange(0, N)[:, None] * GROUPS
                          + tl.arange(0, GROUPS)[None, :])
    c = tl.dot_scaled(a, a_scale, FORMAT_A, b, b_scale, FORMAT_B)
    tl.store(out_ptr + tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :], c)


def _bf16_bits(x):
    bits = x.astype(np.float32).view(np.uint32)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


def _operand(rng, fmt, shape):
    if fmt == "bf16":
        return _bf16_bits(rng.standard_normal(shape))
    codes = rng.integers(0, 256, shape, dtype=np.uint8)
    if fmt == "e4m3":
        codes[(codes & 0x7F) == 0x7F] = 0      # no NaN
    if fmt == "e5m2":
        codes[(codes & 0x7C) == 0x7C] = 0      # no inf / NaN
    return codes


def _values(codes, fmt, scale, k_axis):
    """The operand's real values (float64), scales applied along K."""
    if fmt == "bf16":
        v = (codes.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    elif fmt == "e2m1":
        pair = np.stack([E2M1[codes & 0xF], E2M1[codes >> 4]], axis=k_axis + 1)
        shape = list(codes.shape)
        shape[k_axis] *= 2
        v = pair.reshape(shape)
    else:
        fmt8 = F.E4M3 if fmt == "e4m3" else F.E5M2
        v = np.vectorize(lambda c: F.decode(fmt8, int(c)))(codes)
    if scale is not None:
        factor = np.repeat(2.0 ** (scale.astype(np.float64) - 127), 32, axis=1)
        v = v * (factor if k_axis == 1 else factor.T)
    return v


def _case(fmt_a, fmt_b, M=32, N=32, K=64, b_column_major=False, seed=0):
    rng = np.random.default_rng(seed)
    a = _operand(rng, fmt_a, (M, K // 2 if fmt_a == "e2m1" else K))
    b = _operand(rng, fmt_b, (K // 2 if fmt_b == "e2m1" else K, N))
    a_scale = None if fmt_a == "bf16" else rng.integers(118, 136, (M, K // 32), dtype=np.uint8)
    b_scale = None if fmt_b == "bf16" else rng.integers(118, 136, (N, K // 32), dtype=np.uint8)
    reference = _values(a, fmt_a, a_scale, 1) @ _values(b, fmt_b, b_scale, 0)
    if b_column_major:
        b = np.asfortranarray(b)
    return a, a_scale, b, b_scale, reference


def _strides(x):
    return x.strides[0] // x.itemsize, x.strides[1] // x.itemsize


CASES = [("e2m1", "bf16"), ("e4m3", "bf16"), ("bf16", "e5m2"), ("e5m2", "e4m3"),
         ("bf16", "e2m1"), ("e2m1", "e2m1")]


@pytest.mark.parametrize("fmt_a, fmt_b", CASES)
@pytest.mark.parametrize("b_column_major", [False, True])
def test_dot_scaled_in_the_interpreter(fmt_a, fmt_b, b_column_major):
    a, a_scale, b, b_scale, reference = _case(fmt_a, fmt_b, b_column_major=b_column_major)
    out = np.zeros((32, 32), np.float32)
    _dot_scaled_kernel[(1,)](a, *_strides(a), a_scale, b, *_strides(b), b_scale, out,
                             M=32, N=32, K=64, FORMAT_A=fmt_a, FORMAT_B=fmt_b)
    # bf16 operands: every upcast value and scaled value is exact; only the fp32 sum rounds.
    np.testing.assert_allclose(out, reference, rtol=1e-5, atol=1e-5 * np.abs(reference).max())


def test_e8m0_scale_255_is_nan_and_fp16_computes_in_fp16():
    @aotk.jit
    def kernel(a_ptr, s_ptr, b_ptr, out_ptr):
        a = tl.load(a_ptr + tl.arange(0, 16)[:, None] * 32 + tl.arange(0, 32)[None, :])
        s = tl.load(s_ptr + tl.arange(0, 16)[:, None])
        b = tl.load(b_ptr + tl.arange(0, 32)[:, None] * 16 + tl.arange(0, 16)[None, :])
        c = tl.dot_scaled(a, s, "e4m3", b, None, "fp16")
        tl.static_assert(c.dtype == tl.float32)
        tl.store(out_ptr + tl.arange(0, 16)[:, None] * 16 + tl.arange(0, 16)[None, :], c)
    a = np.full((16, 32), 0x38, np.uint8)                  # 1.0 in e4m3
    scale = np.full((16, 1), 127, np.uint8)
    scale[3] = 255
    b = np.full((32, 16), 0.5, np.float16)
    out = np.zeros((16, 16), np.float32)
    kernel[(1,)](a, scale, b, out)
    assert np.isnan(out[3]).all() and np.all(np.delete(out, 3, axis=0) == 16.0)


@aotk.jit
def _interleave_kernel(a_ptr, b_ptr, out_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(out_ptr + tl.arange(0, 2 * N), tl.interleave(tl.load(a_ptr + offs),
                                                           tl.load(b_ptr + offs)))


def test_interleave():
    a, b = np.arange(16, dtype=np.int32), np.arange(100, 116, dtype=np.int32)
    out = np.zeros(32, np.int32)
    _interleave_kernel[(1,)](a, b, out, N=16)
    assert np.array_equal(out, np.stack([a, b], axis=1).ravel())
    assert tl.standard.interleave is tl.interleave


@pytest.mark.parametrize("message, fmt_a, a_dtype, scale_shape", [
    ("lhs_format must be one of", "e3m2", np.uint8, (32, 2)),
    ("e2m1 lhs must be packed as uint8", "e2m1", np.int8, (32, 2)),
    (r"lhs_scale must be a tensor of shape \[32, 1\], got \[32, 4\]", "e4m3", np.uint8, (32, 4)),
])
def test_dot_scaled_errors_name_the_operand(message, fmt_a, a_dtype, scale_shape):
    @aotk.jit
    def kernel(a_ptr, s_ptr, b_ptr, out_ptr, FMT: tl.constexpr, S0: tl.constexpr,
               S1: tl.constexpr):
        a = tl.load(a_ptr + tl.arange(0, 32)[:, None] * 32 + tl.arange(0, 32)[None, :])
        s = tl.load(s_ptr + tl.arange(0, S0)[:, None] * S1 + tl.arange(0, S1)[None, :])
        b = tl.load(b_ptr + tl.arange(0, 64)[:, None] * 32 + tl.arange(0, 32)[None, :])
        tl.store(out_ptr + tl.arange(0, 32)[:, None] * 32 + tl.arange(0, 32)[None, :],
                 tl.dot_scaled(a, s, FMT, b, None, "bf16"))
    with pytest.raises(aotk.CompilationError, match=message):
        kernel[(1,)](np.zeros((32, 32), a_dtype), np.zeros(scale_shape, np.uint8),
                     np.zeros((64, 32), np.float32).view(np.uint16)[:, :32].copy(),
                     np.zeros((32, 32), np.float32), FMT=fmt_a, S0=scale_shape[0],
                     S1=scale_shape[1])


@aotk.jit
def _maybe_scaled(x_ptr, scale_ptr, out_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(x_ptr + offs)
    if scale_ptr is not None:
        x = x * tl.load(scale_ptr + offs)
    tl.store(out_ptr + offs, x)


def test_none_argument_is_a_compile_time_none():
    x, scale, out = np.arange(8, dtype=np.float32), np.full(8, 3, np.float32), np.zeros(8, np.float32)
    _maybe_scaled[(1,)](x, None, out, N=8)
    assert np.array_equal(out, x)
    _maybe_scaled[(1,)](x, scale, out, N=8)
    assert np.array_equal(out, 3 * x)
    compiled = aotk.compile(_maybe_scaled, "*fp32:16, *fp32:16",
                            constants={"N": 8, "scale_ptr": None}, target="sm_90")
    assert compiled.signature.names == ("x_ptr", "out_ptr")
    with pytest.raises(TypeError, match="only be given as None"):
        _maybe_scaled.kir({"x_ptr": tl.pointer_type(tl.float32)}, constants={"scale_ptr": 1, "N": 8})


@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
@pytest.mark.parametrize("fmt_a, fmt_b", [("e2m1", "bf16"), ("bf16", "e5m2")])
def test_dot_scaled_compiles(target, fmt_a, fmt_b):
    kinds = {"e2m1": "*u8", "e5m2": "*u8", "bf16": "*bf16"}
    scale_a, scale_b = fmt_a != "bf16", fmt_b != "bf16"
    params = [f"{kinds[fmt_a]}:16", "i32:16", "i32:1"] + (["*u8:16"] if scale_a else []) + \
        [f"{kinds[fmt_b]}:16", "i32:16", "i32:1"] + (["*u8:16"] if scale_b else []) + ["*fp32:16"]
    constants = dict(M=64, N=64, K=64, FORMAT_A=fmt_a, FORMAT_B=fmt_b)
    constants.update({} if scale_a else {"a_scale": None})
    constants.update({} if scale_b else {"b_scale": None})
    compiled = aotk.compile(_dot_scaled_kernel, ", ".join(params), constants=constants,
                            target=target)
    assert "bf16.bf16" in compiled.asm["ptx"]     # a bf16 tensor-core product


@pytest.mark.gpu
@pytest.mark.parametrize("fmt_a, fmt_b", CASES)
def test_dot_scaled_on_the_gpu(fmt_a, fmt_b):
    torch = pytest.importorskip("torch")
    M = N = 64
    K = 128
    a, a_scale, b, b_scale, reference = _case(fmt_a, fmt_b, M, N, K, b_column_major=True)

    def device(x):
        if x is None:
            return None
        tensor = torch.from_numpy(np.ascontiguousarray(x)).cuda()
        return tensor.view(torch.bfloat16) if x.dtype == np.uint16 else tensor
    b_dev = device(b.T).T          # column-major on the device too
    out = torch.zeros((M, N), dtype=torch.float32, device="cuda")
    _dot_scaled_kernel[(1,)](device(a), *device(a).stride(), device(a_scale), b_dev,
                             *b_dev.stride(), device(b_scale), out, M=M, N=N, K=K,
                             FORMAT_A=fmt_a, FORMAT_B=fmt_b)
    np.testing.assert_allclose(out.cpu().numpy(), reference, rtol=1e-5,
                               atol=1e-5 * np.abs(reference).max())


@pytest.mark.gpu
def test_a_cpu_tensor_argument_is_a_value_error_and_pinned_memory_works():
    torch = pytest.importorskip("torch")
    out = torch.zeros(8, dtype=torch.float32, device="cuda")
    with pytest.raises(ValueError, match="argument 'x_ptr' is a tensor in CPU memory"):
        _maybe_scaled[(1,)](torch.arange(8, dtype=torch.float32), None, out, N=8)
    pinned = torch.arange(8, dtype=torch.float32).pin_memory()
    _maybe_scaled[(1,)](pinned, None, out, N=8)
    torch.cuda.synchronize()
    assert torch.equal(out.cpu(), pinned)
