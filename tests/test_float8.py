"""8-bit floats (tl.float8e4nv = e4m3fn, tl.float8e5 = e5m2): the reference rules of
aotk.ir.float8, the interpreter's tables and the backend's LLVM IR held to them (the IR is run
on this machine's CPU through LLVM's JIT), Triton's typing (arithmetic in fp32, promotion,
fp_downcast_rounding) and, on the GPU, the same codes as torch's conversions."""
import ctypes
import math

import numpy as np
import pytest

import aotk
import aotk.language as tl
from aotk.interpreter import float8 as tables
from aotk.ir import float8 as F

FORMATS = (F.E4M3, F.E5M2)


def _test_values(fmt, seed=0):
    """Every code's value, every midpoint between neighbours (the ties), both signs, specials
    and random magnitudes over the whole range."""
    grid = np.array([F.decode(fmt, c) for c in range(fmt.max_finite_code + 1)])
    rng = np.random.default_rng(seed)
    randoms = rng.standard_normal(3000) * 10.0 ** rng.uniform(-9, 6, 3000)
    values = np.concatenate([grid, (grid[1:] + grid[:-1]) / 2, randoms,
                             [np.inf, np.nan, 1e30, 1e-30, 1e-45, grid[-1] * 1.03]])
    values = values.astype(np.float32)   # every value above is exact in fp32
    return np.concatenate([values, -values])


def test_reference_values_and_rounding_rules():
    assert F.decode(F.E4M3, 0x7E) == 448 and F.decode(F.E5M2, 0x7B) == 57344
    assert F.decode(F.E4M3, 0x01) == 2.0 ** -9 and F.decode(F.E5M2, 0x01) == 2.0 ** -16
    assert F.decode(F.E5M2, 0x7C) == math.inf and math.isnan(F.decode(F.E4M3, 0xFF))
    assert F.encode(F.E4M3, 1.0625) == 0x38          # a tie goes to the even code (1.0)
    assert F.encode(F.E4M3, 1.1875) == 0x3A          # ... here up (1.25)
    assert F.encode(F.E4M3, 1.1875, "rtz") == 0x39   # towards zero: 1.125
    assert F.encode(F.E4M3, 1000.0) == 0x7E and F.encode(F.E4M3, -math.inf) == 0xFE   # satfinite
    assert F.encode(F.E5M2, math.inf) == 0x7B
    assert F.encode(F.E5M2, math.nan) == F.NAN_CODE == 0x7F
    assert F.encode(F.E4M3, -0.0) == 0x80


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
@pytest.mark.parametrize("rounding", ["rtne", "rtz"])
def test_interpreter_tables_match_the_reference(fmt, rounding):
    values = _test_values(fmt)
    expected = [F.encode(fmt, float(v), rounding) for v in values]
    assert tables.encode(fmt, values, rounding).tolist() == expected
    decoded = tables.decode(fmt, np.arange(256))
    assert np.array_equal(decoded, [F.decode(fmt, c) for c in range(256)], equal_nan=True)


def _host_conversions():
    """The backend's conversion IR, compiled for this CPU."""
    import llvmlite.binding as llvm
    import llvmlite.ir as ir

    from aotk.backend import float8 as backend
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    module = ir.Module("float8_conversions")
    for fmt in FORMATS:
        for rounding in ("rtne", "rtz"):
            fn = ir.Function(module, ir.FunctionType(ir.IntType(8), [ir.FloatType()]),
                             f"encode_{fmt.name}_{rounding}")
            b = ir.IRBuilder(fn.append_basic_block())
            b.ret(backend.encode_from_f32(b, fmt, fn.args[0], rounding))
        fn = ir.Function(module, ir.FunctionType(ir.FloatType(), [ir.IntType(8)]),
                         f"decode_{fmt.name}")
        b = ir.IRBuilder(fn.append_basic_block())
        b.ret(backend.decode_to_f32(b, fmt, fn.args[0]))
    parsed = llvm.parse_assembly(str(module))
    machine = llvm.Target.from_default_triple().create_target_machine()
    engine = llvm.create_mcjit_compiler(parsed, machine)
    engine.finalize_object()
    return engine


@pytest.fixture(scope="module")
def host_engine():
    return _host_conversions()


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
def test_backend_conversions_match_the_reference(host_engine, fmt):
    decode = ctypes.CFUNCTYPE(ctypes.c_float, ctypes.c_uint8)(
        host_engine.get_function_address(f"decode_{fmt.name}"))
    for code in range(256):
        got, want = decode(code), F.decode(fmt, code)
        assert got == want or (math.isnan(got) and math.isnan(want)), hex(code)
    values = _test_values(fmt, seed=1)
    for rounding in ("rtne", "rtz"):
        encode = ctypes.CFUNCTYPE(ctypes.c_uint8, ctypes.c_float)(
            host_engine.get_function_address(f"encode_{fmt.name}_{rounding}"))
        wrong = [float(v) for v in values if encode(float(v)) != F.encode(fmt, float(v), rounding)]
        assert not wrong, wrong[:5]


@aotk.jit
def _to_fp8_codes(x_ptr, codes_ptr, back_ptr, N: tl.constexpr, FP8: tl.constexpr,
                  ROUNDING: tl.constexpr):
    offs = tl.arange(0, N)
    y = tl.load(x_ptr + offs).to(FP8, fp_downcast_rounding=ROUNDING)
    tl.store(codes_ptr + offs, y.to(tl.uint8, bitcast=True))
    tl.store(back_ptr + offs, y.to(tl.float32))


@pytest.mark.parametrize("fp8, fmt", [(tl.float8e4nv, F.E4M3), (tl.float8e5, F.E5M2)])
@pytest.mark.parametrize("rounding", ["rtne", "rtz"])
def test_kernel_casts_in_the_interpreter(fp8, fmt, rounding):
    x = _test_values(fmt)[:1024]
    x = np.concatenate([x, np.zeros(1024 - x.size, np.float32)])
    codes, back = np.zeros(1024, np.uint8), np.zeros(1024, np.float32)
    _to_fp8_codes[(1,)](x, codes, back, N=1024, FP8=fp8, ROUNDING=rounding)
    expected = np.array([F.encode(fmt, float(v), rounding) for v in x])
    assert np.array_equal(codes, expected)
    assert np.array_equal(back, tables.decode(fmt, expected), equal_nan=True)


@aotk.jit
def _fp8_arithmetic(x_ptr, out_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(x_ptr + offs).to(tl.float8e4nv, bitcast=True)
    y = tl.abs(x) * 2 + x           # fp8 ops: in fp32, each result rounded to fp8
    tl.store(out_ptr + offs, (y - x).to(tl.float32))


def test_fp8_arithmetic_is_fp32_rounded_to_fp8_per_op():
    codes = (np.arange(128, dtype=np.uint8) * 3) % 0x7E   # no NaN codes
    out = np.zeros(128, np.float32)
    _fp8_arithmetic[(1,)](codes, out, N=128)
    x = tables.decode(F.E4M3, codes).astype(np.float64)
    rnd = lambda v: tables.decode(F.E4M3, tables.encode(F.E4M3, v)).astype(np.float64)  # noqa: E731
    assert np.array_equal(out, rnd(rnd(rnd(np.abs(x) * 2) + x) - x))


@aotk.jit
def _sign_ops(x_ptr, abs_ptr, neg_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(x_ptr + offs).to(tl.float8e5, bitcast=True)
    tl.store(abs_ptr + offs, tl.abs(x).to(tl.uint8, bitcast=True))
    tl.store(neg_ptr + offs, (-x).to(tl.uint8, bitcast=True))


def test_abs_and_negation_only_touch_the_sign_bit():
    codes = np.arange(256, dtype=np.uint8)
    absolute, negated = np.zeros(256, np.uint8), np.zeros(256, np.uint8)
    _sign_ops[(1,)](codes, absolute, negated, N=256)
    assert np.array_equal(absolute, codes & 0x7F)     # NaN codes kept as they are
    assert np.array_equal(negated, codes ^ 0x80)


@aotk.jit
def _promotions(p_ptr):
    a = tl.load(p_ptr).to(tl.float8e4nv, bitcast=True)
    b = tl.load(p_ptr).to(tl.float8e5, bitcast=True)
    tl.static_assert((a + a).dtype == tl.float8e4nv)
    tl.static_assert((a + b).dtype == tl.float16)
    tl.static_assert((a + a.to(tl.float16)).dtype == tl.float16)
    tl.static_assert((a + a.to(tl.bfloat16)).dtype == tl.float32)
    tl.static_assert((a * 2.0).dtype == tl.float8e4nv)
    tl.static_assert((a < b).dtype == tl.int1)
    tl.static_assert(tl.float8e5.fp_mantissa_width == 2 and tl.float8e4nv.is_fp8())
    tl.store(p_ptr, (a + b).to(tl.uint8))


def test_promotion_follows_tritons_computation_types():
    _promotions[(1,)](np.zeros(1, np.uint8))


@aotk.jit
def _round_toward_zero(x_ptr, half_ptr, bf16_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(x_ptr + offs)
    tl.store(half_ptr + offs, x.to(tl.float16, fp_downcast_rounding="rtz"))
    tl.store(bf16_ptr + offs, x.to(tl.bfloat16, fp_downcast_rounding="rtz").to(tl.float32))


def test_fp_downcast_rounding_rtz_for_fp16_and_bf16():
    rng = np.random.default_rng(3)
    x = np.concatenate([rng.standard_normal(1020) * 100, [70000.0, -70000.0, 1e-8, -3.0]])
    x = x.astype(np.float32)
    half, bf16 = np.zeros(1024, np.float16), np.zeros(1024, np.float32)
    _round_toward_zero[(1,)](x, half, bf16, N=1024)
    with np.errstate(over="ignore"):
        nearest = x.astype(np.float16)
    farther = np.abs(nearest.astype(np.float64)) > np.abs(x)
    assert np.array_equal(half, np.where(farther, np.nextafter(nearest, np.float16(0)), nearest))
    assert half[1020] == np.finfo(np.float16).max        # overflow towards zero: the largest
    assert np.array_equal(bf16, (x.view(np.uint32) & 0xFFFF0000).view(np.float32))


def test_fp_downcast_rounding_only_for_narrowing_float_casts():
    @aotk.jit
    def widen(x_ptr):
        tl.store(x_ptr, tl.load(x_ptr).to(tl.float64, fp_downcast_rounding="rtz").to(tl.float32))
    with pytest.raises(aotk.CompilationError, match="fp_downcast_rounding should be set only"):
        widen[(1,)](np.zeros(1, np.float32))

    @aotk.jit
    def bad_mode(x_ptr):
        tl.store(x_ptr, tl.load(x_ptr).to(tl.float16, fp_downcast_rounding="rtp").to(tl.float32))
    with pytest.raises(aotk.CompilationError, match="must be one of rtne, rtz"):
        bad_mode[(1,)](np.zeros(1, np.float32))


@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
def test_fp8_kernels_compile(target):
    for fp8 in (tl.float8e4nv, tl.float8e5):
        compiled = aotk.compile(_to_fp8_codes, "*fp32:16, *u8:16, *fp32:16",
                                constants=dict(N=256, FP8=fp8, ROUNDING="rtne"), target=target)
        assert "st.global" in compiled.asm["ptx"]
    compiled = aotk.compile(_round_toward_zero, "*fp32:16, *fp16:16, *fp32:16",
                            constants=dict(N=256), target=target)
    assert "cvt.rz.f16.f32" in compiled.asm["ptx"] and "cvt.rz.bf16.f32" in compiled.asm["ptx"]


def test_fp8_signature_types_and_torch_names():
    from aotk.ir.signature import Signature
    from aotk.launch.arguments import TORCH_DTYPES
    assert str(Signature.parse("*fp8e4nv:16, *fp8e5", ["a", "b"])) == "*fp8e4nv:16, *fp8e5"
    assert TORCH_DTYPES["torch.float8_e4m3fn"] is tl.float8e4nv
    assert TORCH_DTYPES["torch.float8_e5m2"] is tl.float8e5


@pytest.mark.gpu
@pytest.mark.parametrize("fp8, torch_name, fmt", [(tl.float8e4nv, "float8_e4m3fn", F.E4M3),
                                                  (tl.float8e5, "float8_e5m2", F.E5M2)])
def test_gpu_conversions_match_the_reference_and_torch(fp8, torch_name, fmt):
    torch = pytest.importorskip("torch")
    x = _test_values(fmt)[:4096]
    x = np.concatenate([x, np.zeros(4096 - x.size, np.float32)])
    results = {}
    for rounding in ("rtne", "rtz"):
        codes = torch.zeros(4096, dtype=torch.uint8, device="cuda")
        back = torch.zeros(4096, dtype=torch.float32, device="cuda")
        _to_fp8_codes[(1,)](torch.from_numpy(x).cuda(), codes, back, N=4096, FP8=fp8,
                            ROUNDING=rounding)
        expected = np.array([F.encode(fmt, float(v), rounding) for v in x])
        assert np.array_equal(codes.cpu().numpy(), expected), rounding
        assert np.array_equal(back.cpu().numpy(), tables.decode(fmt, expected), equal_nan=True)
        results[rounding] = codes.cpu().numpy()
    # torch rounds to nearest even too (it does not saturate: compare in range only).
    finite = np.abs(x) <= F.decode(fmt, fmt.max_finite_code)
    by_torch = torch.from_numpy(x).to(getattr(torch, torch_name)).view(torch.uint8).numpy()
    assert np.array_equal(results["rtne"][finite], by_torch[finite])
    # A torch fp8 tensor is a kernel argument of that type.
    codes = torch.from_numpy(np.arange(256, dtype=np.uint8)[:0x7F]).cuda()
    as_fp8 = codes.view(getattr(torch, torch_name))
    out = torch.zeros(0x7F, dtype=torch.uint8, device="cuda")
    _sign_ops_typed[(1,)](as_fp8, out, N=128, M=0x7F)
    assert np.array_equal(out.cpu().numpy(), codes.cpu().numpy() ^ 0x80)


@aotk.jit
def _sign_ops_typed(x_ptr, out_ptr, N: tl.constexpr, M: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(x_ptr + offs, mask=offs < M)
    tl.static_assert(x.dtype.is_fp8())
    tl.store(out_ptr + offs, (-x).to(tl.uint8, bitcast=True), mask=offs < M)
