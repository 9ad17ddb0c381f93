"""Which dot loops software pipelining can rewrite, and with what (``passes.pipeline``).

In: a ``for`` loop of a kir Function, its axis info and users, ``num_warps``,
``num_stages``, whether the target has wgmma, and the shared-memory budget of the stages.
Out: a ``LoopShape`` (its dots and their distinct operand loads, the stages that fit, TMA
recipes or cp.async, the carried values the copies shift ahead and those kept unshifted,
wgmma groups left in flight or deferred to a later dot's wait), or None when the loop does
not qualify. The rules are in ``passes.pipeline``'s module text; this module only decides.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..ir import kir
from .layouts import memory_vector_width
from .mma_layout import choose_mma, is_int8
from .rewrite import body_slice, dot_operand_loads, is_zero, refusal, tile_shape
from .tensor_maps import tensor_map_recipe

# Leaves room (3 KB of an A100's 163 KB block) for shared memory the loop body needs.
MAX_PIPELINE_BYTES = 160 * 1024
STAGE_ALIGNMENT = 128             # one 128-byte line: every stage starts a swizzle phase
WGMMA_STAGE_ALIGNMENT = 1024      # wgmma descriptors assume whole 1024-byte swizzle atoms
MBARRIER_BYTES = 8                # a TMA stage's mbarrier


def staged_tile_bytes(shape: tuple, element, async_proxy: bool = False) -> int:
    """Bytes of one stage of a [rows, columns] tile: the tile itself (the swizzle needs no
    padding), rounded up to the next stage's alignment."""
    rows, columns = shape
    alignment = WGMMA_STAGE_ALIGNMENT if async_proxy else STAGE_ALIGNMENT
    return (rows * columns * element.itemsize + alignment - 1) // alignment * alignment


def _copyable(load, infos) -> bool:
    """cp.async can copy it: no other value than 0 (masked-off elements are zero-filled),
    not volatile, vectors of at least 4 bytes."""
    if load.attrs.get("volatile"):
        return False
    if load.attrs.get("has_other") and not is_zero(load.operands[-1]):
        return False
    return memory_vector_width(load, infos) * load.result.element.itemsize >= 4


@dataclass
class LoopShape:
    """What ``analyze_loop`` found in a loop it can pipeline."""
    dots: list               # the dots, in body order
    loads: list              # their distinct operand loads: one staged buffer each
    operands: list           # per dot: [(index into loads, transposed) for a, b]
    view_ops: list           # permutes / reshapes between loads and dots (dropped)
    load_ops: list           # the ops computing the loads, in body order
    async_proxy: bool        # the async proxy reads (wgmma) or writes (TMA) the stages
    in_flight: bool          # ... and leaves its group running across trips
    shifted: list            # indices of the carried values the addresses read
    update_slice: dict       # id -> op: the ops computing their next values
    stages: int
    recipes: list | None     # TMA: the operands' tensor-map recipes; None: cp.async
    # Operands loaded before the loop (flash attention's q): (dot index, operand position,
    # the load), copied once into a one-slot buffer with trip 0's group.
    invariants: list = None
    # Dots left in flight into the next trip (``_deferred_dots``): [(dot, carried index)],
    # and the dot whose wait retires them.
    deferred: list = None
    retiring: kir.Op | None = None
    # Indices of shifted values whose loop results are read after the loop.
    kept: list = None


def analyze_loop(function, loop, infos, users, num_warps: int, num_stages: int,
                 wgmma: bool, budget: int = MAX_PIPELINE_BYTES,
                 why: list | None = None) -> LoopShape | None:
    """The loop's shape when it qualifies (see ``passes.pipeline``'s module text), else
    None. Operands loaded through tensor descriptors qualify only as TMA copies (every
    operand load, ``tensor_maps.tensor_map_recipe``, on sm_90); ``infos`` is only read for
    pointer loads (None: looking for TMA loops only). ``why``: where None is the answer,
    the reason is appended to it (``rewrite.refusal``)."""
    region = loop.regions[0]
    ops = region.body
    terminator = region.terminator
    shape = dot_operand_loads(loop, mixed=True, why=why)
    if shape is None:
        return None
    dots, loads, load_ops = shape.dots, shape.loads, shape.load_ops
    # A stage is read as it was loaded or, for B, transposed (a K-major B).
    if any(operands[0] is not None and operands[0][1] for operands in shape.operands):
        return refusal(why, "a dot's A is a transposed load")
    # Staged, B read through a transpose is K-major, as fp32 (tf32) operands need on wgmma
    # (``mma_layout.k_major_staged``, which asks for a staged A as well); a B the threads
    # store is N-major, except an int8 one (``mma_layout.k_major_b``).
    layouts = [choose_mma(dot, num_warps, wgmma, k_major=(
                   operands[1] is None or operands[1][1]) if is_int8(dot.operands[0].element)
                   else None not in operands and operands[1][1])
               for dot, operands in zip(dots, shape.operands)]
    if None in layouts:
        return refusal(why, "a dot does not run on tensor cores")
    if len({layout.instruction for layout in layouts}) != 1:
        return refusal(why, "its dots run on different tensor-core instructions")
    on_wgmma = layouts[0].instruction == "wgmma"
    # wgmma runs asynchronously across trips, keeping the accumulators in fp32 registers.
    in_flight = on_wgmma and all(dot.result.element.is_fp32() and
                                 _chained(dot, region, users) for dot in dots)
    deferred, retiring = _deferred_dots(dots, region, users) if on_wgmma and \
        not in_flight else ([], None)
    recipes = None
    if any(load.opcode == "descriptor_load" for load in loads):
        # TMA comes with wgmma (sm_90), whichever instruction the dots run on.
        recipes = [tensor_map_recipe(load, function) for load in loads]
        if not wgmma or None in recipes:
            return refusal(why, "a tensor-descriptor operand that TMA cannot copy")
    elif infos is None:
        return None
    elif not all(_copyable(load, infos) for load in loads):
        return refusal(why, "an operand load the copies to shared memory cannot take "
                       "(vectors under 4 bytes, or an `other` that is not zero)")
    # Stages that the async proxy reads (wgmma) or writes (TMA): on 1024-byte swizzle atoms.
    async_proxy = on_wgmma or recipes is not None
    carried = region.args[1:]
    body_ids = {id(o) for o in ops}
    load_slice = {id(o): o for o in load_ops}
    # The carried values the addresses read: shifted S-1 trips ahead, so nothing else may
    # read them (in the body or after the loop), and their next values must follow from
    # themselves, the induction variable and values from outside the loop.
    shifted = [index for index, arg in enumerate(carried)
               if any(arg in o.operands for o in load_slice.values())]
    shifted_args = {carried[i] for i in shifted}
    update_slice = {}
    for index in shifted:
        for o in body_slice(terminator.operands[index], body_ids):
            update_slice[id(o)] = o
    if any(o.opcode not in kir.PURE_OPS for o in update_slice.values()):
        return refusal(why, "an operand address's next value is not a pure function")
    for o in list(load_slice.values()) + list(update_slice.values()):
        for value in o.operands:
            if value in carried and value not in shifted_args:
                return refusal(why, "an operand address reads a loop-carried value that "
                               "other ops read too", o)
    allowed_users = set(load_slice) | set(update_slice) | {id(l) for l in loads}
    for index in shifted:
        if any(id(user) not in allowed_users and user is not terminator
               for user in users.get(carried[index], [])):
            return refusal(why, "a loop-carried operand address is read by other ops")
    # A shifted value read after the loop (a pointer the next loop goes on from) keeps an
    # unshifted copy, carried beside it (``_keep_unshifted``), when its next value follows
    # from itself alone (and the induction variable, and values from outside).
    kept = [index for index in shifted if users.get(loop.results[index])]
    for index in kept:
        for o in body_slice(terminator.operands[index], body_ids):
            if any(value in carried and value is not carried[index] for value in o.operands):
                return refusal(why, "an operand address read after the loop advances from "
                               "other carried values", o)

    invariants = [] if recipes is not None else \
        _invariant_operands(dots, shape.operands, body_ids, infos)
    once = sum(staged_tile_bytes(load.result.type.shape, load.result.element, async_proxy)
               for _, _, load in invariants)
    stages = num_stages
    per_stage = sum(staged_tile_bytes(tile_shape(l), l.result.element, async_proxy)
                    for l in loads) + (MBARRIER_BYTES if recipes else 0)
    while stages > 2 and stages * per_stage + once > budget:
        stages -= 1
    if stages * per_stage + once > budget:
        return refusal(why, f"{stages} stages take {stages * per_stage + once} bytes of "
                       f"shared memory, over the {budget} they may use")
    return LoopShape(dots, loads, shape.operands, shape.view_ops, load_ops, async_proxy,
                      in_flight, shifted, update_slice, stages, recipes, invariants,
                      deferred, retiring, kept)


def _invariant_operands(dots, operands, body_ids: set, infos) -> list:
    """(dot index, position, load) for each operand a dot of the loop reads as it was
    loaded before the loop (a 2-d pointer load cp.async can copy, B not transposed): copied
    once, it stays in shared memory for the whole loop instead of being stored by the
    threads, from registers held across the loop, on every trip."""
    found = []
    for index, (dot, entries) in enumerate(zip(dots, operands)):
        for position, entry in enumerate(entries):
            if entry is not None:
                continue
            load = dot.operands[position].owner
            if load is None or id(load) in body_ids or load.opcode != "load" or \
                    len(load.result.type.shape) != 2 or 1 in load.result.type.shape or \
                    not _copyable(load, infos):
                continue
            found.append((index, position, load))
    return found


def _chained(dot, region, users) -> bool:
    """Whether ``dot``'s accumulator is a carried value that only it reads and its result
    only the yield, back into that carried value: its wgmma group may then stay in flight
    into the next trip, as nothing else touches those registers."""
    accumulator = dot.operands[2]
    carried = region.args[1:]
    terminator = region.terminator
    if not any(accumulator is arg for arg in carried):
        return False
    index = next(i for i, arg in enumerate(carried) if arg is accumulator)
    return terminator.operands[index] is dot.result and \
        users.get(accumulator) == [dot] and users.get(dot.result) == [terminator]


def _deferred_dots(dots, region, users) -> tuple:
    """([(dot, carried index)], retiring dot): the wgmma dots whose group may stay in flight
    into the next trip, and the first other dot, whose wait retires them there. A deferred
    dot's fp32 result goes only to the yield, into one carried value; every user of that
    value in the body is an op of the body itself after the retiring dot (the wait that
    follows it is for every earlier group, as wgmma groups complete in order). ([], None)
    when there is no such dot or nothing to retire them."""
    ops = region.body
    terminator = region.terminator
    position = {id(o): index for index, o in enumerate(ops)}
    carried = region.args[1:]
    deferred = []
    for dot in dots:
        indices = [i for i, value in enumerate(terminator.operands) if value is dot.result]
        if dot.result.element.is_fp32() and users.get(dot.result) == [terminator] and \
                len(indices) == 1:
            deferred.append((dot, indices[0]))
    waiting = [dot for dot in dots if all(dot is not other for other, _ in deferred)]
    if not deferred or not waiting or not waiting[0].result.element.is_fp32():
        return [], None
    retiring = waiting[0]
    for _, index in deferred:
        if any(position.get(id(user), -1) <= position[id(retiring)]
               for user in users.get(carried[index], [])):
            return [], None
    return deferred, retiring
