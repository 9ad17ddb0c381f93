"""Programs Triton rejects are rejected here too, with messages that say what Triton's say
(test_core.py matches them by pattern) and then how to fix the program."""
import numpy as np
import pytest

import aotk
import aotk.language as tl


@aotk.jit
def _bitwise_on_floats(x_ptr, y_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs) & tl.load(y_ptr + offs))


def test_bitwise_op_on_floats_names_both_operand_types():
    x, y = np.zeros(16, np.int8), np.zeros(16, np.float32)
    with pytest.raises(aotk.CompilationError,
                       match=r"invalid operands of type int8 and float32: & needs integer"):
        _bitwise_on_floats[(1,)](x, y, BLOCK=16)


@aotk.jit
def _huge_constexpr_local(x_ptr):
    huge: tl.constexpr = 0xFFFFFFFFFFFFFF
    tl.store(x_ptr, tl.load(x_ptr) + huge)


def test_literal_out_of_range_for_the_tensor_type():
    with pytest.raises(aotk.CompilationError,
                       match="literal 72057594037927935 is out of range for type int32"):
        _huge_constexpr_local[(1,)](np.zeros(1, np.int32))


@aotk.jit
def _annotated_constexpr_local(x_ptr):
    BLOCK: tl.constexpr = 8
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, offs)


def test_annotated_constexpr_local_is_a_compile_time_value():
    x = np.zeros(8, np.int32)
    _annotated_constexpr_local[(1,)](x)
    assert x.tolist() == list(range(8))


@aotk.jit
def _annotated_constexpr_from_tensor(x_ptr):
    value: tl.constexpr = tl.load(x_ptr)
    tl.store(x_ptr, value)


def test_annotated_constexpr_local_rejects_a_runtime_value():
    with pytest.raises(aotk.CompilationError, match="a tl.constexpr local needs a compile-time"):
        _annotated_constexpr_from_tensor[(1,)](np.zeros(1, np.int32))


@aotk.jit
def _slice_index(x_ptr, BLOCK: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, BLOCK))
    tl.store(x_ptr + tl.arange(0, BLOCK), x[2:])


def test_unsupported_tensor_index():
    with pytest.raises(aotk.CompilationError, match=r"unsupported tensor index: slice\(2, None"):
        _slice_index[(1,)](np.zeros(16, np.int32), BLOCK=16)


@aotk.jit
def _program_id_of_axis(x_ptr, AXIS: tl.constexpr, NUM_PROGRAMS: tl.constexpr):
    if NUM_PROGRAMS:
        tl.store(x_ptr, tl.num_programs(AXIS))
    else:
        tl.store(x_ptr, tl.program_id(AXIS))


@pytest.mark.parametrize("num_programs", [False, True])
def test_a_grid_axis_past_2_is_tritons_error(num_programs):
    name = "num_programs" if num_programs else "program_id"
    with pytest.raises(aotk.CompilationError,
                       match=f"{name} axis must be 0, 1, or 2 but got 20") as caught:
        _program_id_of_axis[(1,)](np.zeros(1, np.int32), AXIS=20, NUM_PROGRAMS=num_programs)
    assert "but got 20" in str(caught.value.__cause__)   # where test_core looks
