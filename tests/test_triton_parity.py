"""Triton behaviours real kernels and Triton's own tests rely on: tl.cat, tl.interleave of
scalars, tl.dot over several batch dimensions and Triton's bf16xN precisions, expand_dims'
errors in Triton's words, compile-time builtins on tensors (isinstance, hasattr),
tl.constexpr(...) and dtype-valued constexpr locals, arrays that carry a tl dtype,
constexpr_type, and tl.extra.cuda.num_warps / num_threads."""
import numpy as np
import pytest

import aotk
import aotk.language as tl
from aotk.errors import CompilationError
from aotk.ir import types as T


@aotk.jit
def _cat(x_ptr, y_ptr, z_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    z = tl.cat(tl.load(x_ptr + offs), tl.load(y_ptr + offs), can_reorder=True)
    tl.store(z_ptr + tl.arange(0, 2 * N), z)


def test_cat_concatenates_in_order():
    x, y, z = np.arange(16, dtype=np.float32), -np.arange(1, 17, dtype=np.float32), np.zeros(32, np.float32)
    _cat[(1,)](x, y, z, N=16)
    assert np.array_equal(z, np.concatenate([x, y]))


def test_cat_without_can_reorder_is_tritons_error():
    @aotk.jit
    def kernel(x_ptr):
        offs = tl.arange(0, 4)
        tl.store(x_ptr + tl.arange(0, 8), tl.cat(tl.load(x_ptr + offs), tl.load(x_ptr + offs)))
    with pytest.raises(aotk.CompilationError, match="can_reorder=True"):
        kernel[(1,)](np.zeros(8, np.float32))


@aotk.jit
def _interleave_scalars(x, y, z_ptr):
    z = tl.interleave(x, y)
    tl.static_assert(z.shape == [tl.constexpr(2)])
    tl.store(z_ptr + tl.arange(0, 2), z)


def test_interleave_of_two_scalars():
    z = np.zeros(2, np.int32)
    _interleave_scalars[(1,)](10, 20, z)
    assert z.tolist() == [10, 20]


@aotk.jit
def _dot_4d(a_ptr, b_ptr, c_ptr, PRECISION: tl.constexpr):
    i = tl.arange(0, 2)[:, None, None, None] * 512 + tl.arange(0, 2)[None, :, None, None] * 256
    rows = tl.arange(0, 16)[None, None, :, None] * 16 + tl.arange(0, 16)[None, None, None, :]
    c = tl.dot(tl.load(a_ptr + i + rows), tl.load(b_ptr + i + rows), input_precision=PRECISION)
    tl.store(c_ptr + i + rows, c)


@pytest.mark.parametrize("precision", ["ieee", "bf16x3", "bf16x6"])
def test_dot_with_two_batch_dimensions(precision):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((2, 2, 16, 16)).astype(np.float32)
    b = rng.standard_normal((2, 2, 16, 16)).astype(np.float32)
    c = np.zeros_like(a)
    _dot_4d[(1,)](a, b, c, PRECISION=precision)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("axes, message", [(-3, "invalid axis -3"), (2, "invalid axis 2"),
                                           ((0, 0), r"duplicate axes, normalized axes = \[0, 0\]"),
                                           ((0, -3), r"duplicate axes, normalized axes = \[0, 0\]")])
def test_expand_dims_errors_in_tritons_words(axes, message):
    @aotk.jit
    def kernel(x_ptr, AXES: tl.constexpr):
        t = tl.expand_dims(tl.arange(0, 4), AXES)
        tl.store(x_ptr + tl.arange(0, 4), tl.reshape(t, (4,)))
    with pytest.raises(aotk.CompilationError, match=message):
        kernel[(1,)](np.zeros(4, np.int32), AXES=axes)


@aotk.jit
def _compile_time_builtins(x_ptr, z_ptr):
    dtype_x: tl.constexpr = x_ptr.dtype.element_ty
    tl.static_assert(dtype_x == tl.constexpr(tl.int32))
    x = tl.load(x_ptr)
    tl.static_assert(isinstance(x, tl.tensor) and hasattr(x, "dtype"))
    if (x_ptr is not None) and isinstance(x_ptr.dtype, tl.pointer_type) and (x > 42):
        tl.store(z_ptr, x)


def test_isinstance_hasattr_and_constexpr_calls_on_tensors_are_compile_time():
    x, z = np.array([50], np.int32), np.zeros(1, np.int32)
    _compile_time_builtins[(1,)](x, z)
    assert z[0] == 50


def test_an_array_carrying_a_tl_dtype_is_that_type():
    from aotk.launch.arguments import cuda_array_dtype

    class Wrapped:   # what Triton's TensorWrapper / reinterpret give a launcher
        dtype = tl.float8e5
    assert cuda_array_dtype(Wrapped()) is tl.float8e5


@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
def test_cat_and_batched_dot_compile(target):
    aotk.compile(_cat, "*fp32:16, *fp32:16, *fp32:16", constants={"N": 128}, target=target)
    aotk.compile(_dot_4d, "*fp32:16, *fp32:16, *fp32:16", constants={"PRECISION": "ieee"},
                 target=target)
    aotk.compile(_logical_blocks, "*i32:16, *i32:16", constants={"N": 256}, target=target)


@pytest.mark.gpu
def test_cat_and_batched_dot_on_the_gpu():
    torch = pytest.importorskip("torch")
    x = torch.arange(128, dtype=torch.float32, device="cuda")
    z = torch.zeros(256, dtype=torch.float32, device="cuda")
    _cat[(1,)](x, -x, z, N=128)
    assert torch.equal(z, torch.cat([x, -x]))
    a = torch.randn((2, 2, 16, 16), device="cuda")
    b = torch.randn((2, 2, 16, 16), device="cuda")
    c = torch.zeros_like(a)
    _dot_4d[(1,)](a, b, c, PRECISION="bf16x3")
    torch.testing.assert_close(c, a @ b, rtol=1e-4, atol=1e-4)


@aotk.jit
def _short_circuit(x_ptr, z_ptr):
    # With x_ptr None, nothing after `is not None` may be evaluated.
    if (x_ptr is not None) and hasattr(x_ptr, "dtype") and (x_ptr.dtype.element_ty == tl.int32) \
            and (tl.load(x_ptr) > 42):
        tl.store(z_ptr, tl.load(x_ptr))
    if (x_ptr is None) or (tl.load(x_ptr) < 0):
        tl.store(z_ptr + 1, 7)


def test_and_or_short_circuit_on_compile_time_operands():
    z = np.zeros(2, np.int32)
    _short_circuit[(1,)](None, z)
    assert z.tolist() == [0, 7]
    z = np.zeros(2, np.int32)
    _short_circuit[(1,)](np.array([50], np.int32), z)
    assert z.tolist() == [50, 0]


@aotk.jit
def _trans_last_two(x_ptr, y_ptr):
    i = tl.arange(0, 2)[:, None, None] * 32 + tl.arange(0, 4)[None, :, None] * 8 \
        + tl.arange(0, 8)[None, None, :]
    j = tl.arange(0, 2)[:, None, None] * 32 + tl.arange(0, 8)[None, :, None] * 4 \
        + tl.arange(0, 4)[None, None, :]
    tl.store(y_ptr + j, tl.trans(tl.load(x_ptr + i)))


def test_trans_without_dims_swaps_the_last_two_axes():
    x = np.arange(64, dtype=np.int32)
    y = np.zeros(64, np.int32)
    _trans_last_two[(1,)](x, y)
    assert np.array_equal(y.reshape(2, 8, 4), x.reshape(2, 4, 8).transpose(0, 2, 1))


def test_float_types_know_their_exponent_bias():
    assert [t.exponent_bias for t in (tl.float8e4nv, tl.float8e5, tl.float16, tl.bfloat16,
                                      tl.float32, tl.float64)] == [7, 15, 15, 127, 127, 1023]


@aotk.jit
def _logical_blocks(x_ptr, z_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(x_ptr + offs)
    inside = (x > 2) and (x < 6)
    outside = (x < 2) or (x > 6) or False
    tl.store(z_ptr + offs, inside.to(tl.int32) + 2 * outside.to(tl.int32))


def test_and_or_on_boolean_blocks_are_elementwise():
    x, z = np.arange(8, dtype=np.int32), np.zeros(8, np.int32)
    _logical_blocks[(1,)](x, z, N=8)
    assert np.array_equal(z, ((x > 2) & (x < 6)) + 2 * ((x < 2) | (x > 6)))


def test_and_on_integer_blocks_is_an_error():
    @aotk.jit
    def kernel(x_ptr):
        x = tl.load(x_ptr + tl.arange(0, 4))
        tl.store(x_ptr + tl.arange(0, 4), (x and x).to(tl.int32))
    with pytest.raises(aotk.CompilationError, match="take boolean blocks"):
        kernel[(1,)](np.zeros(4, np.int32))


@aotk.jit
def _not_of_booleans(x_ptr, out_ptr):
    positive = tl.load(x_ptr) > 0
    if not positive:              # a boolean scalar from a load, as liger's kernels test it
        tl.store(out_ptr, 1)
    else:
        tl.store(out_ptr, 2)
    offsets = tl.arange(0, 4)
    tl.store(out_ptr + 1 + offsets, (not (tl.load(x_ptr + offsets) > 0)).to(tl.int32))


@aotk.jit
def _not_of_an_integer(x_ptr):
    if not tl.load(x_ptr):
        tl.store(x_ptr, 1)


@pytest.mark.parametrize("first, branch", [(-1, 1), (5, 2)])
def test_not_inverts_boolean_tensors_as_tritons_tensor_not(first, branch):
    x = np.array([first, 2, -3, 4], np.int32)
    out = np.zeros(5, np.int32)
    _not_of_booleans[(1,)](x, out)
    np.testing.assert_array_equal(out, [branch] + [int(v <= 0) for v in x])
    assert ".entry _not_of_booleans" in aotk.compile(_not_of_booleans, "*i32, *i32",
                                                     target="sm_80").ptx


def test_not_of_a_non_boolean_tensor_is_tritons_bitcast_error():
    with pytest.raises(aotk.CompilationError,
                       match="Cannot bitcast data-type of size 32 to data-type of size 1"):
        _not_of_an_integer[(1,)](np.zeros(1, np.int32))


@aotk.jit
def _unrolled_index(out_ptr):
    parts = (tl.full((2,), 3, tl.int32), tl.full((2,), 4, tl.int32), tl.full((2,), 5, tl.int32))
    for i in tl.static_range(3):
        tl.store(out_ptr + 2 * i + tl.arange(0, 2), parts[i] * i)


def test_the_variable_of_a_static_range_is_a_constexpr_that_indexes_tuples():
    out = np.zeros(6, np.int32)
    _unrolled_index[(1,)](out)
    np.testing.assert_array_equal(out, [0, 0, 4, 4, 10, 10])


@aotk.jit
def _constexpr_types(out_ptr, literal: tl.constexpr, tensor_type: tl.constexpr):
    local: tl.constexpr = 10
    tl.static_assert(local.type == tl.constexpr_type(10))
    tl.static_assert(literal.type == tl.constexpr_type(10))
    copied: tl.constexpr = literal
    tl.static_assert(copied.type == tl.constexpr_type(10) and copied == local)
    as_value = literal        # a plain assignment makes a 0-d tensor of the literal's type
    tl.static_assert(as_value.type == tensor_type)
    tl.store(out_ptr, as_value)


def test_constexprs_are_typed_constexpr_type_and_a_scalar_tensor_is_typed_by_its_dtype():
    """test_core's test_constexpr_assignment: ``x.type == constexpr_type(v)`` for constexprs,
    and a 0-d tensor's type equals its dtype, as in Triton."""
    out = np.zeros(1, np.int32)
    _constexpr_types[(1,)](out, 10, tl.int32)
    assert out[0] == 10
    with pytest.raises(CompilationError, match="static_assert failed"):
        _constexpr_types[(1,)](out, 10, tl.int64)


@aotk.jit
def _fill_one_per_thread(out_ptr):
    threads: tl.constexpr = tl.extra.cuda.num_threads()
    tl.static_assert(threads == 32 * tl.extra.cuda.num_warps())
    tl.store(out_ptr + tl.arange(0, threads), 1)


@pytest.mark.parametrize("num_warps", [1, 4, 8])
def test_num_threads_and_num_warps_are_the_launchs_as_compile_time_values(num_warps):
    out = np.zeros(512, np.int32)
    _fill_one_per_thread[(1,)](out, num_warps=num_warps)
    assert out.sum() == 32 * num_warps
    compiled = aotk.compile(_fill_one_per_thread, "*i32", {}, num_warps=num_warps,
                            target="sm_90")
    assert f".reqntid {32 * num_warps}" in compiled.ptx


def test_num_warps_without_a_launch_is_one_clear_error():
    with pytest.raises(CompilationError, match="the number of warps is not known"):
        _fill_one_per_thread.kir({"out_ptr": T.PointerType(T.int32)}, {}, {})


def test_a_kernel_defined_in_a_function_sees_that_functions_helpers():
    """As Python (and Triton) resolve names: a @jit helper defined in the enclosing function,
    and a value it holds, are visible to a kernel defined there (test_core does this)."""
    @aotk.jit
    def twice(x):
        return 2 * x

    offset = 5

    @aotk.jit
    def kernel(out_ptr):
        tl.store(out_ptr + tl.arange(0, 4), twice(tl.arange(0, 4)) + offset)

    out = np.zeros(4, np.int32)
    kernel[(1,)](out)
    np.testing.assert_array_equal(out, [5, 7, 9, 11])



@aotk.jit
def _count_up(out_ptr, n):
    i = 0
    while tl.condition(i < n, disable_licm=True):
        i += 1
    tl.store(out_ptr, i)


def test_a_while_condition_may_carry_tritons_hint():
    out = np.zeros(1, np.int32)
    _count_up[(1,)](out, 37)
    assert out[0] == 37


@aotk.jit
def _store_by_parity(out_ptr, a, b):
    pid = tl.program_id(0)
    tl.store(out_ptr + pid, a) if pid % 2 == 0 else tl.store(out_ptr + pid, b)
    tl.store(out_ptr + 8 + pid, 1.0 if pid % 2 == 0 else b)


def test_a_conditional_expression_of_two_stores_runs_one_of_them():
    """test_core's if_exp_dynamic_void: both sides are statements (None), as in Triton."""
    out = np.zeros(16, np.float32)
    _store_by_parity[(8,)](out, 3.0, 5.0)
    np.testing.assert_array_equal(out[:8], [3, 5] * 4)
    np.testing.assert_array_equal(out[8:], [1, 5] * 4)


@aotk.jit
def _one_element_condition(x_ptr, out_ptr):
    flag = tl.load(x_ptr + tl.arange(0, 1))
    if flag > 0:
        tl.store(out_ptr, 1)
    else:
        tl.store(out_ptr, 2)


def test_a_one_element_block_is_an_if_condition_as_in_triton():
    """Triton takes the element (and warns, once per compile: the kernel is compiled for
    the first launch only)."""
    out = np.zeros(1, np.int32)
    with pytest.warns(UserWarning, match="instead of a scalar"):
        _one_element_condition[(1,)](np.array([3], np.int32), out)
    assert out[0] == 1
    _one_element_condition[(1,)](np.array([0], np.int32), out)
    assert out[0] == 2


@aotk.jit
def _small_dot(a_ptr, b_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    a = tl.load(a_ptr + tl.arange(0, M)[:, None] * K + tl.arange(0, K)[None, :])
    b = tl.load(b_ptr + tl.arange(0, K)[:, None] * N + tl.arange(0, N)[None, :])
    tl.store(c_ptr + tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :], tl.dot(a, b))


SMALL_DOTS = [(2, 4, 32, np.float16, "*fp16, *fp16, *fp32"),
              (1, 2, 32, "float8e5", "*fp8e5, *fp8e5, *fp32"),
              (4, 1, 8, np.float32, "*fp32, *fp32, *fp32"),
              (2, 2, 4, np.float64, "*fp64, *fp64, *fp64")]


@pytest.mark.parametrize("m,n,k,dtype,signature", SMALL_DOTS,
                         ids=[f"{c[0]}x{c[1]}x{c[2]}" for c in SMALL_DOTS])
def test_dots_with_small_m_and_n_as_in_triton(m, n, k, dtype, signature):
    """Triton's NVIDIA backend takes any M and N, and K down to one tensor-core step
    (test_core's small-dot cases)."""
    for target in ("sm_80", "sm_90"):
        compiled = aotk.compile(_small_dot, signature, {"M": m, "N": n, "K": k},
                                num_warps=1, target=target)
        assert ".entry _small_dot" in compiled.ptx
    if dtype == "float8e5":
        return
    rng = np.random.RandomState(m * n)
    a = (rng.randint(-4, 4, (m, k)) / 4).astype(dtype)   # exact in every precision
    b = (rng.randint(-4, 4, (k, n)) / 4).astype(dtype)
    c = np.zeros((m, n), np.float64 if dtype == np.float64 else np.float32)
    _small_dot[(1,)](a, b, c, M=m, N=n, K=k)
    np.testing.assert_array_equal(c, a.astype(c.dtype) @ b.astype(c.dtype))


def test_a_dot_with_k_below_one_tensor_core_step_is_tritons_error():
    a = np.zeros((16, 8), np.float16)
    with pytest.raises(CompilationError, match="Input shapes should have M >= 1, N >= 1 and "
                                               "K >= 16"):
        _small_dot[(1,)](a, np.zeros((8, 16), np.float16), np.zeros((16, 16), np.float32),
                         M=16, N=16, K=8)


@aotk.jit
def _zeros_of(out_ptr, dtype: tl.constexpr):
    tl.store(out_ptr + tl.arange(0, 4), tl.zeros((4,), dtype).to(tl.int32) + 1)


@pytest.mark.parametrize("name", tl.dtype.SINT_TYPES + tl.dtype.UINT_TYPES +
                         tl.dtype.STANDARD_FP_TYPES)
def test_tl_dtype_of_a_name_is_that_type_as_in_triton(name):
    dtype = tl.dtype(name)
    assert dtype == T.parse_type(name) and isinstance(dtype, tl.dtype)
    assert dtype.is_bool() == (name == "int1")
    out = np.zeros(4, np.int32)
    _zeros_of[(1,)](out, dtype)
    np.testing.assert_array_equal(out, [1, 1, 1, 1])


@aotk.jit
def _through_addresses(addresses_ptr, out_ptr, N: tl.constexpr):
    offsets = tl.arange(0, N)
    pointers = tl.load(addresses_ptr + offsets).to(tl.pi32_t)   # int64 -> int32 pointers
    tl.store(out_ptr + offsets, tl.load(pointers))


@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
def test_pi32_t_is_tritons_int32_pointer_and_ints_cast_to_it(target):
    assert tl.pi32_t == tl.pointer_type(tl.int32)
    compiled = aotk.compile(_through_addresses, "*i64, *i32", {"N": 64}, target=target)
    assert ".entry _through_addresses" in compiled.ptx


@aotk.jit
def _address_round_trip(x_ptr, out_ptr, flags_ptr, N: tl.constexpr):
    offsets = tl.arange(0, N)
    addresses = (x_ptr + offsets).to(tl.int64)           # pointer -> its address
    pointers = addresses.to(tl.pointer_type(tl.float32))  # address -> pointer
    tl.store(out_ptr + offsets, tl.load(pointers) * 2)
    tl.store(flags_ptr + offsets, (x_ptr + offsets).to(tl.int1).to(tl.int32))


def test_addresses_and_integers_cast_both_ways_as_in_triton():
    x = np.arange(8, dtype=np.float32)
    out, flags = np.zeros(8, np.float32), np.zeros(8, np.int32)
    _address_round_trip[(1,)](x, out, flags, N=8)
    np.testing.assert_array_equal(out, 2 * x)
    np.testing.assert_array_equal(flags, np.ones(8))
    for target in ("sm_80", "sm_90"):
        assert ".entry _address_round_trip" in aotk.compile(
            _address_round_trip, "*fp32, *fp32, *i32", {"N": 8}, target=target).ptx


@aotk.jit
def _pick_source(cond_ptr, a_ptr, b_ptr, out_ptr, N: tl.constexpr, BLOCKWISE: tl.constexpr):
    offsets = tl.arange(0, N)
    if BLOCKWISE:
        pointers = tl.where(tl.load(cond_ptr + offsets) != 0, a_ptr + offsets, b_ptr + offsets)
        tl.store(out_ptr + offsets, tl.load(pointers))
    else:
        base = tl.where(tl.load(cond_ptr) != 0, a_ptr, b_ptr)
        tl.store(out_ptr + offsets, tl.load(base + offsets))


@pytest.mark.parametrize("blockwise", [False, True])
def test_where_chooses_between_pointers_as_in_triton(blockwise):
    cond = np.array([1, 0, 0, 1, 1, 0, 1, 0], np.int32)
    a, b = np.arange(8, dtype=np.float32), -np.arange(8, dtype=np.float32)
    out = np.zeros(8, np.float32)
    _pick_source[(1,)](cond, a, b, out, N=8, BLOCKWISE=blockwise)
    np.testing.assert_array_equal(out, np.where(cond != 0, a, b) if blockwise else a)


@aotk.jit
def _by_target(out_ptr):
    if tl.target_info.cuda_capability_geq(9, 0):
        tl.store(out_ptr, 90)
    elif tl.target_info.is_cuda():
        tl.store(out_ptr, 80)
    else:
        tl.store(out_ptr, 0)


def test_target_info_answers_for_the_target_compiled_for_as_in_triton():
    """The interpreter has no target (Triton's neither): is_cuda() is False there."""
    out = np.full(1, -1, np.int32)
    _by_target[(1,)](out)
    assert out[0] == 0
    assert not tl.target_info.is_hip()
    for target, value in [("sm_80", 80), ("sm_90", 90)]:
        listing = str(aotk.compile(_by_target, "*i32", {}, target=target).asm["kir"])
        assert f"constant [value={value}]" in listing and listing.count("store") == 1


def test_block_type_and_void_are_tritons_names():
    block = tl.block_type(tl.float32, [16, 8])
    assert block.element_ty == tl.float32 and block.get_block_shapes() == (16, 8)
    assert block == T.BlockType(tl.float32, (16, 8))
    assert str(tl.void) == "void" and not tl.void.is_int() and not tl.void.is_floating()
