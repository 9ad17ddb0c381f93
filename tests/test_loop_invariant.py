"""passes.loop_invariant: one-trip loops folded, loads every trip repeats and invariant
divisions and casts moved before the loop. Checked on the kir itself (what moved, what
stayed), by running the rewritten kir on the interpreter against the original, and by
ptxas on liger's int8 x int2 matmul shape."""
import copy
import re

import numpy as np
import pytest

import aotk
import aotk.language as tl
from aotk import interpreter
from aotk.ir import kir
from aotk.passes.loop_invariant import hoist_loop_invariants


@aotk.jit
def _repacked_matmul_like(a_ptr, b_ptr, out_ptr, K_TRIPS: tl.constexpr, INNER: tl.constexpr,
                          BLOCK: tl.constexpr, STORE_IN_LOOP: tl.constexpr):
    """Sums four shifted views of one reloaded tile, as liger's int8 x int2 matmul does:
    an outer loop of four trips around an inner one of INNER trips."""
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), dtype=tl.int32)
    a_ptrs = a_ptr + offs
    for i in range(4):
        b_ptrs = b_ptr + offs
        for j in range(0, INNER):
            a = tl.load(a_ptrs + j * BLOCK)
            packed = tl.load(b_ptrs)
            acc += a * ((packed >> (2 * i)) & 3)
            b_ptrs += BLOCK
            if STORE_IN_LOOP:
                tl.store(out_ptr + offs, acc)
        a_ptrs += K_TRIPS * BLOCK
    tl.store(out_ptr + offs, acc)


SIGNATURE = "*i32:16, *i32:16, *i32:16"


def _kir(**constants):
    constants = {"K_TRIPS": 1, "INNER": 1, "BLOCK": 64, "STORE_IN_LOOP": False, **constants}
    return copy.deepcopy(_repacked_matmul_like.kir(SIGNATURE, constants=constants))


def _loops(function):
    return [op for op in kir.walk(function.body) if op.opcode == "for"]


def _run(function, inner: int):
    rng = np.random.default_rng(0)
    a = rng.integers(-9, 9, 64 * 4 * max(inner, 1) + 64 * inner).astype(np.int32)
    b = rng.integers(0, 255, 64 * max(inner, 1)).astype(np.int32)
    out = np.zeros(64, np.int32)
    interpreter.run(function, (1, 1, 1), [a, b, out])
    return out


def test_a_one_trip_loop_is_folded_and_the_reloaded_tile_leaves_the_outer_loop():
    function = _kir()
    original = copy.deepcopy(function)
    assert hoist_loop_invariants(function) > 0
    (outer,) = _loops(function)   # the one-trip inner loop is gone
    outer_loads = [op for op in outer.regions[0].body if op.opcode == "load"]
    before = function.body[:function.body.index(outer)]
    assert len(outer_loads) == 1                      # a: its address moves each trip
    assert sum(op.opcode == "load" for op in before) == 1   # b: loaded once, before the loop
    np.testing.assert_array_equal(_run(function, 1), _run(original, 1))


def test_loops_that_write_or_run_twice_keep_their_loads():
    """A store in the loop: nothing moves (the load could read it). Two inner trips: b's
    address changes between them, and the inner loop stays."""
    stored = _kir(STORE_IN_LOOP=True)
    hoist_loop_invariants(stored)
    assert all(op.opcode != "load" for op in stored.body)
    twice = _kir(INNER=2)
    original = copy.deepcopy(twice)
    hoist_loop_invariants(twice)
    assert len(_loops(twice)) == 2
    assert all(op.opcode != "load" for op in twice.body)
    np.testing.assert_array_equal(_run(twice, 2), _run(original, 2))


def test_a_loop_that_may_not_run_keeps_its_loads():
    """Bounds known only at run time: moving the load out could read memory the loop
    never touches."""
    @aotk.jit
    def maybe(a_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        acc = tl.zeros((BLOCK,), dtype=tl.float32)
        for _ in range(n):
            acc += tl.load(a_ptr + offs)
        tl.store(out_ptr + offs, acc)

    function = copy.deepcopy(maybe.kir("*fp32:16, *fp32:16, i32", constants={"BLOCK": 64}))
    assert hoist_loop_invariants(function) == 0


@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
def test_the_int8_int2_matmul_shape_spills_less(target):
    """liger's int8 x int2 matmul tile (128x256x64, 8 warps): with the packed B tile
    loaded once before the four trips, its 64 byte addresses per thread are no longer live
    across them (ptxas spilled 1.3 KB before; Triton, which hoists the load too, spills
    none: the rest of the gap is open)."""
    @aotk.jit
    def mm(a_ptr, b_ptr, c_ptr, N, K: tl.constexpr, BLOCK_SIZE_M: tl.constexpr,
           BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr):
        offs_am = tl.arange(0, BLOCK_SIZE_M)
        offs_bn = tl.arange(0, BLOCK_SIZE_N) % N   # as liger's: B's bytes one load each
        offs_k = tl.arange(0, BLOCK_SIZE_K)
        a_ptrs = a_ptr + offs_am[:, None] * K + offs_k[None, :]
        acc = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.int32)
        for i in range(4):
            b_ptrs = b_ptr + offs_k[:, None] * N + offs_bn[None, :]
            for j in range(0, tl.cdiv(K // 4, BLOCK_SIZE_K)):
                a = tl.load(a_ptrs)
                b = (tl.load(b_ptrs) >> (2 * i)) & 3
                acc += tl.dot(a, b.to(tl.int8) - 1, out_dtype=tl.int32)
                a_ptrs += BLOCK_SIZE_K
                b_ptrs += BLOCK_SIZE_K * N
        tl.store(c_ptr + offs_am[:, None] * BLOCK_SIZE_N + offs_bn[None, :], acc)

    constants = dict(K=256, BLOCK_SIZE_M=128, BLOCK_SIZE_N=256, BLOCK_SIZE_K=64)
    compiled = aotk.compile(mm, "*i8:16, *u8:16, *i32:16, i32", constants, num_warps=8,
                            target=target)
    assert compiled.metadata["spills"] < 700, compiled.metadata


@aotk.jit
def _scaled_after_reduction(x_ptr, out_ptr, n, count, BLOCK: tl.constexpr, INTEGER: tl.constexpr):
    """liger's jsd in small: a row max (shuffles, a barrier), then a scale the same every
    trip; the loop stores."""
    for start in range(0, n, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
        x = x - tl.max(x, axis=0)
        if INTEGER:
            x = x * (n // count)
        else:
            x = x * (1.0 / count)
        tl.store(out_ptr + offs, x, mask=offs < n)


def test_an_invariant_division_after_a_reduction_leaves_the_loop():
    """fp32 ``/`` is an asm (div.full.f32) that LLVM will not move past the reduction's
    shuffles and barrier; Triton's loop invariant code motion computes it before the loop,
    and so does the pass now (liger's jsd: 30 registers on sm_80, 28 after, Triton 27).
    An integer division stays: it is undefined on zero, and the loop may not run."""
    signature = "*fp32:16, *fp32:16, i32, i32"
    function = copy.deepcopy(_scaled_after_reduction.kir(
        signature, constants={"BLOCK": 512, "INTEGER": False}))
    original = copy.deepcopy(function)
    hoist_loop_invariants(function)
    (loop,) = _loops(function)
    assert [op.opcode for op in function.body if op.opcode == "fdiv"] == ["fdiv"]
    assert not [op for op in loop.regions[0].body if op.opcode == "fdiv"]
    rng = np.random.default_rng(0)
    x = rng.standard_normal(1536).astype(np.float32)
    results = []
    for kir_function in (function, original):
        out = np.zeros(1536, np.float32)
        interpreter.run(kir_function, (1, 1, 1), [x, out, np.int32(1300), np.int32(7)])
        results.append(out)
    np.testing.assert_array_equal(*results)
    ptx = aotk.compile(_scaled_after_reduction, signature, {"BLOCK": 512, "INTEGER": False},
                       num_warps=4).ptx.split(".entry")[1]
    loop_start = re.search(r"^\$L__BB0_\d+:", ptx, re.MULTILINE).start()
    assert ptx.count("div.full.f32") == 1 and ptx.index("div.full.f32") < loop_start
    integer = copy.deepcopy(_scaled_after_reduction.kir(
        signature, constants={"BLOCK": 512, "INTEGER": True}))
    hoist_loop_invariants(integer)
    assert not [op for op in integer.body if op.opcode == "idiv"]


@aotk.jit
def _reset_every_trip(a_ptr, b_ptr, out_ptr, trips, RESET: tl.constexpr):
    """fla's chunk_h shape: the column offsets are set again on every trip (RESET 0: to
    what they started as; 1: shifted by the trip, a value that does change)."""
    rows = tl.arange(0, 32)
    columns = tl.arange(0, 32)
    shifted = 32 + columns
    acc = tl.zeros((32, 32), dtype=tl.float32)
    for t in range(trips):
        a = tl.load(a_ptr + t * 32 * 32 + rows[:, None] * 32 + columns[None, :])
        b = tl.load(b_ptr + t * 32 * 64 + rows[:, None] * 64 + shifted[None, :])
        acc = tl.dot(a, b, acc)
        if RESET == 0:
            columns = tl.arange(0, 32)
            shifted = 32 + columns
        else:
            columns = (tl.arange(0, 32) + t) % 32
    tl.store(out_ptr + rows[:, None] * 32 + columns[None, :], acc)


def _reset_inputs(trips):
    rng = np.random.default_rng(3)
    return (rng.standard_normal(trips * 32 * 32).astype(np.float16),
            rng.standard_normal(trips * 32 * 64).astype(np.float16))


@pytest.mark.parametrize("reset", [0, 1])
def test_a_value_every_trip_resets_is_not_carried(reset):
    """Set again to what it started as, the offsets stop being carried (the loop keeps
    only its accumulator) and the loop's loads are pipelined; changed by the trip, they
    stay carried. The rewritten kir computes what the original does either way."""
    signature = "*fp16:16, *fp16:16, *fp32:16, i32"
    function = copy.deepcopy(_reset_every_trip.kir(signature, constants={"RESET": reset}))
    original = copy.deepcopy(function)
    hoist_loop_invariants(function)
    (loop,) = _loops(function)
    carried = sorted(arg.type.shape for arg in loop.regions[0].args[1:])
    assert carried == ([(32, 32)] if reset == 0 else [(32,), (32, 32)]), carried
    a, b = _reset_inputs(3)
    results = []
    for kir_function in (function, original):
        out = np.zeros(32 * 32, np.float32)
        interpreter.run(kir_function, (1, 1, 1), [a, b, out, np.int32(3)])
        results.append(out)
    np.testing.assert_array_equal(*results)
    gir = aotk.compile(_reset_every_trip, signature, {"RESET": reset}, num_warps=4,
                       target="sm_80").gir
    (header,) = [line for line in gir.splitlines() if " = for [" in line]
    assert ("pipeline=0" in header) == (reset == 0), header


@pytest.mark.gpu
@pytest.mark.parametrize("reset", [0, 1])
def test_the_reset_offsets_loop_on_the_gpu_matches_numpy(reset):
    torch = pytest.importorskip("torch")
    trips = 5
    a, b = _reset_inputs(trips)
    out = torch.zeros(32 * 32, device="cuda")
    _reset_every_trip[(1,)](torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda(), out, trips,
                            RESET=reset, num_warps=4)
    a32 = a.astype(np.float32).reshape(trips, 32, 32)
    b32 = b.astype(np.float32).reshape(trips, 32, 64)
    columns, acc = np.arange(32), np.zeros((32, 32), np.float32)
    for t in range(trips):   # the kernel's loop, in numpy
        acc += a32[t][:, columns] @ b32[t][:, 32:]
        columns = np.arange(32) if reset == 0 else (np.arange(32) + t) % 32
    expected = np.zeros((32, 32), np.float32)
    expected[:, columns] = acc
    np.testing.assert_allclose(out.cpu().numpy().reshape(32, 32), expected, rtol=1e-2,
                               atol=1e-2)


@aotk.jit
def _other_half(x_ptr, out_ptr, trips):
    """A value that starts as one half of a split and is set to the other on every trip:
    the same opcode on the same operand, another attribute (index), another value."""
    o = tl.arange(0, 16)
    pair = tl.load(x_ptr + o[:, None] * 2 + tl.arange(0, 2)[None, :])
    value, _ = tl.split(pair)
    for t in range(trips):
        tl.store(out_ptr + t * 16 + o, value)
        _, value = tl.split(pair)


def test_the_other_half_of_a_split_stays_carried():
    function = copy.deepcopy(_other_half.kir("*fp32:16, *fp32:16, i32", constants={}))
    hoist_loop_invariants(function)
    (loop,) = _loops(function)
    assert len(loop.regions[0].args) == 3   # the trip and both halves (``_`` swaps too)
    x = np.arange(32, dtype=np.float32)
    out = np.zeros(48, np.float32)
    interpreter.run(function, (1, 1, 1), [x, out, np.int32(3)])
    np.testing.assert_array_equal(out, np.concatenate([x[0::2], x[1::2], x[1::2]]))
