"""passes.next_trip_prefetch: a loop without dots whose trips form a chain fetches the next
trip's row into L1 while this trip reduces it (fla's forward substitutions). Checked on the
kir (which loops get a prefetch, of what), on the PTX (one predicated prefetch.global.L1
per such loop), by running the rewritten kir on the interpreter against the original, and
on the GPU against numpy, the last trip's prefetch reaching past the rows it may read."""
import copy

import numpy as np
import pytest

import aotk
import aotk.language as tl
from aotk import interpreter
from aotk.ir import kir
from aotk.passes.next_trip_prefetch import prefetch_next_trip

BC = 16


@aotk.jit
def _substitution(a_ptr, rows_ptr, out_ptr, n, BC: tl.constexpr, STORE_IN_LOOP: tl.constexpr,
                  CARRIED_ADDRESS: tl.constexpr):
    """Row i of ``rows``, masked below the diagonal, plus its product with the tile so far,
    becomes row i of the tile (fla's forward substitution on a diagonal block)."""
    o = tl.arange(0, BC)
    a = tl.load(a_ptr + o[:, None] * BC + o[None, :])
    row_ptrs = rows_ptr + BC + o
    for i in range(1, n):
        if CARRIED_ADDRESS:
            row = tl.load(row_ptrs)
            row_ptrs += BC
        else:
            row = tl.load(rows_ptr + i * BC + o)
        row = tl.where(o < i, row, 0.0)
        row += tl.sum(row[:, None] * a, 0)
        a = tl.where((o == i)[:, None], row, a)
        if STORE_IN_LOOP:
            tl.store(out_ptr + i * BC + o, row)
    tl.store(out_ptr + o[:, None] * BC + o[None, :], a)


SIGNATURE = "*fp32:16, *fp32:16, *fp32:16, i32"


def _kir(**constants):
    constants = {"BC": BC, "STORE_IN_LOOP": False, "CARRIED_ADDRESS": False, **constants}
    return copy.deepcopy(_substitution.kir(SIGNATURE, constants=constants, num_warps=1))


def _prefetches(function):
    return [op for op in kir.walk(function.body) if op.opcode == "prefetch"]


def _expected(a, rows, n):
    a = a.copy()
    o = np.arange(BC)
    for i in range(1, n):
        row = np.where(o < i, rows[i], 0.0).astype(np.float32)
        row = row + (row[:, None] * a).sum(0, dtype=np.float32)
        a[i] = row
    return a


def _inputs(n, seed=0):
    rng = np.random.default_rng(seed)
    a = (0.1 * rng.standard_normal((BC, BC))).astype(np.float32)
    rows = (0.1 * rng.standard_normal((max(n, 1), BC))).astype(np.float32)
    return a, rows


def test_the_substitution_loop_prefetches_the_next_row():
    function = _kir()
    assert prefetch_next_trip(function, num_warps=1) == 1
    (loop,) = [op for op in kir.walk(function.body) if op.opcode == "for"]
    body = loop.regions[0].body
    (prefetch,) = _prefetches(function)
    # Issued first thing in the trip, ahead of this trip's load of its own row.
    assert body.index(prefetch) < min(k for k, op in enumerate(body) if op.opcode == "load")
    pointer, mask = prefetch.operands
    assert pointer.type.shape == (BC,) and mask.type.shape == (BC,)


@pytest.mark.parametrize("constants", [
    {"STORE_IN_LOOP": True},      # a store in the loop: nothing is fetched ahead of it
    {"CARRIED_ADDRESS": True},    # the next address is what this trip yields
], ids=["store-in-loop", "carried-address"])
def test_loops_that_write_or_carry_their_addresses_are_left_alone(constants):
    function = _kir(**constants)
    assert prefetch_next_trip(function, num_warps=1) == 0
    assert not _prefetches(function)


@aotk.jit
def _streamed_sum(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, n, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(out_ptr + tl.arange(0, BLOCK), acc)


@aotk.jit
def _chained_dot(a_ptr, b_ptr, out_ptr, n):
    o = tl.arange(0, 16)
    acc = tl.zeros((16, 16), dtype=tl.float32)
    for i in range(0, n):
        a = tl.load(a_ptr + i * 256 + o[:, None] * 16 + o[None, :])
        acc = tl.dot(a, tl.load(b_ptr + o[:, None] * 16 + o[None, :]), acc)
    tl.store(out_ptr + o[:, None] * 16 + o[None, :], acc)


@pytest.mark.parametrize("block, fetched", [(1024, 0), (64, 1)])
def test_streamed_blocks_and_dot_loops_are_left_alone(block, fetched):
    """A block of 1024 floats over 4 warps is 8 bytes a thread, more than a row's worth (64
    floats, 2 bytes a thread, are fetched ahead); a loop with a dot is the pipeliner's and
    the dot prefetch's."""
    streamed = copy.deepcopy(_streamed_sum.kir("*fp32:16, *fp32:16, i32",
                                               constants={"BLOCK": block}, num_warps=4))
    assert prefetch_next_trip(streamed, num_warps=4) == fetched
    dotted = copy.deepcopy(_chained_dot.kir("*fp16:16, *fp16:16, *fp32:16, i32", num_warps=4))
    assert prefetch_next_trip(dotted, num_warps=4) == 0


@pytest.mark.parametrize("n", [0, 1, 2, BC])
def test_the_rewritten_kir_computes_what_the_original_does(n):
    """The prefetch is nothing to the interpreter: the rewritten loop gives the original's
    results bit for bit, however many trips it runs (none, one, all)."""
    original, rewritten = _kir(), _kir()
    prefetch_next_trip(rewritten, num_warps=1)
    results = []
    for function in (original, rewritten):
        a, rows = _inputs(n)
        out = np.zeros((BC, BC), np.float32)
        interpreter.run(function, (1, 1, 1), [a, rows, out, n])
        results.append(out)
    np.testing.assert_array_equal(results[0], results[1])
    a, rows = _inputs(n)
    np.testing.assert_allclose(results[0], _expected(a, rows, n), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
def test_the_ptx_holds_one_predicated_prefetch_in_the_loop(target):
    compiled = aotk.compile(_substitution, SIGNATURE, constants={
        "BC": BC, "STORE_IN_LOOP": False, "CARRIED_ADDRESS": False}, num_warps=1, target=target)
    lines = [line.strip() for line in compiled.ptx.splitlines() if "prefetch.global.L1" in line]
    assert len(lines) == 1 and lines[0].startswith("@%p")


@aotk.jit
def _scalar_chain(x_ptr, out_ptr, n):
    """A scalar load a trip, in a chain (each trip's value scales the running product)."""
    total = tl.load(x_ptr)
    for i in range(1, n):
        total = total * 0.5 + tl.load(x_ptr + i)
    tl.store(out_ptr, total)


@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
def test_a_scalar_load_is_fetched_ahead_too(target):
    """A scalar's address and the next trip's existence as its mask: predicated prefetches
    in the PTX, and the rewritten kir computes what the original does."""
    function = copy.deepcopy(_scalar_chain.kir("*fp32:16, *fp32:16, i32", num_warps=4))
    original = copy.deepcopy(function)
    assert prefetch_next_trip(function, num_warps=4) == 1
    (prefetch,) = _prefetches(function)
    assert prefetch.operands[0].type.shape == () and prefetch.operands[1].type.shape == ()
    x = np.arange(1, 9, dtype=np.float32)
    results = []
    for kernel in (original, function):
        out = np.zeros(1, np.float32)
        interpreter.run(kernel, (1, 1, 1), [x, out, 8])
        results.append(out)
    np.testing.assert_array_equal(results[0], results[1])
    compiled = aotk.compile(_scalar_chain, "*fp32:16, *fp32:16, i32", num_warps=4,
                            target=target)
    # (LLVM may unroll this small loop: a prefetch in each copy of its body)
    lines = [line.strip() for line in compiled.ptx.splitlines() if "prefetch.global.L1" in line]
    assert lines and all(line.startswith("@%p") for line in lines)


@pytest.mark.gpu
@pytest.mark.parametrize("n", [0, 1, 3, BC])
def test_the_substitution_on_the_gpu_matches_numpy(n):
    """``rows`` holds exactly the n rows the loop reads: the last trip's prefetch (of row n)
    is masked off."""
    import torch
    a, rows = _inputs(n, seed=n)
    rows = rows[:max(n, 1)]
    a_gpu, rows_gpu = torch.from_numpy(a).cuda(), torch.from_numpy(rows).cuda()
    out = torch.zeros((BC, BC), device="cuda", dtype=torch.float32)
    _substitution[(1,)](a_gpu, rows_gpu, out, n, BC=BC, STORE_IN_LOOP=False,
                        CARRIED_ADDRESS=False, num_warps=1)
    torch.cuda.synchronize()
    np.testing.assert_allclose(out.cpu().numpy(), _expected(a, rows, n), rtol=1e-5, atol=1e-6)
