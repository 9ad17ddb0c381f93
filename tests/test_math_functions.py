"""Math functions of aotk.semantic's MATH_FUNCTIONS (tl.erf, ...): one row per layer, the tl
builtin made from the semantic row, Triton's dtype rule (fp32 / fp64 only) with a clear
error, and the generic kir op they share."""
import numpy as np
import pytest

import aotk
import aotk.language as tl
from aotk import semantic
from aotk.backend.math import LIBDEVICE
from aotk.interpreter.math import MATH


@aotk.jit
def _erf_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.erf(tl.load(x_ptr + offs)))


def test_every_math_function_has_a_builtin_and_a_rule_in_each_layer():
    assert set(semantic.ALL_MATH_FUNCTIONS) == set(MATH) == set(LIBDEVICE)
    for name, row in semantic.ALL_MATH_FUNCTIONS.items():
        assert set(LIBDEVICE[name]) == set(row.operands), name
        module = tl.math if name == "umulhi" else tl.extra.libdevice
        assert getattr(module, name).__name__ == name and name in module.__all__


def test_triton_module_paths():
    assert tl.extra.cuda.libdevice.tanh is tl.extra.libdevice.tanh
    assert {"erf", "fdiv", "div_rn", "sqrt_rn", "umulhi", "fma", "exp"} <= set(tl.math.__all__)
    assert tl.standard._log2(64) == 6 and tl.standard._is_power_of_two(48) == False   # noqa: E712
    for name in ("erf", "div_rn", "sqrt_rn", "umulhi", "fdiv", "add", "TRITON_MAX_TENSOR_NUMEL"):
        assert name in tl.__all__


@aotk.jit
def _uses_missing_name(x_ptr, NAME: tl.constexpr):
    tl.store(x_ptr, getattr(tl, NAME)(tl.load(x_ptr)))


def test_a_triton_name_aotk_lacks_is_one_clear_error():
    from aotk.language.missing import NOT_PROVIDED
    if not NOT_PROVIDED["aotk.language"]:
        pytest.skip("aotk now provides every name of Triton's tl")
    name = sorted(NOT_PROVIDED["aotk.language"])[0]
    with pytest.raises(aotk.CompilationError, match=f"tl.{name} is not provided by aotk yet"):
        _uses_missing_name[(1,)](np.zeros(1, np.float32), NAME=name)
    with pytest.raises(AttributeError, match="module 'tl' has no attribute 'no_such_name'"):
        tl.no_such_name   # noqa: B018


@aotk.jit
def _compile_time_helpers(x_ptr, N: tl.constexpr):
    BLOCK: tl.constexpr = aotk.next_power_of_2(N)
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, offs + aotk.cdiv(N, 4), mask=offs < N)


def test_cdiv_and_next_power_of_2_run_at_compile_time_in_kernels():
    x = np.zeros(6, np.int32)
    _compile_time_helpers[(1,)](x, N=6)
    assert x.tolist() == [2, 3, 4, 5, 6, 7]
    assert aotk.cdiv(10, 4) == 3 and aotk.next_power_of_2(33) == 64


def test_erf_is_one_math_op_in_kir():
    listing = str(aotk.compile(_erf_kernel, "*fp32:16, *fp32:16", {"BLOCK": 128},
                               target="sm_80").kir)
    assert "math [function=erf]" in listing


def test_erf_needs_fp32_or_fp64():
    x = np.linspace(-2, 2, 16).astype(np.float16)
    with pytest.raises(aotk.CompilationError, match=r"tl.erf needs fp32 or fp64 operands, got "
                                                    r"float16; cast with .to\(tl.float32\)"):
        _erf_kernel[(1,)](x, np.empty_like(x), BLOCK=16)


@aotk.jit
def _erf_two_operands(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.store(x_ptr + offs, tl.erf(x, x))


def test_math_function_arity_is_checked():
    x = np.zeros(16, np.float32)
    with pytest.raises(aotk.CompilationError, match="erf"):
        _erf_two_operands[(1,)](x, BLOCK=16)


@aotk.jit
def _sqrt_rn_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.sqrt_rn(tl.load(x_ptr + offs)))


def _sqrt_inputs():
    rng = np.random.default_rng(7)
    # Random bit patterns of positive finite floats: every exponent, not just a range.
    bits = rng.integers(0, 0x7F800000, 4096, dtype=np.uint32)
    return bits.view(np.float32)


def test_sqrt_rn_is_correctly_rounded_in_the_interpreter():
    x = _sqrt_inputs()
    out = np.empty_like(x)
    _sqrt_rn_kernel[(1,)](x, out, BLOCK=4096)
    assert np.array_equal(out, np.sqrt(x))   # numpy's float32 sqrt is correctly rounded


@pytest.mark.gpu
def test_sqrt_rn_is_correctly_rounded_on_the_gpu():
    torch = pytest.importorskip("torch")
    x = _sqrt_inputs()
    out = torch.empty(x.size, dtype=torch.float32, device="cuda")
    _sqrt_rn_kernel[(1,)](torch.from_numpy(x).cuda(), out, BLOCK=4096)
    assert np.array_equal(out.cpu().numpy(), np.sqrt(x))
