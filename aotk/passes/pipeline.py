"""Software pipelining of loops that feed ``tl.dot``: the operand tiles of later trips are
copied global -> shared with ``cp.async`` while the tensor cores work on the current one.

In: a kir ``Function`` that the pass may edit (the compiler hands it a copy), its axis info,
``num_warps`` and ``num_stages`` (S). Out: the same function where each qualifying ``for``
loop is rewritten over S shared-memory stages per distinct operand load:

    before:  for i (c):   a = load(pa(i, c)); b = load(pb(i, c)); acc = dot(a, b, acc)
                          (any number of dots, over any number of loads)
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

A loop qualifies when its step is positive and its body holds dots that tensor cores
compute, all with the same instruction (``mma_layout.choose_mma``), no nested loops and no
side effects other than stores and atomics (in the body or in its ``if``s), each through
an address traced to a kernel argument (``pipeline_shape._written_roots``). Two kinds of
loads of the body are copied ahead (loads of an argument the loop writes stay where they
are: as in Triton, two pointer arguments are taken not to overlap):

* a dot's operand tiles that nothing else reads (``rewrite.dot_operand_loads``): a load
  may feed several dots, and reach one through permutes and reshapes that only add or drop
  size-1 dims. Each distinct load gets one buffer of S stages holding its tile without the
  size-1 dims (``async_copy`` attribute ``tile_dims``); a dot reads it through
  ``shared_read``, as loaded or ``transposed``: a B staged [N, K] (K-major, which ldmatrix
  and wgmma read directly), a 16-bit A staged [K, M] (M-major: ``ldmatrix.trans``, wgmma's
  imm-trans-a). A 16-bit tile read down its columns (fla's k^T, contiguous along M) is
  copied down them into that transpose (``tile_dims`` reversed, ``vector_dim``: the
  copies' vectors run along the loaded tile's first dim).
* every other load of the body that cp.async can copy (``LoopShape.staged``): gates,
  scales, tiles that reach a dot through elementwise ops or that other ops read too
  (fla's chunked recurrences scale k and v by gates before their dots). Each gets S
  stages of a plain tile (``backend.plain_tile``, its dims ordered by the vectors its
  load reads, ``order``) and is read back into registers where it was: the load stays,
  with ``staged`` (its buffer) and this trip's stage as its last operand; its pointers
  are still there for the layout pass (the vectors it proves) and not read.

The loads take no ``other`` or a zero one (cp.async zero-fills masked-off elements) and
vectors of at least 4 bytes proven by axis info (cp.async copies 4, 8 or 16 bytes). The
loads' addresses and masks must be pure functions of the induction variable, values from
outside the loop and
carried values ``c`` that nothing else reads (their next values computed from themselves
alone): those are the values the rewrite shifts S-1 trips ahead. A shifted pointer block
that advances by a loop-invariant scalar is carried as that scalar's sum instead, added to
its initial value (``pipeline_carried.carry_offsets``). One that is read after
the loop as well (liger's int8 x int2 matmul: the A pointer the next outer trip goes on
from) gets an unshifted copy carried beside it, advanced by the same ops. The stages must fit in
the budget of shared memory the compiler gives (the whole block,
``compiler.whole_block_budget``, or where the loop body then lacks room for its own shared
memory, ``compiler.pipeline_budget``: ``MAX_PIPELINE_BYTES`` at most, or what the body
leaves); S shrinks (down to 2), then plain tiles are dropped, until they do. A stage's
bytes count its alignment and, for TMA, its mbarrier.

Stages hold each tile in the swizzled layout of ``backend.swizzle``, which both ``ldmatrix``
(mma.sync) and ``wgmma`` read. fp32 (tf32) dots run on wgmma only when their B is staged
transposed (``mma_layout.wgmma_fits`` with ``k_major``), else on mma.sync; int8 ones when
their B is staged transposed or not staged (the threads then store it K-major). wgmma reads
the stages through the async proxy (attribute ``async_proxy`` of the copies and reads):
then each ``async_wait`` carries ``proxy_fence``, ordering the copies before the dot, and
stages start on 1024-byte swizzle atoms.

TMA (``tma_loads``): when all the operands are tensor-descriptor loads that TMA can copy
(``tensor_maps.tensor_map_recipe``) on an sm_90 target (the dots on wgmma or, with fewer
than 64 rows, on mma.sync reading the stages by ldmatrix, as Triton does), the copies are
one elected thread's ``tma_expect`` + ``tma_copy`` per trip into the same stages, completing on
mbarriers: per stage, one per group of tiles (``pipeline_shape.barrier_groups``: a dot's
tiles no earlier dot reads). ``async_wait`` becomes group 0's ``tma_wait``, on a carried
phase bit that flips each time the stages wrap (every group's mbarriers complete once a
trip, so one bit serves all), and each later group's ``tma_wait`` goes just before its dot,
which then starts as soon as its own tiles have landed (liger's SwiGLU MLP: x and W_gate
for the first dot, W_up for the second, as Triton waits). The loop is bracketed by
``tma_init`` / ``tma_release``.
Copies past the end are not issued at all (so nothing is in flight after the loop). The
copies still follow the dot, whose wait for the previous wgmma group and barrier free the
stage they refill (without wgmma in flight, a ``debug_barrier`` does that).

The copies come after the dot because ptxas never moves a shared-memory read above a
``cp.async`` (it cannot prove their addresses apart): copies first would hold every warp's
``ldmatrix`` and so the tensor cores until all of them were issued. After the dot, ptxas
interleaves their address math with the last ``mma.sync`` instructions.

With wgmma and fp32 accumulators that only their dot reads and only the yield takes
(``pipeline_shape``), the dots do not wait for their own tensor-core work: one dot per trip
has ``wgmma_in_flight`` = 1, waiting until only this trip's group is left, then a barrier
before the copies refill the stages the previous trip's group read; with n dots, none waits
on its own (``wgmma_deferred``) and one ``wgmma_wait`` (pending n) after the last, then a
``debug_barrier``, do the same for all (Triton's order: the tensor cores take each group as
soon as it is issued). ``wgmma_in_flight`` on the loop drains them after it. So the tensor
cores run trip i while the threads issue the copies and reach trip i+1's barrier.

Otherwise a wgmma dot whose fp32 result only the yield takes may still leave its group in
flight (``pipeline_shape``: flash attention's p @ v, whose accumulator is the carried one
rescaled first) when every use of that carried value in the next trip comes after an
earlier dot of the body that waits (q @ k.T). That dot's wait then retires both: it
becomes a ``wgmma_wait`` (pending 0) right after it, over its result and the deferred
dots' carried values, which the body then reads from the wait; both dots carry
``wgmma_deferred`` (no wait of their own). The tensor cores go from one trip's p @ v to
the next trip's q @ k.T without waiting for the threads. As each warp waits only for its
own groups, a barrier (``debug_barrier``) before the copies orders every warp's wait
before the refill of the stages the previous trip's p @ v read.
"""
from __future__ import annotations

from ..ir import kir
from ..ir import types as T
from ..ir.types import BlockType
from . import axis_info, multicast as pairs, warp_specialize as producer
from .pipeline_carried import carry_offsets, keep_unshifted
from .pipeline_shape import MAX_PIPELINE_BYTES, analyze_loop
from .pipeline_waits import retire_deferred, wait_after_the_last_dot
from .rewrite import (clone_ops, constant, new_op, remove_unused_pure_ops,
                      upward_for_loops, users_of)
from .tensor_maps import column_aligned, tensor_map_index


def pipeline_dot_loops(function: kir.Function, infos: dict, num_warps: int,
                       num_stages: int, wgmma: bool = False,
                       budget: int = MAX_PIPELINE_BYTES, multicast: bool = False) -> int:
    """Rewrites every qualifying loop; returns how many were rewritten. ``wgmma``: the
    target has it (``mma_layout.choose_mma`` decides which dots use it); ``budget``: the
    bytes of shared memory the stages may take on the target; ``multicast``: the producer
    warps of a pair of programs share their tiles (``num_ctas=2``). A loop of the kernel's
    top-level body written ``tl.range(..., warp_specialize=True)`` gets a producer warp."""
    if num_stages < 2:
        return 0
    users = users_of(function.body)
    count = 0
    for block, loop in upward_for_loops(function):
        if _rewrite(function, block, loop, infos, users, num_warps, num_stages, wgmma, count,
                    budget, loop.attrs.get("warp_specialize", False)
                    and block is function.body, multicast):
            count += 1
    return count


def _block_slice(values) -> list:
    """The pure ops computing the block values among ``values`` from scalars (and blocks
    that are not pure ops' results), in an order that defines each before its use."""
    ordered, seen = [], set()

    def visit(value):
        owner = value.owner
        if owner is None or id(owner) in seen or not value.type.shape or \
                owner.opcode not in kir.PURE_OPS or owner.regions:
            return
        seen.add(id(owner))
        for operand in owner.operands:
            visit(operand)
        ordered.append(owner)
    for value in values:
        visit(value)
    return ordered


def tma_loads(function: kir.Function, num_warps: int, num_stages: int, wgmma: bool,
              budget: int = MAX_PIPELINE_BYTES, infos: dict | None = None) -> set:
    """ids of the ``descriptor_load``s that ``pipeline_dot_loops`` will copy with TMA;
    every other descriptor op goes to the pointer fallback first (``passes.descriptors``).
    A loop's loads are copied with TMA only where each one's first column is proven to
    start on 16 bytes (``tensor_maps.column_aligned``; the hardware faults otherwise), from
    ``infos`` (the function's axis info, computed here where not given)."""
    if not wgmma or num_stages < 2:
        return set()
    users = users_of(function.body)
    found = set()
    for _, loop in upward_for_loops(function):
        shape = analyze_loop(function, loop, None, users, num_warps, num_stages, wgmma, budget)
        if shape is None or not shape.recipes:
            continue
        infos = infos or axis_info.analyze(function)
        if all(column_aligned(load, infos) for load in shape.loads):
            found |= {id(load) for load in shape.loads}
    return found


def _rewrite(function, parent: list, loop, infos, users, num_warps: int, num_stages: int,
             wgmma: bool, number: int, budget: int = MAX_PIPELINE_BYTES,
             warp_specialize: bool = False, multicast: bool = False) -> bool:
    why: list = []
    shape = analyze_loop(function, loop, infos, users, num_warps, num_stages, wgmma, budget,
                         why)
    if shape is None:
        # Dumped with the loop (the gir listing): which condition kept it as it was.
        if why:
            loop.attrs["not_pipelined"] = why[0]
        return False
    region = loop.regions[0]
    ops = region.body
    terminator = region.terminator
    induction, carried = region.args[0], region.args[1:]
    dots, loads, load_ops = shape.dots, shape.loads, shape.load_ops
    async_proxy, in_flight, stages = shape.async_proxy, shape.in_flight, shape.stages
    shifted, update_slice = shape.shifted, shape.update_slice
    tma = shape.recipes is not None
    if tma:
        maps = [tensor_map_index(function, recipe) for recipe in shape.recipes]
        groups = shape.groups
        group_count = max(groups) + 1
        # The loads of each group, in body order (every trip's copies follow it).
        group_members = [[index for index, g in enumerate(groups) if g == group]
                         for group in range(group_count)]
    # A producer warp copies the tiles (``passes.warp_specialize``).
    specialized = warp_specialize and tma and in_flight and not shape.deferred and \
        not shifted and producer.qualifies(loop, loads)
    # Its copies shared with the other CTA of a pair (``passes.multicast``).
    pair = pairs.pair_ops(pairs.pair_sources(loop, loads), number, stages, group_count) \
        if specialized and multicast else None

    carry_offsets(parent, loop, shape, users)
    update_ops = [o for o in ops if id(o) in update_slice]
    for index in shape.kept or []:
        keep_unshifted(function, loop, index, update_ops)
    carried = region.args[1:]
    start, end, step = loop.operands[:3]
    index_type = induction.type
    buffers = [(number, index) for index in range(len(loads))]
    position = parent.index(loop)

    staged = shape.staged or []
    invariants = shape.invariants or []
    invariant_buffers = [(number, len(loads) + i) for i in range(len(invariants))]
    staged_buffers = [(number, len(loads) + len(invariants) + i) for i in range(len(staged))]

    def copies(mapping, trip, stage_value, first=False) -> list:
        """Ops that copy the operand tiles (and plain tiles) of the trip whose induction
        value is ``trip`` (masked off when it is past the end) into ``stage_value``, then
        commit."""
        emitted = []
        in_range = new_op("cmp", [trip, end], BlockType(T.int1), predicate="lt")
        emitted.append(in_range)
        if tma:
            return emitted + tma_copies(mapping, in_range.result, stage_value)
        cloned = clone_ops(load_ops, mapping, in_range.result)
        for load in loads + staged:
            copied = cloned[[o.result for o in cloned].index(mapping[load.result])]
            cloned.remove(copied)
            has_mask = copied.attrs.get("has_mask", False)
            operands = copied.operands[:2 if has_mask else 1] + [stage_value]
            plain = load in staged
            attrs = {"has_mask": has_mask,
                     "buffer": staged_buffers[staged.index(load)] if plain else
                     buffers[loads.index(load)],
                     "stages": stages, "async_proxy": async_proxy and not plain,
                     "first": first and load is (loads + staged)[0]}
            dims = [dim for dim, size in enumerate(copied.result.type.shape) if size != 1]
            if plain:
                order = shape.orders[staged.index(load)]
                attrs.update(order=order, vector_dim=order[0] if order else None)
            elif loads.index(load) in (shape.columns or []):
                # Copied down its columns: the stage holds its transpose.
                attrs.update(tile_dims=dims[::-1], vector_dim=dims[0])
            elif copied.result.type.rank != 2:
                # A tile loaded with size-1 dims: the dims of size > 1 are the stage's.
                attrs["tile_dims"] = dims
            emitted_copy = new_op("async_copy", operands, None, **attrs)
            emitted_copy.loc = load.loc
            cloned.append(emitted_copy)
        return emitted + cloned + [new_op("async_commit", [], None)]

    def tma_copies(mapping, in_range, stage_value) -> list:
        """Per group of tiles, in order, one elected thread arms the group's mbarrier of the
        stage with the bytes of its tiles and issues their TMA copies (nothing when the
        trip is past the end)."""
        emitted = clone_ops([o for o in load_ops if o not in loads], mapping)
        for group, members in enumerate(group_members):
            tile_bytes = sum(loads[i].result.type.numel * loads[i].result.element.itemsize
                             for i in members)
            emitted.append(new_op("tma_expect", [stage_value, in_range], None, loop=number,
                                  stages=stages, group=group, bytes=tile_bytes))
            for index in members:
                load = loads[index]
                offsets = [mapping.get(v, v) for v in kir.descriptor_operands(load)[3]]
                copy = new_op("tma_copy", offsets + [stage_value, in_range], None,
                              loop=number, buffer=buffers[index], stages=stages, group=group,
                              tensor_map=maps[index], box=shape.recipes[index].box)
                copy.loc = load.loc
                emitted.append(copy)
        return emitted

    def invariant_copies() -> list:
        """The loop-invariant operands, each copied once into its one slot (in trip 0's
        group: the first trip's wait covers them). Their block addresses and masks are
        recomputed here from scalars: otherwise a thread would hold them in registers from
        the load's place to this loop (across an earlier loop reading the same q)."""
        emitted = []
        slot = constant(0, T.int32)
        emitted.append(slot)
        for (_, _, load), buffer in zip(invariants, invariant_buffers):
            has_mask = load.attrs.get("has_mask", False)
            mapping = {}
            emitted += clone_ops(_block_slice(load.operands[:2 if has_mask else 1]), mapping)
            operands = [mapping.get(v, v) for v in load.operands[:2 if has_mask else 1]]
            copy = new_op("async_copy", operands + [slot.result],
                          None, has_mask=has_mask, buffer=buffer, stages=1,
                          async_proxy=async_proxy, first=False)
            copy.loc = load.loc
            emitted.append(copy)
        return emitted

    # Prologue: trips 0 .. S-2 into stages 0 .. S-2, advancing the shifted values.
    prologue = [new_op("tma_init", [], None, loop=number, stages=stages,
                       groups=group_count, consumers=num_warps if specialized else None,
                       pair=pair is not None)] if tma else []
    if pair is not None:
        prologue.append(pair)
    if specialized:
        def trip_copies(_, trip, stage_value):
            emitted = copies({induction: trip}, trip, stage_value)
            for op in emitted:
                if op.opcode in ("tma_expect", "tma_copy"):
                    op.attrs["elected"] = num_warps * 32   # the producer warp's first lane
                if op.opcode == "tma_copy" and pair is not None and \
                        pair.attrs["members"][op.attrs["buffer"][1]] is not None:
                    op.operands.append(pair.result)
                    op.attrs["pair_bit"] = op.attrs["buffer"][1]
            return emitted
        prologue += producer.producer_ops(trip_copies, start, end, step, index_type, number,
                                          stages, group_count, num_warps, pair)
    state = {carried[i]: loop.operands[3 + i] for i in shifted}
    trip = start
    for s in range(0 if specialized else stages - 1):
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
        trip_copies = copies(mapping, trip, stage_constant.result, first=(s == 0))
        if s == 0 and invariants:
            trip_copies[-1:-1] = invariant_copies()   # before trip 0's commit
        prologue += trip_copies
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
    if tma:
        # The parity of the stage's mbarrier phase this trip waits for: it flips each time
        # the stages wrap around.
        phase = kir.Value(BlockType(T.int32), hint_name="phase")
        region.args.append(phase)
        # Group 0's tiles before anything; each later group's just before its first dot.
        waits = [new_op("tma_wait", [stage, phase], None, loop=number, stages=stages,
                        group=0)]
    else:
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
    if not specialized:
        body += copies(mapping, ahead.result, write_stage.result)
        mapping = {induction: ahead.result}
        body += clone_ops(update_ops, mapping)
    else:
        body = list(wrap)   # the stage's wrap-around below takes these constants
    reads = {}   # (load index, transposed) -> the shared_read of that view of its stage
    for dot, operands in zip(dots, shape.operands):
        for position, operand in enumerate(operands):
            if operand is None:   # not a load of the body: the dot stores it itself
                continue
            index, transposed = operand
            if (index, transposed) not in reads:
                view = {"transposed": True} if transposed else {}
                read = new_op("shared_read", [stage], dot.operands[position].type,
                              buffer=buffers[index], stages=stages,
                              async_proxy=async_proxy, **view)
                read.result.hint_name = loads[index].result.hint_name
                reads[index, transposed] = read
            dot.operands[position] = reads[index, transposed].result
    reads = list(reads.values())
    if invariants:
        slot = constant(0, T.int32)
        reads.insert(0, slot)
        for (index, position, load), buffer in zip(invariants, invariant_buffers):
            read = new_op("shared_read", [slot.result], load.result.type, buffer=buffer,
                          stages=1, async_proxy=async_proxy)
            read.result.hint_name = load.result.hint_name
            reads.append(read)
            dots[index].operands[position] = read.result
    for load, buffer, order in zip(staged, staged_buffers, shape.orders):
        # Read back where it was loaded, from this trip's stage (zero where masked off).
        has_mask = load.attrs.get("has_mask", False)
        load.operands = load.operands[:2 if has_mask else 1] + [stage]
        load.attrs.pop("has_other", None)
        load.attrs.update(staged=buffer, stages=stages, order=order)
        if async_proxy:
            load.attrs["async_proxy"] = True   # the loop's dots read through it
    next_stage = new_op("add", [stage, wrap[2].result], BlockType(T.int32))
    next_past = new_op("cmp", [next_stage.result, wrap[1].result], BlockType(T.int1),
                       predicate="ge")
    zero = constant(0, T.int32)
    stage_after = new_op("select", [next_past.result, zero.result, next_stage.result],
                         BlockType(T.int32))
    replaced = {id(o) for o in loads + shape.view_ops}
    remaining = [o for o in ops if o is not terminator and id(o) not in replaced]
    if in_flight and len(dots) == 1:
        # The dot leaves its wgmma group running and waits for the previous trip's, whose
        # stages the copies then refill; after its wait, a barrier (with a producer warp:
        # each warp tells it instead, ``tma_consumed``).
        dots[0].attrs["wgmma_in_flight"] = 1
        loop.attrs["wgmma_in_flight"] = 1
        if specialized:
            dots[0].attrs["warp_specialized"] = True
            place = next(i for i, o in enumerate(remaining) if o is dots[0]) + 1
            remaining[place:place] = producer.consumed_op(stage, induction, start, number,
                                                          stages, group_count)
    elif in_flight:
        # Several dots: none waits on its own (a wgmma chained on an accumulator still being
        # written needs no wait); one wait after the last, until this trip's groups alone
        # are left, retires the previous trip's, then a barrier before the copies refill
        # their stages. Triton's order: the tensor cores take the second dot's group while
        # the first one's is running, where a wait after the first held it back.
        wait_after_the_last_dot(remaining, dots, terminator, producer.consumed_op(
            stage, induction, start, number, stages, group_count) if specialized else None)
        loop.attrs["wgmma_in_flight"] = 1
    # The copies go after the dot: their target stage was last read in the previous trip,
    # and the wait's barrier ordered those reads first. Shared-memory reads cannot move
    # above a cp.async (ptxas cannot tell the addresses apart), so copies placed first
    # would keep the tensor cores idle while every thread issues them.
    if (tma or shape.deferred) and not in_flight:
        # Without wgmma left in flight the dot has no barrier of its own, and the wait for
        # the mbarrier is none: every warp must be done reading the stage the copies refill.
        # With deferred dots each warp has retired the previous trip's groups, reading
        # the stages refilled now, only for itself.
        body.insert(0, new_op("debug_barrier", [], None))
    if tma:
        # Each later group's wait, right before the first dot that reads its tiles.
        for group in range(1, group_count):
            first = next(dot for dot, operands in zip(dots, shape.operands)
                         if any(entry is not None and groups[entry[0]] == group
                                for entry in operands))
            place = next(i for i, o in enumerate(remaining) if o is first)
            remaining.insert(place, new_op("tma_wait", [stage, phase], None, loop=number,
                                           stages=stages, group=group))
    region.body[:] = waits + reads + remaining + body
    if shape.deferred:
        retire_deferred(region, shape)
        loop.attrs["wgmma_in_flight"] = 1
    region.body += [next_stage, next_past, zero, stage_after]
    carried_out = [stage_after]
    if tma:
        flip = constant(1, T.int32)
        flipped = new_op("xor", [phase, flip.result], BlockType(T.int32))
        phase_after = new_op("select", [next_past.result, flipped.result, phase],
                             BlockType(T.int32))
        region.body += [flip, flipped, phase_after]
        carried_out.append(phase_after)
    region.body.append(terminator)
    for i in shifted:
        terminator.operands[i] = mapping.get(terminator.operands[i], terminator.operands[i])
    for value_op in carried_out:
        terminator.operands.append(value_op.result)
        initial = constant(0, T.int32)
        parent.insert(parent.index(loop), initial)
        loop.operands.append(initial.result)
        result = kir.Value(BlockType(T.int32))
        result.owner = loop
        loop.results.append(result)
    loop.attrs["pipeline"] = number
    remove_unused_pure_ops(region.body)
    # Nothing may land in shared memory after the loop: every copy issued was waited for
    # (TMA copies past the end are never issued), so TMA only retires its mbarriers.
    after = new_op("tma_release", [], None, loop=number, stages=stages,
                   groups=group_count, consumers=num_warps if specialized else None,
                   pair=tma and pair is not None) \
        if tma else new_op("async_wait", [], None, pending=0)
    parent.insert(parent.index(loop) + 1, after)
    return True
