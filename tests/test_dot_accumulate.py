"""passes.dot_accumulate: ``d + dot(a, b)`` becomes ``dot(a, b, d)``, as Triton's combiner
folds it. Checked on the kir (which adds go, which stay), by running the rewritten kir on
the interpreter against the original, and in the PTX of a pipelined wgmma loop, whose
dot then stays in flight across trips."""
import copy

import numpy as np
import pytest

import aotk
import aotk.language as tl
from aotk import interpreter
from aotk.ir import kir
from aotk.passes.dot_accumulate import fold_dot_accumulators


@aotk.jit
def _sums(a_ptr, b_ptr, d_ptr, out_ptr, TRIPS: tl.constexpr, ORDER: tl.constexpr):
    """acc += a @ b over TRIPS tiles (ORDER 0: acc + dot, 1: dot + acc, 2: the product
    read twice, 3: a dot with an accumulator of its own), then + d."""
    rows, depth = tl.arange(0, 16), tl.arange(0, 32)
    a_offsets = rows[:, None] * 32 + depth[None, :]
    b_offsets = depth[:, None] * 16 + rows[None, :]
    offsets = rows[:, None] * 16 + rows[None, :]
    acc = tl.zeros((16, 16), dtype=tl.int32)
    for trip in range(TRIPS):
        a = tl.load(a_ptr + trip * 512 + a_offsets)
        b = tl.load(b_ptr + trip * 512 + b_offsets)
        if ORDER == 0:
            acc += tl.dot(a, b, out_dtype=tl.int32)
        elif ORDER == 1:
            acc = tl.dot(a, b, out_dtype=tl.int32) + acc
        elif ORDER == 2:
            product = tl.dot(a, b, out_dtype=tl.int32)
            acc = acc + product + product
        else:
            acc = acc + tl.dot(a, b, acc=tl.full((16, 16), 1, tl.int32), out_dtype=tl.int32)
    acc = tl.load(d_ptr + offsets) + tl.dot(tl.load(a_ptr + a_offsets),
                                            tl.load(b_ptr + b_offsets), out_dtype=tl.int32) + acc
    tl.store(out_ptr + offsets, acc)


def _kir(order: int):
    return copy.deepcopy(_sums.kir("*i8:16, *i8:16, *i32:16, *i32:16",
                                   constants={"TRIPS": 3, "ORDER": order}))


def _dots(function):
    return [op for op in kir.walk(function.body) if op.opcode == "dot"]


def _run(function):
    rng = np.random.default_rng(0)
    a, b = (rng.integers(-128, 128, 3 * 512).astype(np.int8) for _ in range(2))
    d = rng.integers(-1000, 1000, 256).astype(np.int32)
    out = np.zeros(256, np.int32)
    interpreter.run(function, (1, 1, 1), [a, b, d, out])
    return out


@pytest.mark.parametrize("order", [0, 1])
def test_a_sum_with_a_product_becomes_the_dots_accumulator(order):
    function = _kir(order)
    original = copy.deepcopy(function)
    assert fold_dot_accumulators(function) == 2   # the loop's and the one after it
    loop = next(op for op in function.body if op.opcode == "for")
    inner, after = _dots(function)
    assert inner.operands[2] is loop.regions[0].args[1]   # the carried accumulator itself
    assert loop.regions[0].terminator.operands[0] is inner.result
    assert not any(op.opcode == "add" and op.result.type.shape == (16, 16)
                   for op in loop.regions[0].body)
    np.testing.assert_array_equal(_run(function), _run(original))


@pytest.mark.parametrize("order", [2, 3])
def test_a_product_read_twice_or_a_dot_with_its_own_accumulator_stays(order):
    function = _kir(order)
    original = copy.deepcopy(function)
    assert fold_dot_accumulators(function) == 1   # only the one after the loop
    np.testing.assert_array_equal(_run(function), _run(original))


def test_a_folded_wgmma_loop_keeps_its_group_in_flight():
    """``acc += tl.dot(a, b)`` on sm_90: the accumulator goes straight through the dot, so
    the pipelined wgmma waits only for the previous trip's group (wait_group 1), as with
    ``acc = tl.dot(a, b, acc)``."""
    @aotk.jit
    def matmul(a_ptr, b_ptr, c_ptr, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
               FOLDED: tl.constexpr):
        rm, rn, rk = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, BK)
        a_ptrs = a_ptr + rm[:, None] * K + rk[None, :]
        b_ptrs = b_ptr + rk[:, None] * BN + rn[None, :]
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for _ in range(0, K, BK):
            if FOLDED:
                acc = tl.dot(tl.load(a_ptrs), tl.load(b_ptrs), acc)
            else:
                acc += tl.dot(tl.load(a_ptrs), tl.load(b_ptrs))
            a_ptrs += BK
            b_ptrs += BK * BN
        tl.store(c_ptr + rm[:, None] * BN + rn[None, :], acc)

    ptx = {}
    for folded in (True, False):
        ptx[folded] = aotk.compile(matmul, "*fp16:16, *fp16:16, *fp32:16, i32:16",
                                   dict(BM=128, BN=128, BK=64, FOLDED=folded), num_warps=8,
                                   num_stages=3, target="sm_90").ptx
    assert "wgmma.wait_group.sync.aligned 1;" in ptx[False]
    assert ptx[False].count("add.f32") == ptx[True].count("add.f32")


@aotk.jit
def _chained(a_ptr, b_ptr, d_ptr, out_ptr):
    """``acc = 0; acc += a @ b; out = acc + d`` (liger's mhc norm backward, unrolled)."""
    rows, depth = tl.arange(0, 16), tl.arange(0, 32)
    offsets = rows[:, None] * 16 + rows[None, :]
    acc = tl.zeros((16, 16), dtype=tl.int32)
    acc += tl.dot(tl.load(a_ptr + rows[:, None] * 32 + depth[None, :]),
                  tl.load(b_ptr + depth[:, None] * 16 + rows[None, :]), out_dtype=tl.int32)
    tl.store(out_ptr + offsets, acc + tl.load(d_ptr + offsets))


def test_a_sum_with_a_folded_dot_folds_too():
    """The first fold leaves ``dot(a, b, 0)``, read by the second add alone: that add
    folds as well (each fold's users are the kir's as it now is), and the dot starts from
    ``d``, in the second add's place, as Triton's combiner leaves it. mhc's norm backward
    kept its [32, 256] product live across its second dot otherwise (sm_90, with its rows
    in the reduction's slice: 246 registers; folded, 239)."""
    function = copy.deepcopy(_chained.kir("*i8:16, *i8:16, *i32:16, *i32:16"))
    original = copy.deepcopy(function)
    assert fold_dot_accumulators(function) == 2
    (dot,) = _dots(function)
    assert dot.operands[2].owner.opcode == "load"
    assert not any(op.opcode == "add" and any(v.owner is not None and v.owner.opcode in
                                              ("dot", "load") for v in op.operands)
                   for op in function.body)
    np.testing.assert_array_equal(_run(function), _run(original))
