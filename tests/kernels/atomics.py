"""Atomics kernels: contention across programs, returned old values, locks, tickets.

Shared by the interpreter, ptxas and GPU tests. GPU atomics run in no fixed order, so every
reference here is order-independent: integer sums, float sums of small integers (exact in
any order), max/min, bitwise and/or/xor, and old values only where addresses are unique
within one program.
"""
from __future__ import annotations

import numpy as np

import aotk
import aotk.language as tl
from tests.kernels.elementwise import Case


@aotk.jit
def contention_kernel(x_ptr, counters_ptr, n, BLOCK: tl.constexpr, SLOTS: tl.constexpr):
    """Every program adds into the same few counters."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.atomic_add(counters_ptr + offs % SLOTS, x, mask=mask)


def _contention_reference(args):
    n, slots = args["n"], len(args["counters_ptr"])
    totals = args["counters_ptr"].astype(np.float64 if args["x_ptr"].dtype.kind == "f"
                                         else np.int64)
    np.add.at(totals, np.arange(n) % slots, args["x_ptr"][:n])
    return {"counters_ptr": totals.astype(args["counters_ptr"].dtype)}


@aotk.jit
def max_min_kernel(x_ptr, max_ptr, min_ptr, n, BLOCK: tl.constexpr, SLOTS: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.atomic_max(max_ptr + offs % SLOTS, x, mask=mask)
    tl.atomic_min(min_ptr + offs % SLOTS, x, mask=mask, sem="relaxed")


def _max_min_reference(args):
    n, slots = args["n"], len(args["max_ptr"])
    high, low = args["max_ptr"].copy(), args["min_ptr"].copy()
    np.maximum.at(high, np.arange(n) % slots, args["x_ptr"][:n])
    np.minimum.at(low, np.arange(n) % slots, args["x_ptr"][:n])
    return {"max_ptr": high, "min_ptr": low}


def _signed_floats(dtype, n, slots):
    """Slots 0-3 see only negative values (the unsigned-min path of float max), the rest
    both signs; no zeros, whose sign max/min leaves open."""
    def make(rng):
        x = rng.uniform(0.5, 100, n) * rng.choice([-1, 1], n)
        x[np.arange(n) % slots < 4] = -np.abs(x[np.arange(n) % slots < 4])
        start = rng.uniform(-150, 150, slots)
        return {"x_ptr": x.astype(dtype), "max_ptr": start.astype(dtype),
                "min_ptr": start.astype(dtype)[::-1].copy(), "n": n}
    return make


@aotk.jit
def bitwise_kernel(and_ptr, or_ptr, xor_ptr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    bit = ((pid * 7 + offs) % 32).to(tl.uint32)
    one = tl.full([BLOCK], 1, tl.uint32)
    tl.atomic_or(or_ptr + offs % 4, one << bit)
    tl.atomic_and(and_ptr + offs % 4, ~(one << ((bit + 3) % 32)), scope="gpu")
    tl.atomic_xor(xor_ptr + offs % 8, (pid * 40503 + offs).to(tl.uint32))


def _bitwise_reference(args):
    grid, block = 12, 64
    out_and, out_or, out_xor = (args[k].copy() for k in ("and_ptr", "or_ptr", "xor_ptr"))
    for pid in range(grid):
        offs = np.arange(block)
        bit = (pid * 7 + offs) % 32
        for o, b in zip(offs, bit):
            out_or[o % 4] |= np.uint32(1 << int(b))
            out_and[o % 4] &= np.uint32(~(1 << ((int(b) + 3) % 32)) & 0xFFFFFFFF)
            out_xor[o % 8] ^= out_xor.dtype.type(pid * 40503 + o)
    return {"and_ptr": out_and, "or_ptr": out_or, "xor_ptr": out_xor}


@aotk.jit
def old_values_kernel(add_ptr, xchg_ptr, cas_ptr, vals_ptr, old_add, old_xchg, old_cas, n,
                      BLOCK: tl.constexpr):
    """One program, unique addresses: the old values are deterministic. With BLOCK below
    the thread count, replicas receive their owner's old values."""
    offs = tl.arange(0, BLOCK)
    vals = tl.load(vals_ptr + offs)
    tl.store(old_add + offs, tl.atomic_add(add_ptr + offs, vals, mask=offs < n, scope="cta"))
    tl.store(old_xchg + offs, tl.atomic_xchg(xchg_ptr + offs, vals * 2, sem="release"))
    # every other slot holds its index: only those take the new value
    tl.store(old_cas + offs, tl.atomic_cas(cas_ptr + offs, offs, -offs - 1, sem="acquire"))


def _old_values_args(value_dtype, cas_dtype, block=32):
    def make(rng):
        cas = np.arange(block).astype(cas_dtype)
        cas[1::2] += 100
        return {"add_ptr": rng.integers(-50, 50, block).astype(value_dtype),
                "xchg_ptr": rng.integers(-50, 50, block).astype(value_dtype),
                "cas_ptr": cas,
                "vals_ptr": rng.integers(-50, 50, block).astype(value_dtype),
                "old_add": np.full(block, 9, value_dtype), "old_xchg": np.zeros(block, value_dtype),
                "old_cas": np.zeros(block, cas_dtype), "n": block - 5}
    return make


def _old_values_reference(args):
    n, vals = args["n"], args["vals_ptr"]
    add, xchg, cas = args["add_ptr"].copy(), args["xchg_ptr"].copy(), args["cas_ptr"].copy()
    old_add = np.where(np.arange(len(add)) < n, add, 0).astype(add.dtype)
    add[:n] += vals[:n]
    old_xchg, xchg = xchg.copy(), (vals * 2).astype(xchg.dtype)
    old_cas = cas.copy()
    swap = cas == np.arange(len(cas))
    cas[swap] = (-np.arange(len(cas)) - 1).astype(cas.dtype)[swap]
    return {"add_ptr": add, "xchg_ptr": xchg, "cas_ptr": cas, "old_add": old_add,
            "old_xchg": old_xchg, "old_cas": old_cas}


@aotk.jit
def old_values_2d_kernel(ptr, old_ptr, M: tl.constexpr, N: tl.constexpr):
    offs = tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :]
    old = tl.atomic_max(ptr + offs, offs.to(tl.float32) - 10.0)
    tl.store(old_ptr + offs, old + 0.5)


@aotk.jit
def ticket_kernel(counter_ptr, seen_ptr, BLOCK: tl.constexpr):
    """A scalar atomic whose old value every thread uses: each program takes a ticket and
    fills the row it names."""
    ticket = tl.atomic_add(counter_ptr, 1)
    offs = tl.arange(0, BLOCK)
    tl.store(seen_ptr + ticket * BLOCK + offs, offs + 1)


@aotk.jit
def lock_kernel(lock_ptr, count_ptr, x_ptr, BLOCK: tl.constexpr):
    """A spin lock from atomic_cas / atomic_xchg guarding plain loads and stores (the
    pattern of Triton's layer-norm backward)."""
    pid = tl.program_id(0)
    while tl.atomic_cas(lock_ptr, 0, 1) != 0:
        pass
    count = tl.load(count_ptr)
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs) + pid + offs)
    tl.store(count_ptr, count + 1)
    tl.debug_barrier()
    tl.atomic_xchg(lock_ptr, 0)


@aotk.jit
def histogram_kernel(x_ptr, hist_ptr, n, BLOCK: tl.constexpr):
    """Atomics inside a runtime loop and branch."""
    pid = tl.program_id(0)
    step = tl.num_programs(0) * BLOCK
    for start in range(pid * BLOCK, n, step):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask, other=0)
        if (start // BLOCK) % 2 == 0:
            tl.atomic_add(hist_ptr + x, 1, mask=mask, sem="relaxed")
        else:
            tl.atomic_add(hist_ptr + x, 1, mask=mask, scope="sys")


def _histogram_reference(args):
    hist = args["hist_ptr"].copy()
    np.add.at(hist, args["x_ptr"][:args["n"]], 1)
    return {"hist_ptr": hist}


def _contention_case(dtype, n, values, slots=8, block=128):
    return _case(
        f"atomic-add-contention-{np.dtype(dtype).name}", contention_kernel,
        lambda rng: {"x_ptr": rng.integers(*values, n).astype(dtype),
                     "counters_ptr": rng.integers(0, 4, slots).astype(dtype), "n": n},
        ((n + block - 1) // block,), {"BLOCK": block, "SLOTS": slots}, ("counters_ptr",),
        _contention_reference)


def _case(name, kernel, make, grid, constants, outputs, reference):
    """Atomics update their inputs in place, so the reference reads a fresh copy of the
    inputs (every runner builds them with seed 0), not the arrays the kernel changed."""
    return Case(name, kernel, make, grid, constants, outputs,
                lambda _args: reference(make(np.random.default_rng(0))))


CASES = [
    _contention_case(np.int32, 64 * 128 - 37, (-1000, 1000)),
    _contention_case(np.uint64, 64 * 128, (0, 2**40)),
    _contention_case(np.float32, 64 * 128, (-8, 8)),
    _contention_case(np.float64, 3000, (-8, 8)),
    _contention_case(np.float16, 1900, (0, 2)),
    _case("atomic-max-min-fp32-negatives", max_min_kernel, _signed_floats(np.float32, 2000, 8),
         (16,), {"BLOCK": 128, "SLOTS": 8}, ("max_ptr", "min_ptr"), _max_min_reference),
    _case("atomic-max-min-fp64-negatives", max_min_kernel, _signed_floats(np.float64, 1000, 16),
         (8,), {"BLOCK": 128, "SLOTS": 16}, ("max_ptr", "min_ptr"), _max_min_reference),
    _case("atomic-max-min-uint32", max_min_kernel,
         lambda rng: {"x_ptr": rng.integers(0, 2**32, 1000, dtype=np.uint64).astype(np.uint32),
                      "max_ptr": np.full(8, 2**31 - 5, np.uint32),
                      "min_ptr": np.full(8, 2**31 + 5, np.uint32), "n": 1000},
         (8,), {"BLOCK": 128, "SLOTS": 8}, ("max_ptr", "min_ptr"), _max_min_reference),
    _case("atomic-max-min-int64", max_min_kernel,
         lambda rng: {"x_ptr": rng.integers(-2**62, 2**62, 500),
                      "max_ptr": np.zeros(4, np.int64), "min_ptr": np.zeros(4, np.int64),
                      "n": 500},
         (4,), {"BLOCK": 128, "SLOTS": 4}, ("max_ptr", "min_ptr"), _max_min_reference),
    _case("atomic-and-or-xor", bitwise_kernel,
         lambda rng: {"and_ptr": np.full(4, 0xFFFFFFFF, np.uint32),
                      "or_ptr": np.zeros(4, np.uint32),
                      "xor_ptr": rng.integers(0, 2**32, 8, dtype=np.uint64).astype(np.uint32)},
         (12,), {"BLOCK": 64}, ("and_ptr", "or_ptr", "xor_ptr"), _bitwise_reference),
    _case("atomic-old-values-replicated-int32-cas16", old_values_kernel,
         _old_values_args(np.int32, np.int16), (1,), {"BLOCK": 32},
         ("add_ptr", "xchg_ptr", "cas_ptr", "old_add", "old_xchg", "old_cas"),
         _old_values_reference),
    _case("atomic-old-values-fp32-cas64", old_values_kernel,
         _old_values_args(np.float32, np.int64, block=256), (1,), {"BLOCK": 256},
         ("add_ptr", "xchg_ptr", "cas_ptr", "old_add", "old_xchg", "old_cas"),
         _old_values_reference),
    _case("atomic-old-values-2d", old_values_2d_kernel,
         lambda rng: {"ptr": rng.uniform(-20, 20, 32).astype(np.float32),
                      "old_ptr": np.zeros(32, np.float32)},
         (1,), {"M": 4, "N": 8}, ("ptr", "old_ptr"),
         lambda a: {"ptr": np.maximum(a["ptr"], np.arange(32) - 10.0).astype(np.float32),
                    "old_ptr": a["ptr"] + np.float32(0.5)}),
    _case("atomic-scalar-ticket", ticket_kernel,
         lambda rng: {"counter_ptr": np.zeros(1, np.int32), "seen_ptr": np.zeros(40 * 16, np.int32)},
         (40,), {"BLOCK": 16}, ("counter_ptr", "seen_ptr"),
         lambda a: {"counter_ptr": np.array([40], np.int32),
                    "seen_ptr": np.tile(np.arange(1, 17, dtype=np.int32), 40)}),
    _case("atomic-cas-spin-lock", lock_kernel,
         lambda rng: {"lock_ptr": np.zeros(1, np.int32), "count_ptr": np.zeros(1, np.int32),
                      "x_ptr": rng.integers(0, 100, 256).astype(np.int32)},
         (48,), {"BLOCK": 256}, ("lock_ptr", "count_ptr", "x_ptr"),
         lambda a: {"lock_ptr": np.zeros(1, np.int32), "count_ptr": np.array([48], np.int32),
                    "x_ptr": a["x_ptr"] + sum(range(48)) + 48 * np.arange(256, dtype=np.int32)}),
    _case("atomic-histogram-in-loop-and-if", histogram_kernel,
         lambda rng: {"x_ptr": rng.integers(0, 16, 5000).astype(np.int32),
                      "hist_ptr": np.zeros(16, np.int32), "n": 5000},
         (6,), {"BLOCK": 128}, ("hist_ptr",), _histogram_reference),
]
