"""Loops that run once, loads that every trip repeats, and values every trip resets.

In: a kir ``Function`` the pass may edit (the compiler hands it a copy). Out: the same
function where

1. a ``for`` whose bounds and step are constants giving exactly one trip is replaced by its
   body (the induction variable is the start, the carried values their initial ones, the
   loop's results what the body yields): Triton's canonicalizer does the same, and the
   loads of such a body then read the enclosing loop's values directly;
2. in a ``for`` that writes no memory (no store, atomic, asynchronous copy, barrier, print,
   assert or inline asm, nested regions included) and runs at least once (constant bounds),
   a ``load`` whose operands all come from outside the loop, with the pure ops that compute
   them in the body, moves before the loop: loaded once instead of on every trip. Moving a
   load out of a loop that might not run could fault; a volatile load stays;
3. in any ``for``, a division, square root, library math function or cast whose operands
   all come from outside the loop (with the invariant elementwise ops, splats and
   constants that feed it) moves before it, as Triton's loop invariant code motion moves
   it: computed once, even if the loop does not run (these are defined everywhere;
   integer division is not one of them: undefined on zero, it stays);
4. (done first) in any ``for``, a carried value that every trip sets to what it started
   as (the same pure ops on the same values from outside the loop, ``o = tl.arange(0,
   64)`` again in the body, or the value itself) stops being carried: the body and the
   code after the loop read the initial value.

Why (4): Python's loop turns every reassigned name into a carried value; Triton's
canonicalizer drops these the same way (an iter_arg whose init and yielded values are one
value once LICM and CSE have run). Carried, an address computed from it changes from trip
to trip as far as the pipeliner can tell: fla's chunk_h kernel with USE_GK sets
``o_k1 = tl.arange(0, 64)`` on every trip, and its loads were not pipelined.

Why (3): LLVM does not move the calls these ops become (fp32 ``/`` is an asm
``div.full.f32``) past a shuffle or a barrier, which it cannot know to return: liger's jsd
computed ``1.0 / n_non_ignore`` on every trip, after its reductions (sm_80: 30 registers,
28 now, Triton 27). Casts: liger's modulated rms norm backward widens six i32 strides in
its row loop; moved out, ptxas needs 32 registers instead of 40 (Triton 32). Other
arithmetic stays where it is: LLVM hoists it itself, and a negation or a product by a
constant moved out early no longer folds into the loop's FMAs (liger's cross entropy with
softcapping took 32 registers instead of 27).

Why (2): liger's int8 x int2 matmul reloads the same packed B tile on each of four trips (its
inner loop runs once); kept in the loop, the tile's 64 byte addresses per thread stay live
across it beside the 128 accumulator registers, and ptxas spilled 1.3 KB. Triton's loop
invariant code motion loads the tile once before the loop. LLVM cannot: by then the loop
also writes shared memory.
"""
from __future__ import annotations

import struct

from ..ir import kir
from .rewrite import ops_with_blocks, trip_count

# Ops after which a load may not move: anything that writes memory or orders it.
WRITES = kir.SIDE_EFFECT_OPS | frozenset(("store", "descriptor_store"))
# Ops computed before a loop whatever its trip count (3): no memory, no undefined results.
SPECULATABLE = (kir.ELEMENTWISE_OPS - {"idiv", "irem"}) | frozenset(
    ("constant", "splat", "broadcast", "expand_dims", "arange", "program_id", "num_programs"))
# The ops (3) moves, with the invariant ops that feed them.
HOISTED = frozenset(("fdiv", "sqrt", "rsqrt", "math", "cast"))


def hoist_loop_invariants(function: kir.Function) -> int:
    """Applies the rewrites (innermost loops first); returns how many carried values were
    dropped, ops moved or loops folded."""
    changed = 0
    for block, loop in reversed([(b, op) for b, op in ops_with_blocks(function.body)
                                 if op.opcode == "for"]):
        changed += _drop_reset_carried(function, loop)
    # Innermost first: a folded or hoisted inner loop leaves its loads to the outer one.
    for block, loop in reversed([(b, op) for b, op in ops_with_blocks(function.body)
                                 if op.opcode == "for"]):
        if trip_count(loop) == 1:
            _fold(function, block, loop)
            changed += 1
    for block, loop in reversed([(b, op) for b, op in ops_with_blocks(function.body)
                                 if op.opcode == "for"]):
        changed += _hoist_loads(block, loop)
    for block, loop in reversed([(b, op) for b, op in ops_with_blocks(function.body)
                                 if op.opcode == "for"]):
        changed += _hoist_invariant_results(block, loop)
    return changed


def _replace_uses(ops, mapping: dict) -> None:
    for op in kir.walk(ops):
        op.operands[:] = [mapping.get(v, v) for v in op.operands]


def _fold(function: kir.Function, block: list, loop) -> None:
    """Replaces a one-trip ``for`` by its body."""
    region = loop.regions[0]
    induction, carried = region.args[0], region.args[1:]
    start = loop.operands[0]
    inits = loop.operands[3:]
    mapping = dict(zip([induction] + list(carried), [start] + list(inits)))
    body = [op for op in region.body if op is not region.terminator]
    _replace_uses(body + [region.terminator], mapping)
    results = dict(zip(loop.results, region.terminator.operands))
    position = block.index(loop)
    block[position:position + 1] = body
    _replace_uses(function.body, results)


def _same_value(outer, computed, depth: int = 0) -> bool:
    """Whether ``computed`` (in a loop body) is always ``outer`` (before the loop): the
    same value, or the same pure op (opcode, attributes, type) on operands that are."""
    if outer is computed:
        return True
    first, second = outer.owner, computed.owner
    if first is None or second is None or depth > 32 or second.opcode not in kir.PURE_OPS \
            or first.regions or second.regions or first.opcode != second.opcode \
            or not _same_attributes(first.attrs, second.attrs) or outer.type != computed.type \
            or len(first.operands) != len(second.operands):
        return False
    return all(_same_value(a, b, depth + 1) for a, b in zip(first.operands, second.operands))


def _same_attributes(first: dict, second: dict) -> bool:
    """Equal attributes, floats bit for bit (0.0 == -0.0 in Python; not as constants)."""
    if first.keys() != second.keys():
        return False
    for name, value in first.items():
        other = second[name]
        if isinstance(value, float) or isinstance(other, float):
            if not (isinstance(value, float) and isinstance(other, float)
                    and struct.pack("<d", value) == struct.pack("<d", other)):
                return False
        elif value != other:
            return False
    return True


def _drop_reset_carried(function: kir.Function, loop) -> int:
    """Rewrite 4: the carried values every trip resets to their initial value, replaced by
    it (inside the loop and after it) and removed from the loop; returns how many."""
    region = loop.regions[0]
    dropped = 0
    while True:
        carried, inits = region.args[1:], loop.operands[3:]
        yielded = region.terminator.operands
        index = next((i for i in range(len(carried)) if yielded[i] is carried[i]
                      or _same_value(inits[i], yielded[i])), None)
        if index is None:
            return dropped
        initial = inits[index]
        _replace_uses(region.body, {carried[index]: initial})
        _replace_uses(function.body, {loop.results[index]: initial})
        del region.args[1 + index], loop.operands[3 + index]
        del region.terminator.operands[index], loop.results[index]
        loop.result = None
        dropped += 1


def _writes_memory(loop) -> bool:
    return any(op.opcode in WRITES for op in kir.walk(loop.regions[0].body))


def _hoist_loads(block: list, loop) -> int:
    """Moves the loop's invariant loads (and their pure operand ops) before it."""
    if (trip_count(loop) or 0) < 1 or _writes_memory(loop):
        return 0
    region = loop.regions[0]
    inside = {id(op) for op in kir.walk(region.body)}
    direct = {id(op) for op in region.body}
    hoisted: list = []
    moved: set = set()

    def invariant(value) -> bool:
        owner = value.owner
        return owner is None and value not in region.args or \
            owner is not None and (id(owner) not in inside or id(owner) in moved)

    def slice_of(load) -> list | None:
        """The body ops ``load`` needs, in body order, if all are pure and invariant."""
        needed, pending = {}, list(load.operands)
        while pending:
            value = pending.pop()
            if invariant(value):
                continue
            owner = value.owner
            if owner is None or id(owner) not in direct or \
                    owner.opcode not in kir.PURE_OPS or owner.regions:
                return None   # a region argument, a nested op or an impure one
            if id(owner) not in needed:
                needed[id(owner)] = owner
                pending.extend(owner.operands)
        return [op for op in region.body if id(op) in needed]

    for op in list(region.body):
        if op.opcode != "load" or op.attrs.get("volatile") or id(op) in moved:
            continue
        needed = slice_of(op)
        if needed is None:
            continue
        for moving in needed + [op]:
            moved.add(id(moving))
            hoisted.append(moving)
    if not hoisted:
        return 0
    region.body[:] = [op for op in region.body if id(op) not in moved]
    position = block.index(loop)
    block[position:position] = hoisted
    return len(hoisted)


def _hoist_invariant_results(block: list, loop) -> int:
    """Moves the loop's invariant ``HOISTED`` (and the ops feeding them, all
    ``SPECULATABLE``) before it."""
    region = loop.regions[0]
    inside = {id(op) for op in kir.walk(region.body)}
    invariant: dict = {}
    for op in region.body:
        if op.opcode in SPECULATABLE and not op.regions and \
                all(_outside(value, inside, region, invariant) for value in op.operands):
            invariant[id(op)] = op
    needed: dict = {}
    pending = [op for op in invariant.values() if op.opcode in HOISTED]
    while pending:
        op = pending.pop()
        if id(op) not in needed:
            needed[id(op)] = op
            pending.extend(value.owner for value in op.operands
                           if value.owner is not None and id(value.owner) in invariant)
    if not needed:
        return 0
    hoisted = [op for op in region.body if id(op) in needed]
    region.body[:] = [op for op in region.body if id(op) not in needed]
    position = block.index(loop)
    block[position:position] = hoisted
    return len(hoisted)


def _outside(value, inside: set, region, invariant: dict) -> bool:
    """Whether ``value`` is defined before the loop or by an op already found invariant."""
    owner = value.owner
    if owner is None:
        return not any(value is arg for arg in region.args)
    return id(owner) not in inside or id(owner) in invariant
