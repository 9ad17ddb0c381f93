"""Result types of the named reductions and scans, as Triton 3.6 gives them: bfloat16 is
reduced and scanned in fp32; tl.max / tl.min without indices widen every type narrower
than 32 bits (floats to fp32, integers to int32); tl.sum and tl.cumsum accumulate narrow
integers in 32 bits; argmax / argmin return int32 indices."""
import numpy as np
import pytest

import aotk
import aotk.language as tl
from aotk.ir import types as T


@aotk.jit
def _reduce_kernel(x_ptr, out_ptr, OP: tl.constexpr, BLOCK: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, BLOCK))
    if OP == "max":
        y = tl.max(x, axis=0)
    elif OP == "min":
        y = tl.min(x, axis=0)
    elif OP == "max_with_index":
        y, index = tl.max(x, axis=0, return_indices=True)
    elif OP == "argmax":
        y = tl.argmax(x, axis=0)
    elif OP == "sum":
        y = tl.sum(x, axis=0)
    elif OP == "cumsum":
        y = tl.cumsum(x, axis=0)
    else:
        y = tl.cumprod(x, axis=0)
    tl.store(out_ptr + tl.arange(0, BLOCK), y)


def _result_type(op, element):
    listing = str(_reduce_kernel.kir({"x_ptr": T.PointerType(element),
                                      "out_ptr": T.PointerType(T.float64)}, {},
                                     {"OP": op, "BLOCK": 64}))
    kinds = ("= argreduce",) if op == "argmax" else ("= reduce", "= scan")
    line = [line for line in listing.splitlines() if any(k in line for k in kinds)][-1]
    result_types = line.split("//")[0].rsplit(": ", 1)[1]
    return result_types.split(",")[0].split("[")[0].strip()


@pytest.mark.parametrize("op, element, expected", [
    ("max", T.bfloat16, "fp32"), ("max", T.float16, "fp32"), ("max", T.int8, "i32"),
    ("max", T.uint16, "i32"), ("max", T.int1, "i32"), ("max", T.float32, "fp32"),
    ("max", T.int64, "i64"), ("min", T.int16, "i32"), ("min", T.bfloat16, "fp32"),
    ("max_with_index", T.float16, "fp16"), ("max_with_index", T.bfloat16, "fp32"),
    ("max_with_index", T.int8, "i8"), ("argmax", T.bfloat16, "i32"),
    ("sum", T.int8, "i32"), ("sum", T.uint8, "u32"), ("sum", T.bfloat16, "bf16"),
    ("cumsum", T.bfloat16, "fp32"), ("cumsum", T.int16, "i32"), ("cumprod", T.bfloat16, "fp32"),
    ("cumprod", T.int8, "i8"),
])
def test_result_types_follow_triton(op, element, expected):
    assert _result_type(op, element) == expected


@aotk.jit
def _sum_of_bools(out_ptr, in_dtype: tl.constexpr, out_dtype: tl.constexpr):
    x = tl.full((32, 32), 1, dtype=in_dtype)
    tl.store(out_ptr, tl.sum(x, dtype=out_dtype).to(tl.int32))


@pytest.mark.parametrize("out_dtype,expected", [(None, 1024), (tl.int1, 0)])
def test_a_sum_of_booleans_in_one_bit_wraps_as_on_the_gpu(out_dtype, expected):
    """test_core's test_sum_dtype: 1024 ones summed as int1 are 0 (an i1 add is a xor on
    the GPU); by default they are counted in 32 bits."""
    out = np.zeros(1, np.int32)
    _sum_of_bools[(1,)](out, tl.int1, out_dtype)
    assert out[0] == expected


@aotk.jit
def _bool_arithmetic(out_ptr):
    ones = tl.full((4,), 1, dtype=tl.int1)
    zeros = tl.full((4,), 0, dtype=tl.int1)
    tl.store(out_ptr + tl.arange(0, 4), (ones + ones).to(tl.int32))
    tl.store(out_ptr + 4 + tl.arange(0, 4), (zeros - ones).to(tl.int32))
    tl.store(out_ptr + 8 + tl.arange(0, 4), (ones * ones).to(tl.int32))


def test_boolean_add_and_sub_wrap_in_one_bit_as_on_the_gpu():
    out = np.full(12, -1, np.int32)
    _bool_arithmetic[(1,)](out)
    np.testing.assert_array_equal(out, [0] * 4 + [1] * 4 + [1] * 4)
