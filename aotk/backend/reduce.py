"""Lowering of ``reduce`` / ``argreduce``: in-thread, then across lanes, then across warps.

In: the operand's registers in its blocked layout. Out: the result's registers in the
slice of that layout along the reduced axis (what ``expand_dims`` of the result needs, so
broadcasting a row maximum back costs nothing). Steps:

1. each thread combines its own registers along the axis;
2. ``shfl.sync.bfly`` butterflies across the lanes that split the axis (no shared memory,
   no barrier);
3. when warps split the axis too, each warp's partials go through shared memory: every
   lane along the axis holds the same value after step 2, so all write it (no predicate),
   one barrier, then each thread combines the partials it needs.
Threads that only replicate elements (the layout wraps) contribute the identity, so nothing
is counted twice.
"""
from __future__ import annotations

import math

import llvmlite.ir as ir

from ..passes.layouts import Layout
from .llvm_types import I32, llvm_type

FULL_MASK = 0xFFFFFFFF


def _identity(element, combine):
    ty = llvm_type(element)
    if combine in ("add", "xor"):
        return ir.Constant(ty, 0.0 if element.is_floating() else 0)
    if element.is_floating():
        return ir.Constant(ty, -math.inf if combine == "max" else math.inf)
    if element.is_bool():
        return ir.Constant(ty, 0 if combine == "max" else 1)
    bits = element.bits
    if element.is_int_signed():
        return ir.Constant(ty, -(1 << (bits - 1)) if combine == "max" else (1 << (bits - 1)) - 1)
    return ir.Constant(ty, 0 if combine == "max" else (1 << bits) - 1)


def _combine(lowering, element, combine, a, b):
    bld = lowering.builder
    if combine == "add":
        return bld.fadd(a, b) if element.is_floating() else bld.add(a, b)
    if combine == "xor":
        return bld.xor(a, b)
    if element.is_floating():
        name = f"llvm.{'maxnum' if combine == 'max' else 'minnum'}.{a.type.intrinsic_name}"
        fn = lowering.module.globals.get(name) or ir.Function(
            lowering.module, ir.FunctionType(a.type, [a.type, a.type]), name=name)
        return bld.call(fn, [a, b])
    compare = bld.icmp_signed if element.is_int_signed() else bld.icmp_unsigned
    return bld.select(compare(">" if combine == "max" else "<", a, b), a, b)


def _arg_combine(lowering, element, combine, first, second):
    """(value, index) pairs; NaN counts as the worst value; ties keep the smaller index."""
    bld = lowering.builder
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


def _shuffle_xor(lowering, value, lane_mask: int):
    return shuffle(lowering, value, ir.Constant(I32, lane_mask), "bfly")


def shuffle(lowering, value, lane_argument, mode: str):
    """``shfl.sync.<mode>`` (bfly, up, down) of any scalar type, in 32-bit pieces."""
    bld = lowering.builder
    fn_name = f"llvm.nvvm.shfl.sync.{mode}.i32"
    clamp = 0 if mode == "up" else 0x1F
    fn = lowering.module.globals.get(fn_name) or ir.Function(
        lowering.module, ir.FunctionType(I32, [I32, I32, I32, I32]), name=fn_name)
    width = value.type.width if isinstance(value.type, ir.IntType) else \
        {"half": 16, "bfloat": 16, "float": 32, "double": 64}[str(value.type)]
    as_int = value if isinstance(value.type, ir.IntType) else bld.bitcast(value, ir.IntType(width))
    pieces = []
    for start in range(0, max(width, 32), 32):
        piece = bld.lshr(as_int, ir.Constant(as_int.type, start)) if start else as_int
        piece = bld.trunc(piece, I32) if width > 32 else (bld.zext(piece, I32) if width < 32 else piece)
        pieces.append(bld.call(fn, [ir.Constant(I32, FULL_MASK), piece, lane_argument,
                                    ir.Constant(I32, clamp)]))
    if width < 32:
        result = bld.trunc(pieces[0], ir.IntType(width))
    elif width == 32:
        result = pieces[0]
    else:
        wide = ir.IntType(width)
        result = bld.or_(bld.zext(pieces[0], wide),
                         bld.shl(bld.zext(pieces[1], wide), ir.Constant(wide, 32)))
    return result if isinstance(value.type, ir.IntType) else bld.bitcast(result, value.type)


def shared_bytes_needed(op, blocked) -> int:
    """Scratch bytes a reduction needs for its cross-warp step (0 when one warp spans it)."""
    axis = op.attrs["axis"]
    warps = blocked.warps_per_cta[axis]
    if warps == 1:
        return 0
    element = op.operands[0].element
    per_entry = max(4, element.itemsize) + (4 if op.opcode == "argreduce" else 0)
    return op.result.type.numel * warps * per_entry


def lower_reduce(lowering, op, operand_layout: Layout):
    """Registers of the result in ``Layout(blocked, (axis,))``."""
    bld = lowering.builder
    operand = op.operands[0]
    axis, combine = op.attrs["axis"], op.attrs["combine"]
    element = operand.element
    with_index = op.opcode == "argreduce"
    blocked = operand_layout.blocked
    source = lowering.distribution(operand_layout, operand.type.shape)
    values = lowering.regs(operand, operand_layout)
    indices = source.axis_indices(axis) if with_index else None
    identity = _identity(element, combine)
    worst_index = ir.Constant(I32, 0x7FFFFFFF)

    def merge(a, b):
        if with_index:
            return _arg_combine(lowering, element, combine, a, b)
        return _combine(lowering, element, combine, a, b)

    # 1. In-thread: one accumulator per result slot (the slot with the axis component 0).
    accumulators = {}
    for register, slot in zip(values, source.slots()):
        key = slot[:axis] + (0,) + slot[axis + 1:]
        item = (register, indices[slot[axis]]) if with_index else register
        accumulators[key] = item if key not in accumulators else merge(accumulators[key], item)
    size = source.embedded[axis]
    if blocked.tile(axis) > size:   # replicas along the axis must not count twice
        owns = bld.icmp_unsigned("<", lowering.thread_base(blocked, axis), ir.Constant(I32, size))
        for key, item in accumulators.items():
            if with_index:
                accumulators[key] = (bld.select(owns, item[0], identity),
                                     bld.select(owns, item[1], worst_index))
            else:
                accumulators[key] = bld.select(owns, item, identity)

    # 2. Across lanes: butterfly over the lanes that split the axis.
    lane_stride = 1
    for dim in blocked.order:
        if dim == axis:
            break
        lane_stride *= blocked.threads_per_warp[dim]
    step = 1
    while step < blocked.threads_per_warp[axis]:
        for key, item in accumulators.items():
            if with_index:
                other = (_shuffle_xor(lowering, item[0], lane_stride * step),
                         _shuffle_xor(lowering, item[1], lane_stride * step))
            else:
                other = _shuffle_xor(lowering, item, lane_stride * step)
            accumulators[key] = merge(item, other)
        step *= 2

    result_layout = Layout(blocked, tuple(sorted(operand_layout.sliced + (axis,))))
    target = lowering.distribution(result_layout, op.result.type.shape)
    ordered = [accumulators[slot] for slot in target.slots()]

    # 3. Across warps, through shared memory.
    warps = blocked.warps_per_cta[axis]
    if warps > 1:
        _, warp_stride = blocked.strides(axis)
        warp_coord = bld.urem(bld.udiv(lowering.warp, ir.Constant(I32, warp_stride)),
                              ir.Constant(I32, warps))
        value_type = llvm_type(element)
        slot_axes = [target.axis_indices(a) for a in range(len(target.embedded))]
        shape = op.result.type.shape
        value_bytes = max(4, element.itemsize)
        index_base = op.result.type.numel * warps * value_bytes
        entries = []
        for slot in target.slots():
            linear = ir.Constant(I32, 0)
            for dim in range(len(shape)):
                parent = result_layout.parent_axis(dim)
                stride = math.prod(shape[dim + 1:])
                linear = bld.add(linear, bld.mul(slot_axes[parent][slot[parent]], ir.Constant(I32, stride)))
            entries.append(bld.mul(linear, ir.Constant(I32, warps)))
        lowering.begin_shared_use()
        for entry, item in zip(entries, ordered):
            position = bld.add(entry, warp_coord)
            value, index = item if with_index else (item, None)
            bld.store(value, lowering.shared_pointer(bld.mul(position, ir.Constant(I32, value_bytes)),
                                                     value_type))
            if with_index:
                bld.store(index, lowering.shared_pointer(
                    bld.add(ir.Constant(I32, index_base), bld.mul(position, ir.Constant(I32, 4))), I32))
        lowering.barrier()
        combined = []
        for entry in entries:
            item = None
            for w in range(warps):
                position = bld.add(entry, ir.Constant(I32, w))
                value = bld.load(lowering.shared_pointer(
                    bld.mul(position, ir.Constant(I32, value_bytes)), value_type), typ=value_type)
                if with_index:
                    index = bld.load(lowering.shared_pointer(
                        bld.add(ir.Constant(I32, index_base), bld.mul(position, ir.Constant(I32, 4))),
                        I32), typ=I32)
                    value = (value, index)
                item = value if item is None else merge(item, value)
            combined.append(item)
        ordered = combined
    return [item[1] if with_index else item for item in ordered], result_layout
