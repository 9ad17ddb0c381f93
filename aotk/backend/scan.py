"""Lowering of ``scan``: an inclusive scan along one axis, forward or reverse.

In: the operands' registers in their natural blocked layout (one operand for cumsum /
cumprod, N for an ``associative_scan`` of a tuple). Out: each result's registers in that
same layout, its home. Along the axis an element's index is
``r * tile + warp * L * P + lane * P + s`` (repeat r, warp and lane coordinates along the
axis, P contiguous elements per thread), so:

1. each thread scans its P contiguous elements of each repeat (a chunk) in registers;
2. chunk totals scan across the L lanes along the axis with ``shfl.sync.up`` (Hillis-Steele;
   ``down`` when reversed), and each lane takes the exclusive prefix from its neighbour;
3. when the axis spans several segments (repeats x warps), the last lane of each segment
   writes the segment total to shared memory (segment-major: [segment][row]); after one
   barrier each thread combines, per row, the totals of the repeats before its own (a
   running carry) and of the warps before its own in its repeat;
4. element = segment prefix (+) lane prefix (+) its in-chunk inclusive value (with one
   element per chunk, step 2's lane-inclusive value already is lane prefix (+) element).
A reverse scan is the scan of the reversed axis: chunk, lane, warp and repeat orders flip.
The combine may be any associative function (see ``combine``): there is no identity, so a
prefix that may be empty (the first lane, the first warp) carries an i1 saying whether it
exists, and is skipped by a select. Lanes and warps that only replicate elements (the block
is smaller than the layout's tile) scan their own group (``axis_geometry``), so replicas hold
the owner's values and nothing is counted twice.
"""
from __future__ import annotations

import llvmlite.ir as ir

from .combine import axis_coordinates, axis_geometry, combiner, scratch_bytes, select_tuple
from .llvm_types import I32, llvm_type
from .warp_shuffle import shuffle
from .registry import lowering, scratch


@scratch("scan")
def scan_scratch_bytes(plan, op) -> int:
    """Scratch bytes of step 3 (0 when one warp and one repeat span the axis)."""
    x = op.operands[0]
    blocked = plan.natural(x).blocked
    axis = op.attrs["axis"]
    size = x.type.shape[axis]
    _, _, warps, repeats = axis_geometry(blocked, size, axis)
    if warps * repeats == 1:
        return 0
    rows = x.type.numel // size
    return rows * warps * repeats * sum(scratch_bytes(v.element) for v in op.operands)


class _Prefixes:
    """Combining values that may be absent: an optional prefix is None (absent), or
    (values, exists) where ``exists`` is an i1 register, or None when always present."""

    def __init__(self, ctx, merge):
        self.ctx, self.merge = ctx, merge

    def join(self, first, second):
        """first (+) second, where either may be absent."""
        if first is None:
            return second
        if second is None:
            return first
        (values_a, exists_a), (values_b, exists_b) = first, second
        merged = self.merge(values_a, values_b)
        if exists_b is not None:
            merged = select_tuple(self.ctx, exists_b, merged, values_a)
        if exists_a is not None:
            merged = select_tuple(self.ctx, exists_a, merged, values_b)
        exists = None if exists_a is None or exists_b is None else \
            self.ctx.builder.or_(exists_a, exists_b)
        return merged, exists

    def prepend(self, prefix, values: tuple) -> tuple:
        """prefix (+) values, or values alone where the prefix is absent."""
        if prefix is None:
            return values
        prefix_values, exists = prefix
        merged = self.merge(prefix_values, values)
        return merged if exists is None else select_tuple(self.ctx, exists, merged, values)


@lowering("scan")
def lower_scan(ctx, op) -> list:
    """Registers of each result, in the operands' natural layout."""
    b = ctx.builder
    x = op.operands[0]
    axis, reverse = op.attrs["axis"], op.attrs["reverse"]
    shape = x.type.shape
    layout = ctx.plan.natural(x)
    blocked = layout.blocked
    per_thread, lanes, warps, repeats = axis_geometry(blocked, shape[axis], axis)
    slots = ctx.threads.distribution(layout, shape).slots()
    items = list(zip(*[ctx.regs(v, layout) for v in op.operands]))
    merge = combiner(ctx, op)
    prefixes = _Prefixes(ctx, merge)

    def c(value):
        return ir.Constant(I32, value)

    # 1. chunks: the registers of one row and one repeat, in order along the axis.
    chunks: dict = {}
    for index, slot in enumerate(slots):
        key = slot[:axis] + (slot[axis] // per_thread,) + slot[axis + 1:]
        chunks.setdefault(key, []).append(index)
    inclusive = list(items)
    totals = {}
    for key, members in chunks.items():
        running = None
        for index in (members[::-1] if reverse else members):
            running = items[index] if running is None else merge(running, items[index])
            inclusive[index] = running
        totals[key] = running

    # 2. across the lanes along the axis, within each group of `lanes` lanes.
    lane_stride, _ = blocked.strides(axis)
    lane, warp = axis_coordinates(ctx, blocked, axis, lanes, warps)
    mode = "down" if reverse else "up"

    def shuffled(values, distance):
        return tuple(shuffle(ctx, v, c(distance * lane_stride), mode) for v in values)

    lane_prefix, segment_total = {}, {}
    for key, total in totals.items():
        running = total
        distance = 1
        while distance < lanes:
            valid = b.icmp_unsigned("<", lane, c(lanes - distance)) if reverse else \
                b.icmp_unsigned(">=", lane, c(distance))
            running = select_tuple(ctx, valid, merge(shuffled(running, distance), running),
                                   running)
            distance *= 2
        if per_thread == 1:
            # A one-element chunk: its lane-inclusive value is the element's scan within the
            # segment, with no exclusive shuffle and no prefix to keep live across step 3.
            inclusive[chunks[key][0]] = running
            lane_prefix[key] = None
        elif lanes > 1:
            first = c(lanes - 1 if reverse else 0)
            lane_prefix[key] = (shuffled(running, 1), b.icmp_unsigned("!=", lane, first))
        else:
            lane_prefix[key] = None
        segment_total[key] = running

    # 3. across segments (repeats x warps) through shared memory.
    segment_prefix = dict.fromkeys(totals)
    if warps * repeats > 1:
        segment_prefix = _across_segments(ctx, op, layout, chunks, segment_total, lane,
                                          warp, (per_thread, lanes, warps, repeats), prefixes)

    # 4. combine the three levels.
    out = list(inclusive)
    for key, members in chunks.items():
        prefix = prefixes.join(segment_prefix[key], lane_prefix[key])
        for index in members:
            out[index] = prefixes.prepend(prefix, inclusive[index])
    return [[item[component] for item in out] for component in range(len(op.operands))]


def _across_segments(ctx, op, layout, chunks, segment_total, lane, warp, geometry,
                     prefixes) -> dict:
    """Each chunk's segment prefix: the totals of the repeats before it (a carry per row) and
    of the warps before it in its repeat, in scan order."""
    b = ctx.builder
    per_thread, lanes, warps, repeats = geometry
    x = op.operands[0]
    axis, reverse = op.attrs["axis"], op.attrs["reverse"]
    shape = x.type.shape
    segments = warps * repeats
    rows = x.type.numel // shape[axis]
    elements = [v.element for v in op.operands]
    types = [llvm_type(e) for e in elements]
    bases, offset = [], 0
    for element in elements:
        bases.append(offset)
        offset += rows * segments * scratch_bytes(element)
    indices = ctx.threads.logical_indices(x, layout)
    other_dims = [d for d in range(len(shape)) if d != axis]

    def c(value):
        return ir.Constant(I32, value)

    def pointers(index, segment):
        # Segment-major: the lanes that write or read one segment at once hold consecutive
        # rows, so they touch consecutive words (row-major, a row's segments side by side,
        # put lanes a multiple of 32 words apart when the axis is 0: one bank, 16-way
        # conflicts on fla's [64, 64] cumsum, L1-bound at twice Triton's time).
        row = c(0)
        for d in other_dims:
            row = b.add(b.mul(row, c(shape[d])), index[d])
        position = b.add(b.mul(segment, c(rows)), row)
        return [ctx.shared.pointer(b.add(c(base), b.mul(position, c(scratch_bytes(e)))), t)
                for base, e, t in zip(bases, elements, types)]

    def repeat_of(key):
        return key[axis]

    ctx.shared.begin_use()
    # Replica lanes and warps write the values their owner writes, to the same place.
    writer = b.icmp_unsigned("==", lane, c(0 if reverse else lanes - 1))
    for key, members in chunks.items():
        segment = b.add(c(repeat_of(key) * warps), warp)
        with b.if_then(writer):
            for value, pointer in zip(segment_total[key], pointers(indices[members[0]], segment)):
                b.store(value, pointer)
    ctx.shared.barrier()

    # Repeats in scan order outside, then warps, then rows: the rows a thread holds side by
    # side are adjacent words of one segment, and LLVM merges their loads; loading them in
    # the order they are combined keeps those merged loads next to their uses (a row-outer
    # order kept each merged value live across the other rows' whole chains: spills).
    by_repeat: dict = {}
    for key in chunks:
        by_repeat.setdefault(repeat_of(key), []).append(key)
    warp_order = list(range(warps))[::-1] if reverse else list(range(warps))
    carry: dict = {}   # per row: the total of the repeats before, in scan order
    result = {}
    for repeat in sorted(by_repeat, reverse=reverse):
        keys = by_repeat[repeat]
        running, warp_prefix = {}, dict.fromkeys(keys)
        for position, w in enumerate(warp_order):
            # Prefix of the warps before each position in the order; this warp picks its
            # own. Each total is loaded just before it is combined, to keep few values live.
            mine = b.icmp_unsigned("==", warp, c(w)) if position else None
            for key in keys:
                loaded = tuple(b.load(p, typ=t) for p, t in zip(
                    pointers(indices[chunks[key][0]], c(repeat * warps + w)), types))
                if not position:
                    running[key] = loaded
                    continue
                warp_prefix[key] = running[key] if warp_prefix[key] is None else \
                    select_tuple(ctx, mine, running[key], warp_prefix[key])
                running[key] = prefixes.merge(running[key], loaded)
        for key in keys:
            row = key[:axis] + key[axis + 1:]
            prefix = None if warp_prefix[key] is None else \
                (warp_prefix[key], b.icmp_unsigned("!=", warp, c(warp_order[0])))
            result[key] = prefixes.join(carry.get(row), prefix)
            carry[row] = prefixes.join(carry.get(row), (running[key], None))
    return result
