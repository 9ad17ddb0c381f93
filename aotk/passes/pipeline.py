"""Software pipelining of loops that feed ``tl.dot``: the operand tiles of later trips are
copied global -> shared with ``cp.async`` while the tensor cores work on the current one.

In: a kir ``Function`` that the pass may edit (the compiler hands it a copy), its axis info,
``num_warps`` and ``num_stages`` (S). Out: the same function where each qualifying ``for``
loop is rewritten over S shared-memory stages per operand:

    before:  for i (c):   a = load(pa(i, c)); b = load(pb(i, c)); acc = dot(a, b, acc)
                          yield ..., c' = next(i, c)
    after:   for s in 0 .. S-2 (unrolled): copy the tiles of trip s into stage s; commit
             for i (c, stage):            # c now holds the values of trip i + S-1
                 async_wait(S-2)          # trip i's group has landed; barrier
                 acc = dot(shared_read(a, stage), shared_read(b, stage), acc)
                 copy the tiles of trip i+S-1 (masked off past the end) into stage (stage-1)%S
                 commit; c' = next(i + (S-1)*step, c)
                 yield ..., c', (stage+1)%S
             async_wait(0)                # nothing may land in shared memory after the loop

The barrier in ``async_wait`` also orders trip i-1's reads of stage (i-1)%S before trip
i's copies into it, so one barrier per trip suffices. Every trip commits one group (empty
past the end), which keeps the count of pending groups exact.

A loop qualifies when its step is positive, its body holds no stores, side effects or
nested regions, exactly one dot that tensor cores compute (``layouts.choose_mma``), whose
operands are two loads used by nothing else, with no ``other`` or a zero one (cp.async
zero-fills masked-off elements) and vectors of at least 4 bytes proven by axis info
(cp.async copies 4, 8 or 16 bytes). The loads' addresses and masks
must be pure functions of the induction variable, values from outside the loop and
carried values ``c`` that nothing else reads (their next values computed from themselves
alone): those are the values the rewrite shifts S-1 trips ahead. The stages must fit in
``MAX_PIPELINE_BYTES`` of shared memory; S shrinks (down to 2) until they do.

Stages hold each tile in the swizzled layout of ``backend.swizzle``, which both ``ldmatrix``
(mma.sync) and ``wgmma`` read. wgmma reads them through the async proxy (attribute
``async_proxy`` of the copies and reads): then each ``async_wait`` carries ``proxy_fence``,
ordering the copies before the dot, and stages start on 1024-byte swizzle atoms.

The copies come after the dot because ptxas never moves a shared-memory read above a
``cp.async`` (it cannot prove their addresses apart): copies first would hold every warp's
``ldmatrix`` and so the tensor cores until all of them were issued. After the dot, ptxas
interleaves their address math with the last ``mma.sync`` instructions.

With wgmma and an fp32 accumulator, the dot does not wait for its own tensor-core work
(``wgmma_in_flight`` = 1 on the dot and the loop): it waits for the previous trip's group,
then a barrier, before the copies refill the stage that group read. So the tensor cores
run trip i while the threads issue the copies and reach trip i+1's barrier.
"""
from __future__ import annotations

from ..ir import kir
from ..ir import types as T
from ..ir.types import BlockType
from .layouts import memory_vector_width
from .mma_layout import choose_mma
from .rewrite import (body_slice, clone_ops, constant, dot_operand_loads, new_op,
                      remove_unused_pure_ops, upward_for_loops, users_of)

# Leaves room (of the H100/H200's 227 KB per block) for the epilogue's layout conversion.
MAX_PIPELINE_BYTES = 160 * 1024
STAGE_ALIGNMENT = 128             # one 128-byte line: every stage starts a swizzle phase
WGMMA_STAGE_ALIGNMENT = 1024      # wgmma descriptors assume whole 1024-byte swizzle atoms


def staged_tile_bytes(shape: tuple, element, async_proxy: bool = False) -> int:
    """Bytes of one stage of a [rows, columns] tile: the tile itself (the swizzle needs no
    padding), rounded up to the next stage's alignment."""
    rows, columns = shape
    alignment = WGMMA_STAGE_ALIGNMENT if async_proxy else STAGE_ALIGNMENT
    return (rows * columns * element.itemsize + alignment - 1) // alignment * alignment


def pipeline_dot_loops(function: kir.Function, infos: dict, num_warps: int,
                       num_stages: int, wgmma: bool = False) -> int:
    """Rewrites every qualifying loop; returns how many were rewritten. ``wgmma``: the
    target has it (``layouts.choose_mma`` decides which dots use it)."""
    if num_stages < 2:
        return 0
    users = users_of(function.body)
    count = 0
    for block, loop in upward_for_loops(function):
        if _rewrite(block, loop, infos, users, num_warps, num_stages, wgmma, count):
            count += 1
    return count


def _is_zero(value) -> bool:
    owner = value.owner
    while owner is not None and owner.opcode in ("splat", "broadcast"):
        owner = owner.operands[0].owner
    return owner is not None and owner.opcode == "constant" and owner.attrs["value"] == 0


def _copyable(load, infos) -> bool:
    """cp.async can copy it: no other value than 0 (masked-off elements are zero-filled),
    not volatile, vectors of at least 4 bytes."""
    if load.attrs.get("volatile"):
        return False
    if load.attrs.get("has_other") and not _is_zero(load.operands[-1]):
        return False
    return memory_vector_width(load, infos) * load.result.element.itemsize >= 4


def _rewrite(parent: list, loop, infos, users, num_warps: int, num_stages: int,
             wgmma: bool, number: int) -> bool:
    region = loop.regions[0]
    ops = region.body
    terminator = region.terminator
    shape = dot_operand_loads(loop)
    if shape is None:
        return False
    layout = choose_mma(shape[0], num_warps, wgmma)
    if layout is None:
        return False
    dot, loads, load_ops = shape
    async_proxy = layout.instruction == "wgmma"
    # wgmma runs asynchronously across trips, keeping the accumulator in fp32 registers.
    in_flight = async_proxy and dot.result.element.is_fp32()
    if not all(_copyable(load, infos) for load in loads):
        return False
    induction, carried = region.args[0], region.args[1:]
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
        return False
    for o in list(load_slice.values()) + list(update_slice.values()):
        for value in o.operands:
            if value in carried and value not in shifted_args:
                return False
    allowed_users = set(load_slice) | set(update_slice) | {id(l) for l in loads}
    for index in shifted:
        if any(id(user) not in allowed_users and user is not terminator
               for user in users.get(carried[index], [])):
            return False
        if users.get(loop.results[index]):
            return False

    stages = num_stages
    per_stage = sum(staged_tile_bytes(l.result.type.shape, l.result.element, async_proxy)
                    for l in loads)
    while stages > 2 and stages * per_stage > MAX_PIPELINE_BYTES:
        stages -= 1
    if stages * per_stage > MAX_PIPELINE_BYTES:
        return False

    update_ops = [o for o in ops if id(o) in update_slice]
    start, end, step = loop.operands[:3]
    index_type = induction.type
    buffers = [(number, operand) for operand in range(2)]
    position = parent.index(loop)

    def copies(mapping, trip, stage_value, first=False) -> list:
        """Ops that copy the operand tiles of the trip whose induction value is ``trip``
        (masked off when it is past the end) into ``stage_value``, then commit."""
        emitted = []
        in_range = new_op("cmp", [trip, end], BlockType(T.int1), predicate="lt")
        emitted.append(in_range)
        cloned = clone_ops(load_ops, mapping, in_range.result)
        for load in loads:
            copied = cloned[[o.result for o in cloned].index(mapping[load.result])]
            cloned.remove(copied)
            has_mask = copied.attrs.get("has_mask", False)
            operands = copied.operands[:2 if has_mask else 1] + [stage_value]
            emitted_copy = new_op("async_copy", operands, None, has_mask=has_mask,
                                  buffer=buffers[loads.index(load)], stages=stages,
                                  async_proxy=async_proxy, first=first and load is loads[0])
            emitted_copy.loc = load.loc
            cloned.append(emitted_copy)
        return emitted + cloned + [new_op("async_commit", [], None)]

    # Prologue: trips 0 .. S-2 into stages 0 .. S-2, advancing the shifted values.
    prologue = []
    state = {carried[i]: loop.operands[3 + i] for i in shifted}
    trip = start
    for s in range(stages - 1):
        if s:
            offset = constant(s, index_type.element)
            scaled = new_op("mul", [step, offset.result], index_type)
            advanced = new_op("add", [start, scaled.result], index_type)
            prologue += [offset, scaled, advanced]
            trip = advanced.result
        stage_constant = constant(s, T.int32)
        prologue.append(stage_constant)
        mapping = dict(state)
        mapping[induction] = trip
        prologue += copies(mapping, trip, stage_constant.result, first=(s == 0))
        mapping = dict(state)
        mapping[induction] = trip
        prologue += clone_ops(update_ops, mapping)
        state = {carried[i]: mapping.get(terminator.operands[i], terminator.operands[i])
                 for i in shifted}
    parent[position:position] = prologue
    for i in shifted:
        loop.operands[3 + i] = state[carried[i]]

    # Body: wait, copy trip i+S-1, advance, read this trip's stage, the rest of the body.
    stage = kir.Value(BlockType(T.int32), hint_name="stage")
    region.args.append(stage)
    waits = [new_op("async_wait", [], None, pending=stages - 2, proxy_fence=async_proxy)]
    body = []
    ahead_offset = constant(stages - 1, index_type.element)
    ahead_scaled = new_op("mul", [step, ahead_offset.result], index_type)
    ahead = new_op("add", [induction, ahead_scaled.result], index_type)
    ahead.result.hint_name = "trip_ahead"
    body += [ahead_offset, ahead_scaled, ahead]
    wrap = [constant(stages - 1, T.int32), constant(stages, T.int32), constant(1, T.int32)]
    behind = new_op("add", [stage, wrap[0].result], BlockType(T.int32))
    past = new_op("cmp", [behind.result, wrap[1].result], BlockType(T.int1), predicate="ge")
    wrapped = new_op("sub", [behind.result, wrap[1].result], BlockType(T.int32))
    write_stage = new_op("select", [past.result, wrapped.result, behind.result],
                         BlockType(T.int32))
    body += wrap + [behind, past, wrapped, write_stage]
    mapping = {induction: ahead.result}
    body += copies(mapping, ahead.result, write_stage.result)
    mapping = {induction: ahead.result}
    body += clone_ops(update_ops, mapping)
    reads = []
    for load, buffer in zip(loads, buffers):
        read = new_op("shared_read", [stage], load.result.type, buffer=buffer, stages=stages,
                      async_proxy=async_proxy)
        read.result.hint_name = load.result.hint_name
        reads.append(read)
    dot.operands[0], dot.operands[1] = reads[0].result, reads[1].result
    next_stage = new_op("add", [stage, wrap[2].result], BlockType(T.int32))
    next_past = new_op("cmp", [next_stage.result, wrap[1].result], BlockType(T.int1),
                       predicate="ge")
    zero = constant(0, T.int32)
    stage_after = new_op("select", [next_past.result, zero.result, next_stage.result],
                         BlockType(T.int32))
    remaining = [o for o in ops if o is not terminator and o not in loads]
    if in_flight:
        # The dot leaves its wgmma group running and waits for the previous trip's, whose
        # stage the copies then refill.
        dot.attrs["wgmma_in_flight"] = 1
        loop.attrs["wgmma_in_flight"] = 1
    # The copies go after the dot: their target stage was last read in the previous trip,
    # and the wait's barrier ordered those reads first. Shared-memory reads cannot move
    # above a cp.async (ptxas cannot tell the addresses apart), so copies placed first
    # would keep the tensor cores idle while every thread issues them.
    region.body[:] = waits + reads + remaining + body
    region.body += [next_stage, next_past, zero, stage_after, terminator]
    for i in shifted:
        terminator.operands[i] = mapping.get(terminator.operands[i], terminator.operands[i])
    terminator.operands.append(stage_after.result)
    initial_stage = constant(0, T.int32)
    parent.insert(parent.index(loop), initial_stage)
    loop.operands.append(initial_stage.result)
    result = kir.Value(BlockType(T.int32))
    result.owner = loop
    loop.results.append(result)
    loop.attrs["pipeline"] = number
    remove_unused_pure_ops(region.body)
    parent.insert(parent.index(loop) + 1, new_op("async_wait", [], None, pending=0))
    return True
