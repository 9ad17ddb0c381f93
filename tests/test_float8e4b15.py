"""tl.float8e4b15, Triton's software fp8 (e4m3 with exponent bias 15): the reference rules of
aotk.ir.float8 (values measured from Triton 3.6 on an H200), the interpreter and the
backend's IR held to them over every float16, the typing (which casts exist, tl.dot upcasts
to fp16, convert_custom_float8_sm70/sm80), compiles for sm_80 and sm_90, and on the GPU the
same bits as Triton's own conversions, kernel for kernel (tests/kernels/e4b15_written.py)."""
import ctypes
import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest

import aotk
import aotk.language as tl
from aotk.interpreter import float8 as tables
from aotk.ir import float8 as F
from aotk.triton_imports import redirect_triton

FMT = F.E4M3B15
EVERY_HALF = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.float16)
WRITTEN = Path(__file__).parent / "kernels" / "e4b15_written.py"


def _floats(count=200_000, seed=0):
    """Random float32 bit patterns (NaNs of both signs, infinities, subnormals among them),
    every float16 value, and a fine grid over the format's range (ties included)."""
    rng = np.random.default_rng(seed)
    bits = rng.integers(0, 2**32, count, dtype=np.uint64).astype(np.uint32)
    specials = np.array([0x7FC00000, 0xFFC00000, 0x7F800000, 0xFF800000, 0x7F800001,
                         0xFFFFFFFF, 0, 0x80000000], np.uint32)
    return np.concatenate([bits.view(np.float32), specials.view(np.float32),
                           EVERY_HALF.astype(np.float32), np.linspace(-2, 2, 40001, dtype=np.float32)])


def test_reference_values_and_rules():
    # A code is the top byte of the float16 of the same value.
    assert F.decode(FMT, 0x78) == 1.0 and F.decode(FMT, 0x7E) == 1.75
    assert F.decode(FMT, 0x7F) == 1.875 and F.decode(FMT, 0xFF) == -1.875   # no NaN
    assert F.decode(FMT, 0x01) == 2.0 ** -17
    for code in range(256):
        half = np.array([(code & 0x80) << 8 | (code & 0x7F) << 7], np.uint16).view(np.float16)
        assert F.decode(FMT, code) == float(half[0])
    assert F.encode(FMT, 1.0) == 0x78
    assert F.encode(FMT, 1.0625) == 0x79 and F.encode(FMT, -1.0625) == 0xF9   # ties away
    assert F.encode(FMT, 1.8) == 0x7E and F.encode(FMT, 1.875) == 0x7E   # saturates at 1.75
    assert F.encode(FMT, math.inf) == 0x7E and F.encode(FMT, -math.inf) == 0xFE
    # A float32 is narrowed to float16 towards zero first: just under the tie stays below it.
    assert F.encode(FMT, float(np.nextafter(np.float32(1.0625), np.float32(0)))) == 0x78
    # NaN: a float32's loses its sign on the way (cvt.rz), a float16's keeps it.
    assert F.encode(FMT, -math.nan) == 0x7E and F.encode(FMT, math.nan) == 0x7E
    assert F.encode(FMT, -math.nan, from_fp16=True) == 0xFE
    assert F.encode(FMT, -0.0) == 0x80 and F.encode(FMT, 2.0 ** -19) == 0x00


def test_interpreter_matches_the_reference_on_every_float16_and_many_float32():
    expected = [F.encode(FMT, float(h), from_fp16=True) for h in EVERY_HALF]
    assert tables.encode(FMT, EVERY_HALF, from_fp16=True).tolist() == expected
    floats = _floats(30_000)
    assert tables.encode(FMT, floats).tolist() == [F.encode(FMT, float(x)) for x in floats]
    assert tables.decode(FMT, np.arange(256)).tolist() == [F.decode(FMT, c) for c in range(256)]


def test_backend_ir_matches_the_reference_on_every_float16():
    """backend.float8.encode_from_half and decode_to_f32, run on this CPU through LLVM."""
    import llvmlite.binding as llvm
    import llvmlite.ir as ir

    from aotk.backend import float8 as backend
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    module = ir.Module("e4b15")
    encode = ir.Function(module, ir.FunctionType(ir.IntType(8), [ir.IntType(16)]), "encode")
    b = ir.IRBuilder(encode.append_basic_block())
    b.ret(backend.encode_from_half(b, b.bitcast(encode.args[0], ir.HalfType())))
    decode = ir.Function(module, ir.FunctionType(ir.FloatType(), [ir.IntType(8)]), "decode")
    b = ir.IRBuilder(decode.append_basic_block())
    b.ret(backend.decode_to_f32(b, FMT, decode.args[0]))
    machine = llvm.Target.from_default_triple().create_target_machine()
    engine = llvm.create_mcjit_compiler(llvm.parse_assembly(str(module)), machine)
    engine.finalize_object()
    run_encode = ctypes.CFUNCTYPE(ctypes.c_uint8, ctypes.c_uint16)(
        engine.get_function_address("encode"))
    run_decode = ctypes.CFUNCTYPE(ctypes.c_float, ctypes.c_uint8)(
        engine.get_function_address("decode"))
    bits = EVERY_HALF.view(np.uint16)
    wrong = [hex(int(h)) for h, v in zip(bits, EVERY_HALF)
             if run_encode(int(h)) != F.encode(FMT, float(v), from_fp16=True)]
    assert not wrong, wrong[:5]
    assert [run_decode(c) for c in range(256)] == [F.decode(FMT, c) for c in range(256)]


@aotk.jit
def _round_trip(x_ptr, codes_ptr, back_ptr, N: tl.constexpr, BY_NAME: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(x_ptr + offs)
    if BY_NAME:
        y = tl.extra.cuda.convert_custom_float8_sm80(x, tl.float8e4b15)
        back = tl.extra.cuda.convert_custom_float8_sm70(y, tl.float32)
    else:
        y = x.to(tl.float8e4b15, fp_downcast_rounding="rtz")   # accepted, changes nothing
        back = y.to(tl.float32)
    tl.store(codes_ptr + offs, y.to(tl.uint8, bitcast=True))
    tl.store(back_ptr + offs, back)


@pytest.mark.parametrize("by_name", [False, True])
@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_kernel_casts_in_the_interpreter(dtype, by_name):
    if dtype == np.float32:
        x = np.random.default_rng(1).choice(_floats(20_000), 4096)
    else:
        x = np.ascontiguousarray(EVERY_HALF[::16])
    codes, back = np.zeros(4096, np.uint8), np.zeros(4096, np.float32)
    _round_trip[(1,)](x, codes, back, N=4096, BY_NAME=by_name)
    expected = [F.encode(FMT, float(v), from_fp16=dtype == np.float16) for v in x]
    assert codes.tolist() == expected
    assert back.tolist() == [F.decode(FMT, c) for c in expected]


@aotk.jit
def _bf16_and_arithmetic(x_ptr, codes_ptr, sum_ptr, wide_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(x_ptr + offs)
    y = x.to(tl.bfloat16).to(tl.float8e4b15)   # bfloat16: through float32, exactly
    tl.store(codes_ptr + offs, y.to(tl.uint8, bitcast=True))
    tl.store(sum_ptr + offs, (y + y).to(tl.uint8, bitcast=True))   # fp32, rounded back
    tl.store(wide_ptr + offs, y.to(tl.float64))


def test_bf16_source_fp64_target_and_arithmetic():
    x = np.linspace(-1.9, 1.9, 256, dtype=np.float32)
    codes, sums = np.zeros(256, np.uint8), np.zeros(256, np.uint8)
    wide = np.zeros(256, np.float64)
    _bf16_and_arithmetic[(1,)](x, codes, sums, wide, N=256)
    bf16 = (x.view(np.uint32) + 0x7FFF + ((x.view(np.uint32) >> 16) & 1)) & 0xFFFF0000
    expected = [F.encode(FMT, float(v)) for v in bf16.view(np.float32)]
    assert codes.tolist() == expected
    assert sums.tolist() == [F.encode(FMT, 2 * F.decode(FMT, c)) for c in expected]
    assert wide.tolist() == [F.decode(FMT, c) for c in expected]


@aotk.jit
def _dot(a_ptr, b_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    rm, rn, rk = tl.arange(0, M), tl.arange(0, N), tl.arange(0, K)
    a = tl.load(a_ptr + rm[:, None] * K + rk[None, :]).to(tl.float8e4b15, bitcast=True)
    b = tl.load(b_ptr + rk[:, None] * N + rn[None, :])
    tl.store(out_ptr + rm[:, None] * N + rn[None, :], tl.dot(a, b))


def test_dot_upcasts_to_fp16_and_takes_an_fp16_operand():
    rng = np.random.default_rng(3)
    a = rng.integers(0, 256, (16, 16), dtype=np.uint8)
    b = rng.standard_normal((16, 16)).astype(np.float16)
    out = np.zeros((16, 16), np.float32)
    _dot[(1,)](a, b, out, M=16, N=16, K=16)
    reference = tables.decode(FMT, a).astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(out, reference, rtol=1e-5, atol=1e-5)


@aotk.jit
def _cast_between(x_ptr, out_ptr, SOURCE: tl.constexpr, TARGET: tl.constexpr):
    x = tl.load(x_ptr).to(SOURCE, bitcast=True)
    tl.store(out_ptr, x.to(TARGET).to(tl.float32))


@pytest.mark.parametrize("source, holder, target, message", [
    (tl.int32, np.int32, tl.float8e4b15,
     "cannot cast int32 to float8e4b15: it is converted to from float16 and float32 only"),
    (tl.float64, np.float64, tl.float8e4b15, "cannot cast float64 to float8e4b15"),
    (tl.float8e4b15, np.uint8, tl.int8, "cannot cast float8e4b15 to int8"),
    (tl.float8e4b15, np.uint8, tl.float8e4nv, "cannot cast float8e4b15 to float8e4nv"),
])
def test_casts_it_does_not_have_are_errors_naming_both_types(source, holder, target, message):
    with pytest.raises(aotk.CompilationError, match=message):
        _cast_between[(1,)](np.zeros(1, holder), np.zeros(1, np.float32), SOURCE=source,
                            TARGET=target)


def test_convert_custom_float8_takes_only_its_conversions():
    @aotk.jit
    def wrong(x_ptr, out_ptr):
        tl.store(out_ptr, tl.extra.cuda.convert_custom_float8_sm80(tl.load(x_ptr), tl.float16))
    with pytest.raises(aotk.CompilationError, match="not float32 to float16"):
        wrong[(1,)](np.zeros(1, np.float32), np.zeros(1, np.float16))


@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
def test_compiles_with_tritons_conversion_instructions(target):
    compiled = aotk.compile(_round_trip, "*fp32:16, *u8:16, *fp32:16",
                            constants=dict(N=256, BY_NAME=False), target=target)
    assert "cvt.rz.f16.f32" in compiled.asm["ptx"]   # float32 narrowed as Triton's does
    compiled = aotk.compile(_dot, "*u8:16, *fp16:16, *fp32:16",
                            constants=dict(M=64, N=64, K=32), target=target)
    assert "mma" in compiled.asm["ptx"]   # tensor cores, on the fp16 operands


def test_signature_and_c_type():
    from aotk.buildsys.cgen import c_type
    from aotk.ir.signature import Signature
    signature = Signature.parse("*fp8e4b15:16", ["x"])
    assert str(signature) == "*fp8e4b15:16"
    assert c_type(signature.parameters[0].type) == "uint8_t *"


def _load_written(name: str, under_aotk: bool):
    spec = importlib.util.spec_from_file_location(name, WRITTEN)
    module = importlib.util.module_from_spec(spec)
    if under_aotk:
        with redirect_triton():
            spec.loader.exec_module(module)
    else:
        spec.loader.exec_module(module)
    return module


@pytest.mark.gpu
def test_gpu_bits_equal_tritons_own_conversions():
    """Every float16, 200,000 random float32 bit patterns and every code, through Triton's
    kernels and the same kernels under aotk, on this GPU; and both against the reference."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("triton")
    ours, theirs = _load_written("e4b15_by_aotk", True), _load_written("e4b15_by_triton", False)
    assert "aotk" in type(ours.to_e4b15).__module__
    assert "aotk" not in type(theirs.to_e4b15).__module__
    halves = torch.from_numpy(EVERY_HALF.copy()).cuda()
    floats = torch.from_numpy(_floats()).cuda()
    for source in (halves, floats):
        for by_name in (False, True):
            results = []
            for module in (ours, theirs):
                codes = torch.zeros(source.numel(), dtype=torch.uint8, device="cuda")
                module.to_e4b15[(triton_cdiv(source.numel(), 1024),)](
                    source, codes, source.numel(), BLOCK=1024, BY_NAME=by_name)
                results.append(codes.cpu().numpy())
            assert np.array_equal(results[0], results[1]), (source.dtype, by_name)
        expected = tables.encode(FMT, source.cpu().numpy(), from_fp16=source is halves)
        assert np.array_equal(results[0], expected)
    decoded = []
    for module in (ours, theirs):
        codes = torch.arange(256, dtype=torch.int32).to(torch.uint8).cuda()
        half = torch.zeros(256, dtype=torch.float16, device="cuda")
        wide = torch.zeros(256, dtype=torch.float32, device="cuda")
        module.from_e4b15[(1,)](codes, half, wide, 256, BLOCK=256)
        decoded.append((half.cpu().numpy().view(np.uint16), wide.cpu().numpy().view(np.uint32)))
    assert np.array_equal(decoded[0][0], decoded[1][0])
    assert np.array_equal(decoded[0][1], decoded[1][1])
    assert decoded[0][1].view(np.float32).tolist() == [F.decode(FMT, c) for c in range(256)]
    a = torch.randint(0, 256, (64, 32), dtype=torch.int32).to(torch.uint8).cuda()
    b = torch.randint(0, 256, (32, 64), dtype=torch.int32).to(torch.uint8).cuda()
    products = []
    for module in (ours, theirs):
        out = torch.zeros(64, 64, device="cuda")
        module.dot_e4b15[(1,)](a, b, out, M=64, N=64, K=32)
        products.append(out.cpu())
    reference = tables.decode(FMT, a.cpu().numpy()).astype(np.float64) @ \
        tables.decode(FMT, b.cpu().numpy()).astype(np.float64)
    np.testing.assert_allclose(products[0].numpy(), reference, rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(products[0], products[1], rtol=1e-5, atol=1e-4)


def triton_cdiv(a, b):
    return (a + b - 1) // b
