"""Frontend: Python AST -> kir listing, and compile errors that point at the right line."""
import pytest

import aotk
from aotk.ir import types as T
from tests.kernels import frontend_cases as cases

FP32_PTR = T.PointerType(T.float32)


def _kir(kernel, types, hints=None, constants=None):
    return str(kernel.kir(types, hints or {}, constants or {}))


def test_add_kernel_kir_listing():
    text = _kir(cases.add_kernel, {"x_ptr": FP32_PTR, "y_ptr": FP32_PTR, "out_ptr": FP32_PTR,
                                   "n": T.int32}, {"x_ptr": 16}, {"BLOCK": 256})
    assert "kir.func @add_kernel(%0: *fp32, %1: *fp32, %2: *fp32, %3: i32)" in text
    assert "x_ptr=%0:16" in text
    assert "arange [start=0 end=256] : i32[256]" in text
    assert text.count("load [has_mask=True]") == 2
    assert "store [has_mask=True]" in text
    assert "add %" in text and ": fp32[256]" in text


def test_constexpr_folds_in_python():
    text = _kir(cases.add_kernel, {"x_ptr": FP32_PTR, "y_ptr": FP32_PTR, "out_ptr": FP32_PTR,
                                   "n": T.int32}, {}, {"BLOCK": 64})
    assert "constant [value=64] : i32" in text


@pytest.mark.parametrize("kernel, types, constants, line, fragment", [
    (cases.other_without_mask, {"x_ptr": FP32_PTR}, {"BLOCK": 16}, 19, "`other` needs a `mask`"),
    (cases.not_power_of_two, {"x_ptr": T.PointerType(T.int32)}, {}, 24, "powers of two"),
    (cases.mixed_signedness, {"a_ptr": T.PointerType(T.int32), "b_ptr": T.PointerType(T.uint32)},
     {"BLOCK": 16}, 33, "different signedness"),
    (cases.block_condition_if, {"x_ptr": FP32_PTR, "n": T.int32}, {}, 38, "must be a scalar"),
    (cases.unknown_name, {"x_ptr": FP32_PTR}, {}, 44, "'undefined_thing' is not defined"),
    (cases.exp_of_int, {"x_ptr": FP32_PTR}, {"BLOCK": 16}, 50, "floating-point operand"),
    (cases.calls_helper, {"x_ptr": FP32_PTR}, {"BLOCK": 8}, 62, "BLOCK too small"),
    (cases.loop_changes_type, {"x_ptr": FP32_PTR, "n": T.int32}, {}, 71,
     "'acc' has initial type i32 but is re-assigned to fp32"),
    (cases.return_in_loop, {"x_ptr": FP32_PTR, "n": T.int32}, {}, 80, "inside a loop"),
    (cases.branches_disagree, {"x_ptr": FP32_PTR, "n": T.int32}, {}, 86,
     "'value' has type fp32 in the `if` branch but i32"),
    # Triton's rule and wording for /, // and % between integers of different signedness
    # (bool counts as unsigned): test_core's test_bin_op matches "Cannot use .* because
    # they have different signedness".
    (cases.mixed_signedness_true_division,
     {"a_ptr": T.PointerType(T.int32), "b_ptr": T.PointerType(T.uint32)}, {"BLOCK": 16}, 98,
     "Cannot use / with int32 and uint32 because they have different signedness"),
    (cases.bool_modulo_int, {"a_ptr": T.PointerType(T.int8), "b_ptr": T.PointerType(T.int8)},
     {"BLOCK": 16}, 106, "Cannot use % with int8 and int1 because they have different signedness"),
])
def test_errors_name_file_line_and_caret(kernel, types, constants, line, fragment):
    with pytest.raises(aotk.CompilationError) as info:
        kernel.kir(types, {}, constants)
    assert_points_at(str(info.value), "frontend_cases.py", line, fragment)


def assert_points_at(message, filename, line, fragment):
    """A compile error's text: ``fragment``, then the file and line, the source line and a
    caret under a non-blank character of it."""
    assert f"{filename}:{line}:" in message
    assert fragment in message
    source_line, caret_line = message.splitlines()[1:3]
    assert caret_line.strip() == "^"
    assert source_line[caret_line.index("^")] != " "


def test_inlined_helper_with_defaults_and_multiple_returns():
    text = _kir(cases.calls_helper, {"x_ptr": FP32_PTR}, {}, {"BLOCK": 32})
    assert "mul %" in text and "add %" in text
    # static_range(2) unrolls: the loop body appears twice.
    assert text.count("= add") >= 3


def test_missing_constexpr_is_a_clear_error():
    with pytest.raises(TypeError, match="missing value for constexpr 'BLOCK'"):
        cases.add_kernel.kir({"x_ptr": FP32_PTR, "y_ptr": FP32_PTR, "out_ptr": FP32_PTR,
                              "n": T.int32}, {}, {})


def test_calling_a_kernel_directly_is_an_error():
    with pytest.raises(RuntimeError, match=r"add_kernel\[grid\]"):
        cases.add_kernel(1, 2, 3)


def test_runtime_loop_is_a_for_region_with_carried_values():
    from tests.kernels.control_flow import strided_sum_kernel
    text = _kir(strided_sum_kernel, {"x_ptr": FP32_PTR, "out_ptr": FP32_PTR, "n": T.int32}, {}, {"BLOCK": 16})
    # acc (block), count (i32) and big (i64) are carried; the if yields the new acc.
    assert "= for [direction=up]" in text and ": fp32[16], i32, i64 {" in text
    assert "= if %" in text and "yield" in text
    assert "= while %" in text and "condition %" in text
