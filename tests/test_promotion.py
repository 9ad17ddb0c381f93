"""The promotion rules of DESIGN.md sections 2 and 7, one row each, through kir types."""
import numpy as np
import pytest

import aotk
import aotk.language as tl
from aotk import semantic
from aotk.ir import types as T


@pytest.mark.parametrize("a, b, expected", [
    (T.int1, T.int8, T.int8),            # kind: bool < int
    (T.int64, T.float16, T.float16),     # kind: int < float, whatever the width
    (T.float16, T.float32, T.float32),   # width within floats
    (T.float16, T.bfloat16, T.float16),  # fp16 beats bf16 at equal width
    (T.bfloat16, T.float16, T.float16),
    (T.int8, T.int32, T.int32),          # width within ints
    (T.int32, T.uint32, T.uint32),       # unsigned beats signed at equal width
    (T.uint8, T.int16, T.int16),         # a wider signed beats a narrower unsigned
    (T.uint32, T.int64, T.int64),
])
def test_tensor_tensor_promotion(a, b, expected):
    assert semantic.promote_dtypes(a, b) == expected
    assert semantic.promote_dtypes(b, a) == expected


@pytest.mark.parametrize("tensor_dtype, literal, expected", [
    (T.uint8, 3, T.uint8),             # equal kind: the literal does not take part
    (T.int8, 100000, T.int8),
    (T.float16, 2.5, T.float16),
    (T.int1, 5, T.int32),              # higher kind: smallest of i32 < u32 < i64 < u64
    (T.int1, 2**31, T.uint32),
    (T.int1, 2**40, T.int64),
    (T.int1, 2**63, T.uint64),
    (T.int8, 1.5, T.float32),          # fp32 < fp64 that holds it
    (T.int8, 1e300, T.float64),
])
def test_literal_promotion(tensor_dtype, literal, expected):
    assert semantic.promote_with_literal(tensor_dtype, literal) == expected


@aotk.jit
def _mix_kernel(x_ptr, out_ptr, s, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs) + s)


def test_runtime_scalar_takes_part_in_promotion():
    """int8 block + n (i32 runtime scalar) is int32, unlike a literal."""
    function = _mix_kernel.kir({"x_ptr": T.PointerType(T.int8), "out_ptr": T.PointerType(T.int32),
                                "s": T.int32}, {}, {"BLOCK": 16})
    adds = [op for op in function.body if op.opcode == "add"]
    assert adds and adds[0].result.element == T.int32


class _FakeCudaArray:
    __cuda_array_interface__ = {"data": (0, False), "typestr": "<f4", "shape": (4,), "version": 3}


def test_mixing_numpy_and_cuda_arrays_is_a_type_error():
    with pytest.raises(TypeError, match="cannot mix numpy arrays and CUDA arrays"):
        _mix_kernel[(1,)](np.zeros(16, np.int8), _FakeCudaArray(), 1, BLOCK=16)


def test_grid_callable_receives_every_argument_by_name_and_num_warps_is_accepted():
    seen = {}

    def grid(meta):
        seen.update(meta)
        return (1,)
    x = np.arange(16, dtype=np.int8)
    out = np.zeros(16, np.int32)
    _mix_kernel[grid](x, out, 1000, BLOCK=16, num_warps=8)
    # As in Triton: the grid function sees the launch's arguments, constexprs included.
    assert sorted(seen) == ["BLOCK", "out_ptr", "s", "x_ptr"]
    assert seen["BLOCK"] == 16 and seen["s"] == 1000 and seen["x_ptr"] is x
    np.testing.assert_array_equal(out, x.astype(np.int32) + 1000)


def test_store_rejects_a_load_only_cache_modifier():
    @aotk.jit
    def bad(x_ptr):
        tl.store(x_ptr, 1.0, cache_modifier=".ca")
    with pytest.raises(aotk.CompilationError, match="unknown cache modifier '.ca'"):
        bad.kir({"x_ptr": T.PointerType(T.float32)}, {}, {})


@aotk.jit
def _division_kernel(x_ptr, y_ptr, out_ptr, OP: tl.constexpr, LITERAL: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, 16))
    y = tl.load(y_ptr + tl.arange(0, 16))
    if LITERAL:
        z = x / 3.0 if OP == "/" else x % 3.0
    else:
        z = x / y if OP == "/" else x % y
    tl.static_assert(z.dtype == tl.float32 or x.dtype == tl.float64)
    tl.store(out_ptr + tl.arange(0, 16), z)


@pytest.mark.parametrize("op", ["/", "%"])
@pytest.mark.parametrize("x, y", [(np.float16, np.float16), (np.float16, np.int32),
                                  (np.float16, np.float32)])
@pytest.mark.parametrize("literal", [False, True])
def test_16_bit_float_division_computes_in_fp32(op, x, y, literal):
    """Triton's computation type for / and %: fp16 and bf16 operands divide in fp32, and the
    result is fp32 (the static_assert in the kernel checks the type; the values below
    check that nothing was rounded to 16 bits)."""
    rng = np.random.default_rng(3)
    a = rng.uniform(1, 100, 16).astype(x)
    b = rng.uniform(1, 7, 16).astype(y) if y != np.int32 else rng.integers(1, 7, 16, dtype=np.int32)
    out = np.zeros(16, np.float32)
    _division_kernel[(1,)](a, b, out, OP=op, LITERAL=literal)
    divisor = np.float32(3.0) if literal else b.astype(np.float32)
    expected = a.astype(np.float32) / divisor if op == "/" else np.fmod(a.astype(np.float32), divisor)
    np.testing.assert_allclose(out, expected, rtol=1e-6)


def test_bfloat16_division_is_fp32():
    listing = str(_division_kernel.kir({"x_ptr": T.PointerType(T.bfloat16),
                                        "y_ptr": T.PointerType(T.bfloat16),
                                        "out_ptr": T.PointerType(T.float32)}, {},
                                       {"OP": "/", "LITERAL": False}))
    (division,) = [line for line in listing.splitlines() if "= fdiv" in line]
    assert division.split("//")[0].rstrip().endswith(": fp32[16]")


@aotk.jit
def _assigned_numbers_kernel(x16_ptr, x8_ptr, out32_ptr, out8_ptr):
    offs = tl.arange(0, 4)
    acc = 0.0                                # an fp32 value, as in Triton
    acc = acc + tl.load(x16_ptr + offs)      # fp32 + fp16 -> fp32
    tl.static_assert(acc.dtype == tl.float32)
    one = 1                                  # an int32 value: it takes part in promotion
    wide = tl.load(x8_ptr + offs) + one
    tl.static_assert(wide.dtype == tl.int32)
    ONE: tl.constexpr = 1                    # a compile-time value: it does not
    narrow = tl.load(x8_ptr + offs) + ONE
    tl.static_assert(narrow.dtype == tl.int8)
    total = 0
    total = total.to(tl.int64)               # numbers bound to names have tensor methods
    filled = tl.full([4], one, one.dtype)
    tl.store(out32_ptr + offs, acc.to(tl.int32) + wide + filled + total.to(tl.int32))
    tl.store(out8_ptr + offs, narrow)


def test_a_number_assigned_to_a_name_is_a_tensor_of_its_literal_type():
    """Triton's assignment rule: plain names bind numbers as 0-d tensors (int32, fp32...),
    which promote like tensors; only NAME: tl.constexpr = ... stays compile-time."""
    x16 = np.array([0.5, 1.25, -2.0, 3.0], np.float16)
    x8 = np.array([127, -128, 5, 0], np.int8)
    out32, out8 = np.zeros(4, np.int32), np.zeros(4, np.int8)
    _assigned_numbers_kernel[(1,)](x16, x8, out32, out8)
    expected = np.trunc(x16.astype(np.float32)).astype(np.int32) + (x8.astype(np.int32) + 1) + 1
    assert out32.tolist() == expected.tolist()
    assert out8.tolist() == (x8 + np.int8(1)).tolist()    # wraps at 127: int8 arithmetic


@aotk.jit
def _assigned_block_size(x_ptr):
    N = 8
    tl.store(x_ptr + tl.arange(0, N), 1)


def test_a_block_size_bound_by_plain_assignment_says_how_to_keep_it_compile_time():
    with pytest.raises(aotk.CompilationError, match=r"keep it compile-time with `NAME: "
                                                    r"tl.constexpr = \.\.\.`"):
        _assigned_block_size[(1,)](np.zeros(8, np.int32))
