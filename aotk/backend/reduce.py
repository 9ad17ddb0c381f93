"""Lowering of ``reduce`` / ``argreduce``: in-thread, then across lanes, then across warps.

In: the operand's registers in its blocked layout, or in the accumulator fragments of the
dot it came from (``Mma``, whose lanes split rows 8 ways and columns 4 ways: the same steps
with its strides). Out: the result's registers in the slice of that layout along the
reduced axis (what ``expand_dims`` of the result needs, so
broadcasting a row maximum back costs nothing). Steps:

1. each thread combines its own registers along the axis, as a balanced tree in register
   order;
2. ``shfl.sync.bfly`` butterflies across the lanes that split the axis, farthest lanes
   first (no shared memory, no barrier);
3. when warps split the axis too, each warp's partials go through shared memory: every
   lane along the axis holds the same value after step 2, so all write it (no predicate),
   one barrier; where all lanes of a warp need the same results, lane l loads warp
   (l mod W)'s partial (stored entry-major) and a butterfly of shuffles combines the W of
   them, else each thread loads the W partials it needs (stored warp-major, so lanes
   touch consecutive words) and combines them in that butterfly's order.
Triton 3.8 combines in these orders too (its PTX for the same reductions), so float sums
round as Triton's do.
A sum that picks one element (``tl.sum(tl.where(tl.arange(0, n) == i, x, 0), axis)``, how
Triton code reads row i of a tile: fla's triangular solves) is lowered as that pick
(``one_hot_pick``, ``_lower_pick``): the lane that holds row i sends it with one
``shfl.sync.idx``, where the butterfly takes log2(lanes) dependent shuffles and adds per
register; where warps split the axis, each warp writes what it received and every thread
reads the owner warp's (one barrier, no combining).
A combine is a named one (add max min xor or), argreduce's (value, index) rule, or a combine
region on tuples of registers (``tl.reduce``; see ``combine``). Steps 2 and 3 only span the
lanes and warps that hold distinct elements: when the layout's tile is larger than the
axis, replica groups reduce the same elements on their own, so nothing counts twice.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import llvmlite.ir as ir

from ..ir import types as T
from ..passes.layouts import SCALAR, Blocked, Layout
from ..passes.mma_layout import Mma
from .combine import axis_coordinates, axis_geometry, combiner, scratch_bytes
from .llvm_types import I32, llvm_type
from .registry import lowering, scratch
from .sink_to_use import computed_with_special_functions
from .warp_shuffle import shuffle

def _identity(element, combine):
    ty = llvm_type(element)
    if combine in ("add", "xor", "or"):
        return ir.Constant(ty, 0.0 if element.is_floating() else 0)
    if element.is_floating():
        return ir.Constant(ty, -math.inf if combine == "max" else math.inf)
    if element.is_bool():
        return ir.Constant(ty, 0 if combine == "max" else 1)
    bits = element.bits
    if element.is_int_signed():
        return ir.Constant(ty, -(1 << (bits - 1)) if combine == "max" else (1 << (bits - 1)) - 1)
    return ir.Constant(ty, 0 if combine == "max" else (1 << bits) - 1)


def _arg_combine(ctx, element, combine, first, second):
    """(value, index) pairs; NaN counts as the worst value; ties keep the smaller index."""
    bld = ctx.builder
    (v1, i1), (v2, i2) = first, second
    if element.is_floating():
        worst = _identity(element, combine)
        v1 = bld.select(bld.fcmp_unordered("uno", v1, v1), worst, v1)
        v2 = bld.select(bld.fcmp_unordered("uno", v2, v2), worst, v2)
        better = bld.fcmp_ordered(">" if combine == "max" else "<", v2, v1)
        equal = bld.fcmp_ordered("==", v2, v1)
    else:
        compare = bld.icmp_signed if element.is_int_signed() else bld.icmp_unsigned
        better = compare(">" if combine == "max" else "<", v2, v1)
        equal = bld.icmp_unsigned("==", v2, v1)
    take = bld.or_(better, bld.and_(equal, bld.icmp_signed("<", i2, i1)))
    return bld.select(take, v2, v1), bld.select(take, i2, i1)


def pairwise(items: list, merge, depth_first: bool = True):
    """The items combined as a balanced tree in their order: neighbours first, then
    neighbouring pairs, and so on (as Triton combines a thread's elements). Depth log2(n)
    instead of n - 1, and the operands of each combine stay in order.

    ``depth_first``: the combines are emitted a subtree as soon as its items are there,
    else level by level; the same results either way, but not the same schedule from ptxas.
    After the loads of a row, a maximum emitted depth first starts before the last loads
    are issued (liger's grpo loss, one warp a row: 7 % slower than level by level); a sum
    of exponentials emitted level by level had ptxas issue the row's loads as four, then
    one per group of ex2's (liger's vocab-parallel cross entropy: 0.88x Triton, 1.02x depth
    first; 0.86x against 1.01x with the exponentials sunk). A sum of plain products is the
    other way round: liger's weighted cross entropy with label smoothing (1,024 threads, 64
    registers a thread whatever the order) took 497 us with its smoothing sum depth first
    and its products sunk, 437 us level by level, Triton 430 (H200). The difference is in
    the row's second loop (the gradients), whose code is the same either way: ptxas
    allocates the whole kernel differently (level by level it spills 56 bytes, as Triton's
    does) and the kernel reads 2.4 TB/s instead of 2.1 (ncu)."""
    if not depth_first:
        while len(items) > 1:
            paired = [merge(items[i], items[i + 1]) for i in range(0, len(items) - 1, 2)]
            items = paired + items[len(items) - len(items) % 2:]
        return items[0]
    tree = list(range(len(items)))
    while len(tree) > 1:
        paired = [(tree[i], tree[i + 1]) for i in range(0, len(tree) - 1, 2)]
        tree = paired + tree[len(tree) - len(tree) % 2:]

    def emit(node):
        if isinstance(node, int):
            return items[node]
        left = emit(node[0])
        return merge(left, emit(node[1]))
    return emit(tree[0])


def shuffle_butterfly(ctx, items: list, lanes: int, lane_stride: int, merge) -> list:
    """Each of ``items`` (tuples of registers) combined across ``lanes`` lanes ``lane_stride``
    apart by ``shfl.sync.bfly``, the farthest lanes first (Triton's order); afterwards every
    one of those lanes holds the combination. Step by step over all the items at once."""
    step = lanes // 2
    while step >= 1:
        distance = ir.Constant(I32, lane_stride * step)
        items = [merge(item, tuple(shuffle(ctx, value, distance, "bfly") for value in item))
                 for item in items]
        step //= 2
    return items


def butterfly_order(items: list, merge):
    """The items combined in the order a butterfly over them combines them, half the
    distance each step (``W/2 .. 1``): what lane 0 of a shuffle butterfly computes when
    lane ``w`` starts with ``items[w]``. ``len(items)`` is a power of two."""
    items = list(items)
    half = len(items) // 2
    while half >= 1:
        items = [merge(items[i], items[i + half]) for i in range(half)]
        half //= 2
    return items[0]


def _component_elements(op) -> list:
    """Element type of each register of an item: one per operand (argreduce: value, index)."""
    if op.opcode == "argreduce":
        return [op.operands[0].element, T.int32]
    return [v.element for v in op.operands]


def _source_layout(plan, op):
    """The parent layout a reduction works in: its operand's natural blocked layout, or the
    accumulator fragments it was left in (``passes.mma_residency``: its result's
    home is then a slice of an ``Mma``)."""
    home = plan.homes.get(op.results[0])
    if isinstance(home, Layout) and isinstance(home.blocked, Mma):
        return home.blocked
    return plan.natural(op.operands[0]).blocked


@scratch("reduce", "argreduce")
def reduce_scratch_bytes(plan, op) -> int:
    """Scratch bytes a reduction needs for its cross-warp step (0 when one warp spans it)."""
    blocked = _source_layout(plan, op)
    axis = op.attrs["axis"]
    _, _, warps, _ = axis_geometry(blocked, op.operands[0].type.shape[axis], axis)
    if warps == 1:
        return 0
    per_entry = sum(scratch_bytes(e) for e in _component_elements(op))
    return op.results[0].type.numel * warps * per_entry


@lowering("reduce", "argreduce")
def lower_reduce(ctx, op) -> list:
    """Registers of each result in the slice of the operands' layout along the axis (their
    natural blocked layout, or the accumulator fragments: ``_source_layout``)."""
    operand = op.operands[0]
    axis = op.attrs["axis"]
    shape = operand.type.shape
    blocked = _source_layout(ctx.plan, op)
    source = ctx.threads.distribution(Layout(blocked), shape)
    pick = one_hot_pick(op)
    if pick is not None and _pick_fits(ctx, pick, blocked, shape, axis):
        return _lower_pick(ctx, op, pick, blocked, source)
    columns = [ctx.regs(v, Layout(blocked)) for v in op.operands]
    if op.opcode == "argreduce":
        element, combine = operand.element, op.attrs["combine"]
        indices = source.axis_indices(axis)
        items = [(value, indices[slot[axis]]) for value, slot in zip(columns[0], source.slots())]

        def merge(first, second):
            return _arg_combine(ctx, element, combine, first, second)
    else:
        items = list(zip(*columns))
        merge = combiner(ctx, op)
    _, lanes, warps, _ = axis_geometry(blocked, shape[axis], axis)

    # 1. In-thread: one accumulator per result slot (the slot with the axis component 0),
    # a balanced tree over the thread's elements in register order.
    groups = {}
    for item, slot in zip(items, source.slots()):
        groups.setdefault(slot[:axis] + (0,) + slot[axis + 1:], []).append(item)
    # The same tree either way; ptxas schedules a maximum or minimum best level by level,
    # a sum of plain arithmetic too, other combines depth first (see pairwise). The tree
    # stays where it is emitted; what a depth-first one combines is computed just before
    # the combine that takes it (backend.sink_to_use), a level-order one's stays.
    depth_first = op.attrs.get("combine") not in ("max", "min") and (
        op.attrs.get("combine") != "add" or computed_with_special_functions(
            [value for item in items for value in (item if isinstance(item, tuple)
                                                   else (item,))], ctx.builder.block))
    accumulators = {key: ctx.emitted_in_order(lambda group=group: pairwise(
                        group, merge, depth_first), sink_inputs=depth_first)
                    for key, group in groups.items()}

    # 2. Across lanes: butterfly over the lanes that hold distinct elements of the axis,
    # the farthest lanes first.
    lane_stride, _ = blocked.strides(axis)
    accumulators = dict(zip(accumulators, shuffle_butterfly(
        ctx, list(accumulators.values()), lanes, lane_stride, merge)))

    result_layout = Layout(blocked, (axis,))
    target = ctx.threads.distribution(result_layout, op.results[0].type.shape)
    ordered = [accumulators[slot] for slot in target.slots()]
    if warps > 1:
        ordered = _across_warps(ctx, op, ordered, target, result_layout, warps, merge)
    if op.opcode == "argreduce":
        return [[item[1] for item in ordered]]
    return [[item[c] for item in ordered] for c in range(len(op.results))]


def _across_warps(ctx, op, ordered, target, result_layout, warps, merge) -> list:
    """3. Each warp's partials through shared memory: every lane along the axis holds the
    same values after step 2, so all write them (no predicate); replica warps write what
    their owner writes. One barrier, then the partials are combined by a butterfly over
    the warps, of shuffles where the lanes of a warp share their entries."""
    bld = ctx.builder
    blocked = result_layout.blocked
    axis = op.attrs["axis"]
    _, warp_coord = axis_coordinates(ctx, blocked, axis, 1, warps)
    shape = op.results[0].type.shape
    entries = _result_entries(ctx, op, target, result_layout)
    elements = _component_elements(op)
    numel = op.results[0].type.numel
    # Where every lane of a warp needs the same entries, lane l reads warp (l mod W)'s
    # partial of one entry: entry-major (an entry's W partials side by side) keeps those
    # reads on W banks. Otherwise the lanes hold different entries: warp-major (a warp's
    # partials in entry order) keeps both the writes and the reads of a warp on
    # consecutive words, and a thread's adjacent entries in one vector; entry-major put
    # those lanes W words apart (W-way bank conflicts on every write).
    lanes_share = _lanes_share_entries(blocked, axis, shape, result_layout) and warps <= 32
    bases, offset = [], 0
    for element in elements:
        bases.append(offset)
        offset += numel * warps * scratch_bytes(element)
    types = [llvm_type(e) for e in elements]

    def pointer(position, component):
        byte = bld.add(ir.Constant(I32, bases[component]),
                       bld.mul(position, ir.Constant(I32, scratch_bytes(elements[component]))))
        return ctx.shared.pointer(byte, types[component])

    def position(entry, warp):
        if lanes_share:
            return bld.add(bld.mul(entry, ir.Constant(I32, warps)), warp)
        return bld.add(bld.mul(warp, ir.Constant(I32, numel)), entry)

    ctx.shared.begin_use()
    for entry, item in zip(entries, ordered):
        for component, value in enumerate(item):
            bld.store(value, pointer(position(entry, warp_coord), component))
    ctx.shared.barrier()
    combined = []
    if lanes_share:
        # Every lane needs the same entries: lane l reads warp (l mod W)'s partial and a
        # butterfly over W lanes combines them (one load and log2(W) shuffles, not W loads
        # and W - 1 combines per thread).
        lane_warp = bld.urem(ctx.threads.lane, ir.Constant(I32, warps))
        for entry in entries:
            item = tuple(bld.load(pointer(position(entry, lane_warp), c), typ=types[c])
                         for c in range(len(types)))
            combined += shuffle_butterfly(ctx, [item], warps, 1, merge)
        return combined
    for entry in entries:
        partials = []
        for w in range(warps):
            partials.append(tuple(bld.load(pointer(position(entry, ir.Constant(I32, w)), c),
                                           typ=types[c]) for c in range(len(types))))
        combined.append(butterfly_order(partials, merge))
    return combined


def _result_entries(ctx, op, target, result_layout) -> list:
    """The row-major index in the result of each of this thread's result registers."""
    bld = ctx.builder
    shape = op.results[0].type.shape
    slot_axes = [target.axis_indices(a) for a in range(len(target.embedded))]
    entries = []
    for slot in target.slots():
        linear = ir.Constant(I32, 0)
        for dim in range(len(shape)):
            parent = result_layout.parent_axis(dim)
            stride = math.prod(shape[dim + 1:])
            linear = bld.add(linear, bld.mul(slot_axes[parent][slot[parent]],
                                             ir.Constant(I32, stride)))
        entries.append(linear)
    return entries


def _lanes_share_entries(blocked, axis: int, shape: tuple, result_layout) -> bool:
    """Whether all lanes of a warp hold the same result entries: no lanes split an axis of
    the result (the reduced axis aside, whose lanes all hold the reduced value)."""
    for dim in range(len(shape)):
        parent = result_layout.parent_axis(dim)
        if parent != axis and shape[dim] > 1 and blocked.threads_per_warp[parent] > 1:
            return False
    return True


# -- a sum that picks one element along the axis ---------------------------------------------

@dataclass(frozen=True)
class OneHotPick:
    """``reduce(add, select(arange(start, start + n) == index, x, 0), axis)``: the element of
    ``x`` at ``index - start`` along the axis (0 where that is outside [0, n))."""
    x: object        # the kir value picked from
    index: object    # the kir scalar compared with the arange
    start: int       # the arange's first value


def _zero(value) -> bool:
    """A constant 0 (+0.0 for floats; -0.0 would make the sum differ from the pick), or a
    splat of one."""
    owner = value.owner
    if owner is not None and owner.opcode == "splat":
        owner = owner.operands[0].owner
    if owner is None or owner.opcode != "constant":
        return False
    zero = owner.attrs.get("value")
    return isinstance(zero, (int, float)) and not isinstance(zero, bool) and zero == 0 \
        and math.copysign(1.0, zero) > 0


def _arange_along(value, length: int):
    """The arange (through widening integer casts) ``value`` is, or None."""
    while value.owner is not None and value.owner.opcode == "cast":
        source = value.owner.operands[0]
        if not (source.element.is_int() and value.element.is_int()
                and value.element.bits >= max(32, source.element.bits)):
            return None
        value = source
    owner = value.owner
    if owner is None or owner.opcode != "arange" \
            or owner.attrs["end"] - owner.attrs["start"] != length:
        return None
    return owner


def _through_views(value, axis: int):
    """(value, axis) below the ``broadcast`` and ``expand_dims`` ops that made ``value``,
    ``axis`` followed down to that value's dimensions; None where one adds the axis."""
    while value.owner is not None and value.owner.opcode in ("broadcast", "expand_dims"):
        if value.owner.opcode == "expand_dims":
            added = value.owner.attrs["axis"]
            if added == axis:
                return None
            axis -= added < axis
        value = value.owner.operands[0]
    return value, axis


def one_hot_pick(op) -> OneHotPick | None:
    """The pick a ``reduce`` op is (see ``OneHotPick``), or None. The mask may be compared
    at any rank, and reach the select through ``expand_dims`` and ``broadcast``."""
    if op.opcode != "reduce" or op.attrs.get("combine") != "add" or len(op.operands) != 1:
        return None
    selected = op.operands[0].owner
    if selected is None or selected.opcode != "select" or not _zero(selected.operands[2]):
        return None
    length = selected.operands[1].type.shape[op.attrs["axis"]]
    found = _through_views(selected.operands[0], op.attrs["axis"])
    compare = found and found[0].owner
    if compare is None or compare.opcode != "cmp" or compare.attrs.get("predicate") != "eq":
        return None
    for ramp, other in (compare.operands, compare.operands[::-1]):
        ramp = _through_views(ramp, found[1])
        if ramp is None or len(ramp[0].type.shape) != 1 or ramp[1] != 0:
            continue
        arange = _arange_along(ramp[0], length)
        if arange is not None and other.owner is not None and other.owner.opcode == "splat":
            return OneHotPick(selected.operands[1], other.owner.operands[0],
                              arange.attrs["start"])
    return None


def _pick_fits(ctx, pick, blocked, shape, axis) -> bool:
    """A blocked layout (its warps may split the axis, or repeat it) or fragments that one
    warp spans without repeats, and x's registers are there."""
    _, _, warps, _ = axis_geometry(blocked, shape[axis], axis)
    layout = Layout(blocked)
    available = ctx.plan.homes.get(pick.x) == layout or layout in ctx.plan.demands.get(pick.x, ())
    fragments_fit = warps == 1 and blocked.tile(axis) <= shape[axis]
    return (isinstance(blocked, Blocked) or fragments_fit) and available


def _lower_pick(ctx, op, pick, blocked, source) -> list:
    """Lane (k / step) mod L along the axis holds element k (step: the lane's stride in
    elements, L: lanes along the axis) at the register whose offset is k - that lane's
    base, the same offset in every lane (where lanes repeat the axis, each group of L
    lanes reads from its own). Each lane sends its register at that offset, each
    receives from the lane at its own other coordinates and the owner's axis position.
    A float result gets + 0.0: the sum turns a picked -0.0 into +0.0, and so does this."""
    bld = ctx.builder
    axis = op.attrs["axis"]
    size = op.operands[0].type.shape[axis]
    element = pick.x.element
    ty = llvm_type(element)
    zero = ir.Constant(ty, 0.0 if element.is_floating() else 0)
    (index,) = ctx.regs(pick.index, SCALAR)
    wide = ir.IntType(64)
    if index.type.width < 64:
        signed = pick.index.element.is_int_signed()
        index = bld.sext(index, wide) if signed else bld.zext(index, wide)
    k = bld.sub(index, ir.Constant(wide, pick.start)) if pick.start else index
    inside = bld.icmp_unsigned("<", k, ir.Constant(wide, size))
    k = bld.trunc(k, I32)   # outside [0, size): any lane, and the result is 0
    _, lanes, warps, _ = axis_geometry(blocked, size, axis)
    step = blocked.lane_step(axis)
    lane_stride, _ = blocked.strides(axis)
    owner_position = bld.urem(bld.udiv(k, ir.Constant(I32, step)), ir.Constant(I32, lanes))
    offset = bld.sub(k, bld.mul(owner_position, ir.Constant(I32, step)))
    owner_warp = None
    if warps > 1:   # warp w (along the axis) holds elements w * step * lanes on, a run each
        run = step * lanes
        owner_warp = bld.urem(bld.udiv(k, ir.Constant(I32, run)), ir.Constant(I32, warps))
        offset = bld.sub(offset, bld.mul(owner_warp, ir.Constant(I32, run)))
    my_position, my_warp = axis_coordinates(ctx, blocked, axis, lanes, warps)
    owner_lane = bld.add(ctx.threads.lane, bld.mul(bld.sub(owner_position, my_position),
                                                   ir.Constant(I32, lane_stride)))
    offsets = source.slot_offsets[axis]
    registers = ctx.regs(pick.x, Layout(blocked))
    groups = {}
    for register, slot in zip(registers, source.slots()):
        groups.setdefault(slot[:axis] + (0,) + slot[axis + 1:], []).append(
            (offsets[slot[axis]], register))
    def finished(value):   # 0 outside the block; a float + 0.0
        value = bld.select(inside, value, zero)
        return bld.fadd(value, zero) if element.is_floating() else value

    received = {}
    for key, held in groups.items():
        sent = zero
        for constant, register in held:
            at = bld.icmp_unsigned("==", offset, ir.Constant(I32, constant))
            sent = bld.select(at, register, sent)
        value = shuffle(ctx, sent, owner_lane, "idx")
        received[key] = value if owner_warp is not None else finished(value)
    result_layout = Layout(blocked, (axis,))
    target = ctx.threads.distribution(result_layout, op.results[0].type.shape)
    values = [received[slot] for slot in target.slots()]
    if owner_warp is None:
        return [values]
    values = _from_owner_warp(ctx, op, values, target, result_layout, warps, my_warp,
                              owner_warp, ty)
    return [[finished(value) for value in values]]


def _from_owner_warp(ctx, op, values, target, result_layout, warps, my_warp, owner_warp, ty):
    """Where warps split the axis, each warp received its own warp's element: each writes
    what it received (warp-major, as ``_across_warps``), one barrier, and every thread reads
    the owner warp's."""
    bld = ctx.builder
    numel = op.results[0].type.numel
    size = scratch_bytes(op.operands[0].element)
    entries = _result_entries(ctx, op, target, result_layout)

    def pointer(warp, entry):
        position = bld.add(bld.mul(warp, ir.Constant(I32, numel)), entry)
        return ctx.shared.pointer(bld.mul(position, ir.Constant(I32, size)), ty)

    ctx.shared.begin_use()
    for entry, value in zip(entries, values):
        bld.store(value, pointer(my_warp, entry))
    ctx.shared.barrier()
    return [bld.load(pointer(owner_warp, entry), typ=ty) for entry in entries]
