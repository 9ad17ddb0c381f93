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
from .layouts import memory_vector_dim, memory_vector_width
from .mma_layout import choose_mma, is_int8, staged_k_major
from .rewrite import body_slice, dot_operand_loads, is_zero, refusal, tile_shape
from .tensor_maps import tensor_map_recipe

# Leaves room (3 KB of an A100's 163 KB block) for shared memory the loop body needs.
MAX_PIPELINE_BYTES = 160 * 1024
STAGE_ALIGNMENT = 128             # one 128-byte line: every stage starts a swizzle phase
WGMMA_STAGE_ALIGNMENT = 1024      # wgmma descriptors assume whole 1024-byte swizzle atoms
MBARRIER_BYTES = 8                # one mbarrier of a TMA stage (one per group of tiles)


def _k_major(dot, operands) -> bool:
    """Whether ``dot``'s operands will reach wgmma K-major once staged as ``operands`` says
    ((index, transposed) or None: stored by the threads): int8 and fp32 as
    ``mma_layout.staged_k_major`` says; 16-bit ones both staged, B through a transpose."""
    element = dot.operands[0].element
    if is_int8(element) or element.is_fp32():
        return staged_k_major(dot, *(None if entry is None else entry[1] for entry in operands))
    return None not in operands and operands[1][1]


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
    # Other loads of the body copied ahead into plain tiles and read back into registers
    # where they were, and each tile's dims, fastest first (``plain_order``).
    staged: list = None
    orders: list = None
    # Indices into ``loads`` of the tiles copied down their columns (``_staging``).
    columns: list = None
    # TMA: each load's mbarrier group (``barrier_groups``).
    groups: list = None


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
    written = _written_roots(function, loop)
    if written is None:
        return refusal(why, "it stores or updates memory through an address that is not "
                       "a kernel argument's")
    # Operand loads that cannot be staged as the dot reads them are left to the dot (and
    # copied ahead as plain tiles, below, where they can be).
    excluded = set()
    while True:
        shape = dot_operand_loads(loop, mixed=True, why=why, excluded=frozenset(excluded))
        if shape is None:
            return None
        staging = [_staging(load, index, shape, infos, written, function, loop)
                   for index, load in enumerate(shape.loads)]
        left = [load for load, how in zip(shape.loads, staging) if how is None]
        if not left:
            break
        for load in left:
            if infos is not None and not _plain_copyable(load, infos):
                return refusal(why, "an operand load the copies to shared memory cannot "
                               "take (vectors under 4 bytes, or an `other` that is not zero)")
        excluded |= {id(load) for load in left}
    dots, loads = shape.dots, shape.loads
    # Tiles read down their columns are staged as their transpose (copied down them), and
    # their dots read the stage transposed.
    columns = [index for index, how in enumerate(staging) if how == "columns"]
    shape.operands = [[(entry[0], True) if entry is not None and entry[0] in columns
                       else entry for entry in operands] for operands in shape.operands]
    # Staged, B read through a transpose is K-major, as fp32 (tf32) operands need on wgmma
    # (``mma_layout.k_major_operands``, which asks for a K-major A as well); a B the threads
    # store is N-major, except an int8 or fp32 one (``mma_layout.staged_k_major``).
    layouts = [choose_mma(dot, num_warps, wgmma, k_major=_k_major(dot, operands),
                          a_stored_m_major=operands[0] is not None and operands[0][1])
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
    body_ids = {id(o) for o in ops}
    carried = region.args[1:]
    # Other loads of the body, copied ahead the same way into plain tiles and read back
    # into registers where they were (not with TMA, whose trips wait on mbarriers).
    staged = [] if recipes is not None else [
        o for o in ops if o.opcode == "load" and not any(o is load for load in loads) and
        _plain_copyable(o, infos) and _root(o.operands[0], function, loop) not in
        written | {None} and all(s.opcode in kir.PURE_OPS or s is o
                                 for s in body_slice(o.result, body_ids))]
    if not loads and not staged:
        return refusal(why, "no operand of a dot is a load of the body")
    # Stages that the async proxy reads (wgmma) or writes (TMA): on 1024-byte swizzle atoms.
    async_proxy = on_wgmma or recipes is not None
    invariants = [] if recipes is not None else \
        _invariant_operands(dots, shape.operands, body_ids, infos)
    once = sum(staged_tile_bytes(load.result.type.shape, load.result.element, async_proxy)
               for _, _, load in invariants)
    tiles = sum(staged_tile_bytes(tile_shape(l), l.result.element, async_proxy)
                for l in loads)
    groups = barrier_groups(shape.operands, len(loads)) if recipes is not None else None
    if groups is not None:
        tiles += MBARRIER_BYTES * (max(groups) + 1)
    # The plain tiles go first where the stages do not fit: the dots' tiles matter most.
    staged.sort(key=lambda o: plain_tile_bytes(o.result.type.shape, o.result.element))
    while True:
        per_stage = tiles + sum(plain_tile_bytes(o.result.type.shape, o.result.element)
                                for o in staged)
        stages = num_stages
        while stages > 2 and stages * per_stage + once > budget:
            stages -= 1
        if stages * per_stage + once <= budget or not staged or \
                (not loads and len(staged) == 1):
            break
        staged.pop()
    if stages * per_stage + once > budget:
        return refusal(why, f"{stages} stages take {stages * per_stage + once} bytes of "
                       f"shared memory, over the {budget} they may use")
    # The carried values the copies' addresses read are shifted ahead. Where plain tiles'
    # addresses read carried values that cannot be, the plain tiles whose addresses read no
    # carried value are staged alone, or none (the loop as its dots' tiles alone make it).
    fallbacks = [staged, [o for o in staged if not any(
                     value in carried for s in body_slice(o.result, body_ids)
                     for value in s.operands)], []]
    found, reasons = None, []
    for attempt, candidates in enumerate(fallbacks):
        if attempt and candidates == fallbacks[attempt - 1]:
            continue
        if not loads and not candidates:
            break
        found = _shifted_values(loop, loads + candidates, users, body_ids, reasons)
        if found is not None:
            staged = candidates
            break
    if found is None:
        return refusal(why, reasons[-1])
    shifted, update_slice, kept = found
    load_slice = _slices(loads + staged, body_ids)
    load_ops = [o for o in ops if id(o) in load_slice]
    orders = [plain_order(o, infos) for o in staged]
    return LoopShape(dots, loads, shape.operands, shape.view_ops, load_ops, async_proxy,
                      in_flight, shifted, update_slice, stages, recipes, invariants,
                      deferred, retiring, kept, staged, orders, columns, groups)


def barrier_groups(operands: list, count: int) -> list:
    """TMA: the mbarrier group of each of the ``count`` operand loads, from ``operands``
    (``LoopShape.operands``, dots in body order): a load goes with the first dot that reads
    it, and each dot that reads a load no earlier dot read opens a group. A trip then waits
    for each group just before its dot (as Triton's pipeline does), so the first dot
    starts when its own tiles have landed, not all of the trip's."""
    groups = [None] * count
    opened = 0
    for dot_operands in operands:
        new = [entry[0] for entry in dot_operands
               if entry is not None and groups[entry[0]] is None]
        for index in new:
            groups[index] = opened
        opened += bool(new)
    return groups


def plain_tile_bytes(shape: tuple, element) -> int:
    """Bytes of one stage of a plain tile (``LoopShape.staged``), rounded up to 128."""
    numel = 1
    for size in shape:
        numel *= size
    return (numel * element.itemsize + STAGE_ALIGNMENT - 1) // STAGE_ALIGNMENT * \
        STAGE_ALIGNMENT


def plain_order(load, infos) -> tuple:
    """The dims of a plain tile, fastest first: the one its load reads memory in vectors
    along (``layouts.memory_vector_dim``), then the others, last first."""
    rank = load.result.type.rank
    if rank == 0:
        return ()
    fastest = memory_vector_dim(load, infos)
    return (fastest,) + tuple(dim for dim in range(rank - 1, -1, -1) if dim != fastest)


def _plain_copyable(load, infos) -> bool:
    """cp.async can copy it into a plain tile: ``_copyable`` along the dimension it reads
    memory in vectors along; a scalar of at least 4 bytes."""
    if load.attrs.get("volatile") or load.opcode != "load":
        return False
    if load.attrs.get("has_other") and not is_zero(load.operands[-1]):
        return False
    width = memory_vector_width(load, infos, memory_vector_dim(load, infos)) \
        if load.result.type.rank else 1
    return width * load.result.element.itemsize >= 4


def _staging(load, index, shape, infos, written, function, loop) -> str | None:
    """How a dot operand load is staged for its dots: "rows" (as loaded; a B may be read
    through a transpose), "columns" (a 16-bit tile read down its columns, copied down
    them into its transpose: the dots read an A M-major, a B K-major), or None: an A read
    through a transpose that is not 16-bit (ldmatrix and wgmma transpose only 16-bit
    tiles), a tile cp.async cannot copy either way, or memory the loop may write."""
    if written and _root(load.operands[0], function, loop) in written | {None}:
        return None
    entries = [entry for operands in shape.operands for entry in operands
               if entry is not None and entry[0] == index]
    as_a = [operands[0] for operands in shape.operands]
    sixteen_bits = load.result.element.itemsize == 2
    if (index, True) in as_a and not sixteen_bits:
        return None
    if load.opcode != "load" or infos is None or _copyable(load, infos):
        return "rows"
    dims = [dim for dim, size in enumerate(load.result.type.shape) if size != 1]
    if sixteen_bits and len(dims) == 2 and all(not transposed for _, transposed in entries) \
            and _plain_copyable(load, infos) and memory_vector_dim(load, infos) == dims[0]:
        return "columns"
    return None


def _slices(loads: list, body_ids: set) -> dict:
    """id -> op: the ops computing ``loads`` (themselves included)."""
    found = {}
    for load in loads:
        for o in body_slice(load.result, body_ids):
            found[id(o)] = o
    return found


def _shifted_values(loop, loads: list, users, body_ids: set, why) -> tuple | None:
    """(shifted, update_slice, kept) for copies of ``loads`` made S-1 trips ahead: the
    indices of the carried values their addresses read (nothing else may read them, in the
    body or after the loop, and their next values must follow from themselves, the
    induction variable and values from outside), the ops computing those next values, and
    those of them read after the loop (a pointer the next loop goes on from: it keeps an
    unshifted copy, ``pipeline_carried.keep_unshifted``, when its next value follows from
    itself alone). None when there are none such (the reason appended to ``why``)."""
    region = loop.regions[0]
    terminator = region.terminator
    carried = region.args[1:]
    load_slice = _slices(loads, body_ids)
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
    allowed_users = set(load_slice) | set(update_slice)
    for index in shifted:
        if any(id(user) not in allowed_users and user is not terminator
               for user in users.get(carried[index], [])):
            return refusal(why, "a loop-carried operand address is read by other ops")
    kept = [index for index in shifted if users.get(loop.results[index])]
    for index in kept:
        for o in body_slice(terminator.operands[index], body_ids):
            if any(value in carried and value is not carried[index] for value in o.operands):
                return refusal(why, "an operand address read after the loop advances from "
                               "other carried values", o)
    return shifted, update_slice, kept


def _root(pointer, function, loop):
    """The kernel argument a pointer (block) is computed from, following offsets, views
    and ``loop``'s carried values to their initial values; None when it is not one."""
    arguments = {param.value for param in function.params}
    region = loop.regions[0]
    seen = set()
    while pointer not in arguments:
        if pointer in seen:
            return None
        seen.add(pointer)
        if pointer in region.args[1:]:
            pointer = loop.operands[3 + region.args.index(pointer) - 1]
            continue
        owner = pointer.owner
        if owner is None or owner.opcode not in ("addptr", "splat", "broadcast",
                                                 "expand_dims", "reshape", "permute", "hint"):
            return None
        pointer = owner.operands[0]
    return pointer


def _written_roots(function, loop) -> set | None:
    """The kernel arguments the loop's stores and atomics write through (nested ones
    included); None when one writes through any other address. Loads from other
    arguments may be copied trips ahead: as in Triton, two pointer arguments are taken not
    to overlap."""
    roots = set()
    for op in kir.walk(loop.regions[0].body):
        if op.opcode in ("store", "descriptor_store") or op.opcode in kir.ATOMICS:
            if op.opcode == "descriptor_store":
                return None
            root = _root(op.operands[0], function, loop)
            if root is None:
                return None
            roots.add(root)
    return roots


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
