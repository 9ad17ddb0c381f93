"""Tensor methods, as Triton's @_tensor_member_fn makes them: x.sum(0), x.cast(...),
ptr.store(v), x.item(), ... are the tl builtins with the tensor as first argument."""
import numpy as np

import aotk
import aotk.language as tl

# Triton 3.6's tensor methods that aotk does not have yet (issue 17 adds them).
NOT_YET = {"advance", "flip", "gather", "histogram", "reduce_or", "softmax"}
TRITON_METHODS = (
    "abs advance argmax argmin associative_scan atomic_add atomic_and atomic_cas atomic_max "
    "atomic_min atomic_or atomic_xchg atomic_xor broadcast_to cast cdiv ceil cos cumprod cumsum "
    "erf exp exp2 expand_dims flip floor gather histogram item log log2 max min permute ravel "
    "reduce reduce_or reshape rsqrt sigmoid sin softmax split sqrt sqrt_rn store sum trans view "
    "xor_sum").split()


def test_every_triton_tensor_method_aotk_has_is_a_method():
    missing = [name for name in TRITON_METHODS if name not in NOT_YET
               and not callable(getattr(tl.tensor, name, None))]
    assert missing == []


@aotk.jit
def _methods_kernel(x_ptr, out_ptr, total_ptr, first_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    as_int = x.cast(tl.int32)
    rounded = x.to(tl.float16, "rtne")      # Triton's order: the rounding comes second
    tl.static_assert(rounded.dtype == tl.float16)
    (out_ptr + offs).store(as_int + x.exp().to(tl.int32) * 0)
    total_ptr.store(x.sum(0) + x.expand_dims(0).broadcast_to(2, BLOCK).sum(1).max(0) * 0)
    first_ptr.store(x.reshape(BLOCK, 1).permute(1, 0).reshape(BLOCK).cumsum(0).max(0).item()
                    * 0 + x.reshape(1, BLOCK).trans().reshape(BLOCK).argmax(0).to(tl.float32))


def test_methods_compute_what_the_builtins_do():
    x = np.linspace(-3.7, 4.2, 16).astype(np.float32)
    out, total, first = np.zeros(16, np.int32), np.zeros(1, np.float32), np.zeros(1, np.float32)
    _methods_kernel[(1,)](x, out, total, first, BLOCK=16)
    assert out.tolist() == np.trunc(x).astype(np.int32).tolist()
    np.testing.assert_allclose(total[0], x.sum(), rtol=1e-6)
    assert first[0] == np.argmax(x)


@aotk.jit
def _item_kernel(x_ptr, out_ptr):
    one = tl.load(x_ptr + tl.arange(0, 1))
    tl.store(out_ptr, one.item() * 2)


def test_item_of_a_one_element_block():
    out = np.zeros(1, np.float32)
    _item_kernel[(1,)](np.array([21.0], np.float32), out)
    assert out[0] == 42.0


@aotk.jit
def _shape_kernel(out_ptr):
    a = tl.full([128], 2, tl.int8)
    tl.static_assert(a.shape == [128])            # a tuple, as Triton's: equal to a list literal
    tl.static_assert(tl.full((), 1, tl.int8).shape == [])
    tl.store(out_ptr + tl.arange(0, 128), a)


def test_shape_is_a_tuple_of_constexprs_equal_to_list_literals():
    out = np.zeros(128, np.int8)
    _shape_kernel[(1,)](out)
    assert (out == 2).all()
