"""``tl.map_elementwise``: a scalar function that branches, mapped over blocks (one or
several results, packed runs): the interpreter against numpy, the compiled kernel for
sm_80 / sm_90, the checks, and the GPU against the interpreter (test_core's cases)."""
import numpy as np
import pytest

import aotk
import aotk.language as tl
from aotk.errors import CompilationError


@aotk.jit
def _compare(x, y):
    if x < y:
        return -1
    elif x == y:
        return 0
    else:
        return 1


@aotk.jit
def _divmod(a, b):
    return a // b, a % b


@aotk.jit
def _divmod_pairs(a0, a1, b0, b1):
    return a0 // b0, a1 // b1, a0 % b0, a1 % b1


@aotk.jit
def _mapped(x_ptr, y_ptr, c_ptr, d_ptr, BLOCK: tl.constexpr, CASE: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offsets)
    y = tl.load(y_ptr + offsets)
    if CASE == "compare":
        tl.store(c_ptr + offsets, tl.map_elementwise(_compare, x, y))
    elif CASE == "divmod":
        c, d = tl.map_elementwise(_divmod, x, y)
        tl.store(c_ptr + offsets, c)
        tl.store(d_ptr + offsets, d)
    else:
        c, d = tl.map_elementwise(_divmod_pairs, x, y, pack=2)
        tl.store(c_ptr + offsets, c)
        tl.store(d_ptr + offsets, d)


def _inputs(dtype, n=512):
    rng = np.random.RandomState(17)
    x = rng.randint(0, 1000, n).astype(dtype)
    y = rng.randint(1, 1000, n).astype(dtype)
    y[::7] = x[::7]   # some ties
    return x, y


def test_a_branching_scalar_function_on_the_interpreter():
    x, y = _inputs(np.int32, 128)
    c = np.zeros(128, np.int32)
    _mapped[(1,)](x, y, c, c.copy(), BLOCK=128, CASE="compare")
    np.testing.assert_array_equal(c, (x > y).astype(np.int32) - (y > x).astype(np.int32))


@pytest.mark.parametrize("case", ["divmod", "divmod_pairs"])
def test_several_results_and_packed_runs_on_the_interpreter(case):
    x, y = _inputs(np.uint32)
    c, d = np.zeros_like(x), np.zeros_like(x)
    _mapped[(1,)](x, y, c, d, BLOCK=512, CASE=case)
    np.testing.assert_array_equal(c, x // y)
    np.testing.assert_array_equal(d, x % y)


@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
@pytest.mark.parametrize("case", ["compare", "divmod", "divmod_pairs"])
def test_map_elementwise_compiles_for_each_target(target, case):
    compiled = aotk.compile(_mapped, "*i32, *i32, *i32, *i32", {"BLOCK": 512, "CASE": case},
                            target=target)
    assert ".entry _mapped" in compiled.ptx
    assert compiled.metadata["spills"] == 0


@aotk.jit
def _returns_one(a0, a1, b0, b1):
    return a0 + a1 + b0 + b1


@aotk.jit
def _returns_two_types(a, b):
    if a < b:
        return a
    return 1.5


@aotk.jit
def _misuse(x_ptr, CASE: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, 8))
    if CASE == "pack":
        tl.map_elementwise(_returns_one, x, x, pack=2)
    elif CASE == "arity":
        tl.map_elementwise(_returns_two_types, x, x, pack=2)
    else:
        tl.map_elementwise(_returns_two_types, x, x)


@pytest.mark.parametrize("case,message", [("pack", "must return a multiple of 2"),
                                          ("types", "has type i32 in the `if` branch but fp32"),
                                          ("arity", r"takes 2 arguments, got 4")])
def test_misuse_is_one_clear_error(case, message):
    with pytest.raises(CompilationError, match=message):
        _misuse[(1,)](np.zeros(8, np.int32), CASE=case)


@pytest.mark.gpu
@pytest.mark.parametrize("case", ["compare", "divmod", "divmod_pairs"])
def test_map_elementwise_on_the_gpu_matches_the_interpreter(case):
    torch = pytest.importorskip("torch")
    x, y = _inputs(np.int32)
    c, d = np.zeros_like(x), np.zeros_like(x)
    _mapped[(1,)](x, y, c, d, BLOCK=512, CASE=case)
    on_gpu = [torch.from_numpy(a).cuda() for a in (x, y, np.zeros_like(x), np.zeros_like(x))]
    _mapped[(1,)](*on_gpu, BLOCK=512, CASE=case)
    np.testing.assert_array_equal(on_gpu[2].cpu().numpy(), c)
    np.testing.assert_array_equal(on_gpu[3].cpu().numpy(), d)
