"""Loops without dots fetch the next trip's small loads into L1 while this trip runs.

In: a kir ``Function`` the pass may edit (the compiler hands it a copy, after the dot loops
are pipelined or prefetched). Out: the same function where each qualifying ``for`` starts
its body with a ``prefetch`` of the addresses its loads will read on the next trip:

    before:  for i: x = load(p(i), m(i)); ...
    after:   for i: prefetch(p(i + step), m(i + step) & (i + step < end))
                    x = load(p(i), m(i)); ...

A ``prefetch`` is a hint (``prefetch.global.L1``): it returns and writes nothing, and it
fetches only what the next trip's loads read (a masked-off element fetches nothing, and the
last trip fetches nothing). A loop qualifies when it counts up, is not pipelined, holds no
dot, store, atomic or other side effect and no region but reductions' and scans' combines;
its loads qualify when their addresses and masks are pure functions of the induction
variable and of values from outside the loop (not of values carried from trip to trip,
which the next trip has not computed yet), and all of them together are small: at most
``MAX_PREFETCH_BYTES`` per thread, a 32-bit element (a row of a tile or a few scalars, not
a streamed block, whose own loads keep the memory system busy: liger's cross-entropy loop
over the vocabulary, 16 bytes a thread, is left as it is).

Why: in a loop whose trips form a chain (fla's forward substitutions: row i of a tile
loaded, reduced against the tile, written back into it; 14 trips), each trip waits for its
row before anything else can start. The rows sit in L2: the tile that holds them was loaded
before the loop, but other traffic (a spilling K loop beside it in KDA's inter-solve
kernel, 255 registers) evicts them from L1. With the next row fetched while this one is
reduced, the kernel alone took 60.9 us instead of 68.4 (H200; Triton 59.7 us: its kernel
spills less and finds the rows in L1). Inside fla's op, whose earlier kernels leave the
inputs in L2, it took 60.4 us either way (Triton 50.5): what holds it there is elsewhere.
"""
from __future__ import annotations

from ..ir import kir
from ..ir import types as T
from ..ir.types import BlockType
from .rewrite import body_slice, clone_ops, new_op, trip_count, upward_for_loops

# Per thread: what a loop may fetch ahead (bytes of its loads' blocks over the threads).
MAX_PREFETCH_BYTES = 4
# Ops a loop body may hold besides pure ops and loads.
_ALLOWED = frozenset(("load", "yield")) | kir.COMBINING


def prefetch_next_trip(function: kir.Function, num_warps: int) -> int:
    """Rewrites every qualifying loop; returns how many were rewritten."""
    budget = MAX_PREFETCH_BYTES * 32 * num_warps
    return sum(_rewrite(loop, budget) for _, loop in upward_for_loops(function))


def _rewrite(loop, budget: int) -> bool:
    trips = trip_count(loop)
    if loop.attrs.get("pipeline") is not None or (trips is not None and trips <= 1):
        return False   # (a loop of one trip has no next one to fetch for)
    region = loop.regions[0]
    body = region.body
    for op in body:
        if op.opcode not in kir.PURE_OPS and op.opcode not in _ALLOWED:
            return False
        if op.regions and op.opcode not in kir.COMBINING:
            return False
    induction, carried = region.args[0], set(region.args[1:])
    body_ids = {id(op) for op in body}
    fetched = []   # (load, the body ops computing its address and mask, in body order)
    for load in (op for op in body if op.opcode == "load"):
        if load.attrs.get("volatile") or "staged" in load.attrs:
            continue
        addressing = load.operands[:2] if load.attrs.get("has_mask") else load.operands[:1]
        found = {}
        for value in addressing:
            found.update((id(op), op) for op in body_slice(value, body_ids))
        reads = {value for op in found.values() for value in op.operands} | set(addressing)
        if induction not in reads or reads & carried or \
                any(op.opcode not in kir.PURE_OPS for op in found.values()):
            continue
        fetched.append((load, [op for op in body if id(op) in found]))
    if not fetched or sum(_bytes(load) for load, _ in fetched) > budget:
        return False
    start, end, step = loop.operands[:3]
    next_induction = new_op("add", [induction, step], induction.type)
    in_range = new_op("cmp", [next_induction.result, end], BlockType(T.int1), predicate="lt")
    added = [next_induction, in_range]
    following = {induction: next_induction.result}
    for load, address_ops in fetched:
        added += clone_ops([op for op in address_ops if op.result not in following], following)
        pointer = following.get(load.operands[0], load.operands[0])
        shape = pointer.type.shape
        guard = in_range.result
        if shape:
            splat = new_op("splat", [guard], BlockType(T.int1, shape))
            added.append(splat)
            guard = splat.result
        if load.attrs.get("has_mask"):
            mask = following.get(load.operands[1], load.operands[1])
            combined = new_op("and", [mask, guard], BlockType(T.int1, shape))
            added.append(combined)
            guard = combined.result
        prefetch = new_op("prefetch", [pointer, guard], None)
        prefetch.loc = load.loc
        added.append(prefetch)
    body[0:0] = added
    return True


def _bytes(load) -> int:
    kind = load.result.type
    count = kind.numel if isinstance(kind, BlockType) else 1
    element = kind.element if isinstance(kind, BlockType) else kind
    return count * element.itemsize
