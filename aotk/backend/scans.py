"""Lowering of ``scan`` (inclusive cumsum / cumprod along an axis, forward or reverse).

In: the operand's registers in its natural blocked layout. Out: the result's registers in
the same layout. Along the axis an element's index is ``r * tile + warp * T * P + lane * P + s``
(repeat r, warp and lane coordinates along the axis, P contiguous elements per thread), so:

1. each thread scans its P contiguous elements of each repeat (a chunk) in registers;
2. chunk totals scan across the T lanes along the axis with ``shfl.sync.up`` (Hillis-Steele;
   ``down`` when reversed), and each lane takes the exclusive prefix from its neighbour;
3. when the axis spans several segments (repeats x warps), the last lane of each segment
   writes the segment total to shared memory; after one barrier every thread combines the
   totals of the segments before its own;
4. element = segment prefix (+) lane prefix (+) its in-chunk inclusive value.
Lanes and warps that only replicate elements (the block is smaller than the layout's tile)
sit after the real ones along the axis, so they never feed a real element's prefix.
"""
from __future__ import annotations

import llvmlite.ir as ir

from ..passes.layouts import Layout
from .llvm_types import I32, llvm_type
from .reduce import shuffle
from .views import logical_indices


def _geometry(blocked, size: int, axis: int):
    """(P, T, W, R): elements per chunk, lanes, warps and repeats that hold real elements."""
    per_thread = min(blocked.size_per_thread[axis], size)
    lanes = min(blocked.threads_per_warp[axis], max(1, size // per_thread))
    warps = min(blocked.warps_per_cta[axis], max(1, size // (per_thread * lanes)))
    repeats = max(1, size // blocked.tile(axis))
    return per_thread, lanes, warps, repeats


def shared_bytes_needed(op, blocked) -> int:
    x = op.operands[0]
    axis = op.attrs["axis"]
    size = x.type.shape[axis]
    _, _, warps, repeats = _geometry(blocked, size, axis)
    if warps * repeats == 1:
        return 0
    rows = x.type.numel // size
    return rows * warps * repeats * max(4, x.element.itemsize)


def _combine(b, element, combine, x, y):
    if combine == "add":
        return b.fadd(x, y) if element.is_floating() else b.add(x, y)
    return b.fmul(x, y) if element.is_floating() else b.mul(x, y)


def _identity(element, combine):
    one = 0 if combine == "add" else 1
    return ir.Constant(llvm_type(element), float(one) if element.is_floating() else one)


def lower_scan(lowering, op) -> list:
    b = lowering.builder
    x = op.operands[0]
    axis, combine, reverse = op.attrs["axis"], op.attrs["combine"], op.attrs["reverse"]
    element = x.element
    shape = x.type.shape
    layout = Layout(lowering.plan.blocked_by_rank[len(shape)])
    blocked = layout.blocked
    per_thread, lanes, warps, repeats = _geometry(blocked, shape[axis], axis)
    dist = lowering.distribution(layout, shape)
    registers = list(lowering.regs(x, layout))
    slots = dist.slots()
    identity = _identity(element, combine)
    merge = lambda p, q: _combine(b, element, combine, p, q)   # noqa: E731
    c = lambda v: ir.Constant(I32, v)   # noqa: E731

    # 1. chunks: the registers of one row and one repeat, in order along the axis.
    chunks: dict = {}
    for index, slot in enumerate(slots):
        key = slot[:axis] + (slot[axis] // per_thread,) + slot[axis + 1:]
        chunks.setdefault(key, []).append(index)
    inclusive = list(registers)
    totals = {}
    for key, members in chunks.items():
        order = members[::-1] if reverse else members
        running = None
        for index in order:
            running = registers[index] if running is None else merge(running, registers[index])
            inclusive[index] = running
        totals[key] = running

    # 2. across lanes along the axis.
    lane_stride, warp_stride = blocked.strides(axis)
    lane_coord = b.urem(b.udiv(lowering.lane, c(lane_stride)), c(blocked.threads_per_warp[axis]))
    mode = "down" if reverse else "up"
    lane_prefix, segment_total = {}, {}
    for key, total in totals.items():
        running = total
        distance = 1
        while distance < lanes:
            other = shuffle(lowering, running, c(distance * lane_stride), mode)
            valid = b.icmp_unsigned("<", lane_coord, c(lanes - distance)) if reverse else \
                b.icmp_unsigned(">=", lane_coord, c(distance))
            running = b.select(valid, merge(other, running), running)
            distance *= 2
        before = shuffle(lowering, running, c(lane_stride), mode) if lanes > 1 else identity
        first = b.icmp_unsigned("==", lane_coord, c(lanes - 1 if reverse else 0))
        lane_prefix[key] = b.select(first, identity, before) if lanes > 1 else identity
        segment_total[key] = running

    # 3. across segments (repeats x warps) through shared memory.
    segments = warps * repeats
    segment_prefix = {key: identity for key in totals}
    if segments > 1:
        warp_coord = b.urem(b.udiv(lowering.warp, c(warp_stride)), c(blocked.warps_per_cta[axis]))
        indices = logical_indices(lowering, x, layout)
        other_dims = [d for d in range(len(shape)) if d != axis]
        memory_type = llvm_type(element)
        size = max(4, element.itemsize)

        def address(index, segment):
            row = c(0)
            for d in other_dims:
                row = b.add(b.mul(row, c(shape[d])), index[d])
            slot = b.add(b.mul(row, c(segments)), segment)
            return lowering.shared_pointer(b.mul(slot, c(size)), memory_type)

        lowering.begin_shared_use()
        last_lane = b.icmp_unsigned("==", lane_coord, c(0 if reverse else lanes - 1))
        real_warp = b.icmp_unsigned("<", warp_coord, c(warps))
        writer = b.and_(last_lane, real_warp)
        keys = list(totals)
        for key in keys:
            index = indices[chunks[key][0]]
            repeat = slots[chunks[key][0]][axis] // per_thread
            segment = b.add(c(repeat * warps), warp_coord)
            with b.if_then(writer):
                b.store(segment_total[key], address(index, segment))
        lowering.barrier()
        for key in keys:
            index = indices[chunks[key][0]]
            repeat = slots[chunks[key][0]][axis] // per_thread
            mine = b.add(c(repeat * warps), warp_coord)
            running = identity
            for k in range(segments):
                total = b.load(address(index, c(k)), typ=memory_type)
                earlier = b.icmp_unsigned(">", c(k), mine) if reverse else \
                    b.icmp_unsigned("<", c(k), mine)
                running = b.select(earlier, merge(running, total), running)
            segment_prefix[key] = running

    # 4. combine the three levels.
    out = list(inclusive)
    for key, members in chunks.items():
        prefix = merge(segment_prefix[key], lane_prefix[key])
        for index in members:
            out[index] = merge(prefix, inclusive[index])
    return out
