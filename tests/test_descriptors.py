"""Tensor descriptors: the pointer fallback against direct interpretation, the kir it builds,
compile errors for every Triton check, and the fallback's code on the GPU path.

The numpy references of the cases run in test_semantics.py, the GPU in test_gpu.py."""
import copy
import pathlib

import numpy as np
import pytest

import aotk
import aotk.language as tl
from aotk import interpreter
from aotk.ir import kir
from aotk.ir import types as T
from aotk.launch.arguments import NUMPY_DTYPES, scalar_type_of
from aotk.passes import axis_info
from aotk.passes.descriptors import lower_descriptors
from aotk.passes.layouts import memory_vector_width
from aotk.passes.rewrite import dot_operand_loads
from tests.kernels import descriptor_errors, descriptors
from tests.test_frontend import assert_points_at

CASES_BY_NAME = {case.name: case for case in descriptors.CASES}
FP32_PTR = T.PointerType(T.float32)
FP16_PTR = T.PointerType(T.float16)


def _interpreter_kir(case, args):
    """The kir an interpreter launch of ``case`` on ``args`` runs (as ``JITFunction.run``
    builds it: arrays are pointers, scalars typed as at a Python launch)."""
    kernel = case.kernel
    types = {name: T.PointerType(NUMPY_DTYPES[args[name].dtype])
             if isinstance(args[name], np.ndarray) else scalar_type_of(args[name])
             for name in kernel.runtime_names}
    return kernel.kir(types, {}, case.constants)


def _run(function, case, args):
    grid = tuple(case.launch_grid(args))
    interpreter.run(function, grid + (1,) * (3 - len(grid)),
                    [args[p.name] for p in function.params])
    return {name: args[name] for name in case.outputs}


def _descriptor_ops(function):
    return [op for op in kir.walk(function.body) if op.opcode in kir.DESCRIPTOR_OPS]


@pytest.mark.parametrize("case", descriptors.CASES, ids=lambda c: c.name)
def test_pointer_fallback_matches_direct_interpretation(case):
    direct_args = case.make_args(np.random.default_rng(0))
    function = _interpreter_kir(case, direct_args)
    direct = _run(function, case, direct_args)
    lowered = copy.deepcopy(function)
    assert lower_descriptors(lowered) == len(_descriptor_ops(function)) > 0
    assert not _descriptor_ops(lowered)
    fallback = _run(lowered, case, case.make_args(np.random.default_rng(0)))
    for name in case.outputs:
        np.testing.assert_array_equal(fallback[name], direct[name], err_msg=name)


def _matmul_kir(hint=16):
    types = {name: FP16_PTR for name in ("a_ptr", "b_ptr", "c_ptr")}
    types.update({name: T.int32 for name in ("M", "N", "K", "stride_am", "stride_bk",
                                               "stride_cm")})
    hints = {name: hint for name in types} if hint else {}
    case = CASES_BY_NAME["descriptor-matmul-fp16-128x128x64"]
    return copy.deepcopy(descriptors.matmul_descriptor_kernel.kir(types, hints, case.constants))


def test_kir_listing_carries_the_descriptor_operands():
    text = str(_matmul_kir())
    assert text.count("descriptor_load [rank=2 block_shape=(64,32)]") == 1
    assert text.count("descriptor_load [rank=2 block_shape=(32,64)]") == 1
    assert "descriptor_store [rank=2 block_shape=(64,64)]" in text
    # The descriptor itself emits no op: only the constant last stride.
    assert "make_tensor_descriptor" not in text


def test_fallback_keeps_order_loc_and_result_values():
    function = _matmul_kir()
    loop = next(op for op in function.body if op.opcode == "for")
    body = loop.regions[0].body
    originals = [op for op in body if op.opcode == "descriptor_load"]
    results = [op.result for op in originals]
    assert lower_descriptors(function) == 3
    loads = [op for op in body if op.opcode == "load"]
    # The loads define the very values the dot reads, in the same order, at the same line.
    assert [load.result for load in loads] == results
    assert [load.loc for load in loads] == [op.loc for op in originals]
    dot = next(op for op in body if op.opcode == "dot")
    assert body.index(loads[1]) < body.index(dot)
    store = next(op for op in function.body if op.opcode == "store")
    assert store.attrs["has_mask"] and function.body[-1] is store


def test_keep_leaves_chosen_ops_in_place():
    function = _matmul_kir()
    kept = {id(op) for op in _descriptor_ops(function) if op.opcode == "descriptor_store"}
    assert lower_descriptors(function, keep=kept) == 2
    assert [op.opcode for op in _descriptor_ops(function)] == ["descriptor_store"]


def test_fallback_vectorizes_along_the_contiguous_last_dimension():
    """The unit stride is not multiplied in, so with 16-divisible shapes and strides axis
    info proves 16-byte vectors for both tiles, masks included."""
    function = _matmul_kir()
    lower_descriptors(function)
    infos = axis_info.analyze(function)
    memory_ops = [op for op in kir.walk(function.body) if op.opcode in ("load", "store")]
    assert [memory_vector_width(op, infos) for op in memory_ops] == [8, 8, 8]
    unhinted = _matmul_kir(hint=None)
    lower_descriptors(unhinted)
    infos = axis_info.analyze(unhinted)
    assert all(memory_vector_width(op, infos) == 1 for op in kir.walk(unhinted.body)
               if op.opcode in ("load", "store"))


def test_index_arithmetic_widens_only_for_64_bit_operands():
    def lowered_text(name):
        case = CASES_BY_NAME[name]
        function = copy.deepcopy(_interpreter_kir(case, case.make_args(np.random.default_rng(0))))
        lower_descriptors(function)
        return str(function)
    assert "i64[" not in lowered_text("descriptor-3d-fp32")
    wide = lowered_text("descriptor-3d-fp16-int64-strides")
    assert "cast %" in wide and "mul %" in wide and ": i64[4,4,32]" in wide


@aotk.jit
def _store_in_dot_loop(a_ptr, b_ptr, c_ptr, n, BLOCK: tl.constexpr):
    rows = tl.arange(0, BLOCK)
    c_desc = tl.make_tensor_descriptor(c_ptr, [n, n], [n, 1], [BLOCK, BLOCK])
    acc = tl.zeros((BLOCK, BLOCK), tl.float32)
    for k in range(0, n, BLOCK):
        a = tl.load(a_ptr + rows[:, None] * n + rows[None, :] + k)
        b = tl.load(b_ptr + rows[:, None] * n + rows[None, :] + k)
        acc = tl.dot(a, b, acc)
        c_desc.store([0, k], acc)


def test_loops_with_descriptor_stores_are_not_moved_across():
    function = _store_in_dot_loop.kir({"a_ptr": FP16_PTR, "b_ptr": FP16_PTR,
                                       "c_ptr": FP32_PTR, "n": T.int32}, {}, {"BLOCK": 16})
    loop = next(op for op in function.body if op.opcode == "for")
    assert dot_operand_loads(loop) is None


@aotk.jit
def _descriptor_properties(x_ptr, out_ptr, M, stride):
    d = tl.make_tensor_descriptor(x_ptr, [M, 64], [stride, 1], [8, 16])
    tl.static_assert(d.dtype == tl.float32)
    tl.store(out_ptr, d.shape[0])
    tl.store(out_ptr + 1, d.shape[1])
    tl.store(out_ptr + 2, d.strides[0])
    tl.store(out_ptr + 3, d.strides[1])
    tl.store(out_ptr + 4, d.block_shape[0] * 100 + d.block_shape[1])


def test_descriptor_properties_read_in_a_kernel():
    out = np.zeros(5, np.int32)
    _descriptor_properties[(1,)](np.zeros(4, np.float32), out, 37, 96)
    assert out.tolist() == [37, 64, 96, 1, 816]


ERROR_SOURCE = pathlib.Path(descriptor_errors.__file__).read_text().splitlines()


@pytest.mark.parametrize("check, fragment", [
    ("rank-0", "Expected 1 <= ndim <= 5 but got 0 dimensions"),
    ("rank-6", "Expected 1 <= ndim <= 5 but got 6 dimensions"),
    ("strides-count", "Expected 2 strides but got 1"),
    ("block-count", "Expected block_shape to have 2 dimensions but got 1"),
    ("base-block", "must be a scalar pointer, got a block of pointer<float32> of shape [16]"),
    ("base-int", "must be a scalar pointer, got a runtime int32 scalar"),
    ("block-power-of-two", "block dimensions must be powers of two, got shape [16, 24]"),
    ("block-runtime", "block_shape[1] must be a compile-time integer (tl.constexpr), got a "
                      "runtime int32 scalar"),
    ("16-bytes", "Descriptor block shape must have at least 16 bytes in the last dimension, "
                 "but got 2 * 4 = 8 bytes"),
    ("last-stride", "Tensor descriptor last dim must be 1 but got 2"),
    ("last-stride-runtime", "Tensor descriptor last dim must be 1 but got a runtime int32 "
                            "scalar"),
    ("shape-float", "shape[1] must be an integer (a Python int, a tl.constexpr or an integer "
                    "scalar), got float 2.5"),
    ("shape-float-tensor", "shape[1] must be an integer, got float32"),
    ("shape-block", "shape[0] must be a scalar, got a block of int32 of shape [4]"),
    ("stride-float", "strides[0] must be an integer, got float32"),
    ("padding-nan", "padding_option='nan' is not supported"),
    ("offsets-count", "expected 2 offsets, but got 1"),
    ("offset-int64", "offsets[0] is int64, but descriptor offsets are 32-bit"),
    ("offset-float", "offsets[1] must be an integer, got float32"),
    ("offset-too-big", "offsets[1] is 2147483648, which does not fit in 32 bits"),
    ("store-shape", "the stored value has shape [16] but the descriptor's block shape is "
                    "[16, 16]"),
    ("store-scalar", "a descriptor store needs a block of shape [16, 16], got 1.0"),
    ("not-a-descriptor", "needs a tensor descriptor (tl.make_tensor_descriptor), got a "
                         "runtime pointer<float32> scalar"),
])
def test_descriptor_errors_name_file_line_and_caret(check, fragment):
    with pytest.raises(aotk.CompilationError) as info:
        descriptor_errors.bad_descriptor.kir({"x_ptr": FP32_PTR, "n": T.int32,
                                              "big": T.int64, "f": T.float32},
                                             {}, {"CHECK": check})
    line = next(i for i, text in enumerate(ERROR_SOURCE, 1) if text.endswith(f"# {check}"))
    assert_points_at(str(info.value), "descriptor_errors.py", line, fragment)


def test_descriptor_matmul_compiles_to_cp_async_and_mma_sync():
    """Once the compiler lowers descriptors it does not copy with TMA (all of them on
    sm_80), the fallback's masked loads are pipelined like hand-written ones: 16-byte
    cp.async copies into shared stages feeding mma.sync."""
    case = CASES_BY_NAME["descriptor-matmul-fp16-odd-200x136x72"]
    compiled = aotk.compile(descriptors.matmul_descriptor_kernel,
                            "*fp16:16, *fp16:16, *fp16:16, i32:16, i32:16, i32:16, i32:16, "
                            "i32:16, i32:16", case.constants, num_warps=4, target="sm_80")
    assert "cp.async.cg.shared.global" in compiled.ptx and ", 16, " in compiled.ptx
    assert "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" in compiled.ptx
    assert compiled.metadata["spills"] == 0
