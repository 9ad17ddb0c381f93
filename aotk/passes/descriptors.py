"""Pointer fallback for tensor descriptors: ``descriptor_load`` / ``descriptor_store`` become
masked ``load`` / ``store`` through a block of pointers.

In: a kir ``Function``, edited in place, and the ids of descriptor ops to keep (those the GPU
copies with TMA). Out: every other descriptor op, in every region, replaced where it stood
(same order, same ``loc``) by ops that compute, for each dimension d of a block B_0 x ..,

    idx_d = offset_d + arange(0, B_d)           expanded to rank dims: B_d along d, 1 elsewhere
    mask  = AND over d of (idx_d >= 0) & (idx_d < shape_d)
    ptr   = splat(base) + sum over d of idx_d * stride_d

followed by ``load(ptr, mask, other=0)`` or ``store(ptr, value, mask)``, which is the ops'
definition (zero fill and dropped stores outside the shape). The load takes over the
descriptor load's result value, so its users need no renaming.

Index arithmetic is i64 when any shape, stride or offset is i64, else i32. A stride that is
the constant 1 (the last one always is) is not multiplied by: the last dimension stays
``offset + arange``, which axis info proves contiguous, so the accesses vectorize (and feed
cp.async) like hand-written pointer loads.
"""
from __future__ import annotations

from ..ir import kir
from ..ir import types as T
from ..ir.types import BlockType
from .rewrite import constant, new_op


def lower_descriptors(function: kir.Function, keep=frozenset()) -> int:
    """Rewrites every descriptor op whose ``id()`` is not in ``keep``; returns how many."""
    return _lower_block(function.body, keep)


def _lower_block(block: list, keep) -> int:
    count = 0
    lowered = []
    for op in block:
        for region in op.regions:
            count += _lower_block(region.body, keep)
        if op.opcode in kir.DESCRIPTOR_OPS and id(op) not in keep:
            lowered += _pointer_access(op)
            count += 1
        else:
            lowered.append(op)
    block[:] = lowered
    return count


def _is_constant_one(value: kir.Value) -> bool:
    """A literal 1, or a parameter the signature specialized as 1 (hint :1)."""
    owner = value.owner
    return owner is not None and owner.opcode == "constant" and owner.attrs["value"] == 1


def _pointer_access(op: kir.Op) -> list:
    """The ops that replace descriptor op ``op``, in order."""
    base, shapes, strides, offsets, value = kir.descriptor_operands(op)
    block_shape = tuple(op.attrs["block_shape"])
    rank = len(block_shape)
    index_type = T.int64 if any(v.element.bits == 64 for v in (*shapes, *strides, *offsets)) \
        else T.int32
    ops = []

    def emit(new: kir.Op) -> kir.Value:
        new.loc = op.loc
        ops.append(new)
        return new.result

    def create(opcode, operands, element, shape, **attrs) -> kir.Value:
        return emit(new_op(opcode, operands, BlockType(element, shape), **attrs))

    def as_index(scalar: kir.Value) -> kir.Value:
        if scalar.element == index_type:
            return scalar
        return create("cast", [scalar], index_type, ())

    def splat(scalar: kir.Value, shape) -> kir.Value:
        return create("splat", [scalar], scalar.element, shape)

    def to_block(x: kir.Value) -> kir.Value:
        if x.shape == block_shape:
            return x
        return create("broadcast", [x], x.element, block_shape)

    offset_sum = mask = None
    for dim, size in enumerate(block_shape):
        index = create("arange", [], T.int32, (size,), start=0, end=size)
        if index_type != T.int32:
            index = create("cast", [index], index_type, (size,))
        index = create("add", [splat(as_index(offsets[dim]), (size,)), index], index_type,
                       (size,))
        shape = [size]
        for axis in range(rank):
            if axis != dim:
                shape.insert(axis, 1)
                index = create("expand_dims", [index], index_type, tuple(shape), axis=axis)
        shape = tuple(shape)
        zero = splat(emit(constant(0, index_type)), shape)
        above = create("cmp", [index, zero], T.int1, shape, predicate="ge")
        below = create("cmp", [index, splat(as_index(shapes[dim]), shape)], T.int1, shape,
                       predicate="lt")
        inside = to_block(create("and", [above, below], T.int1, shape))
        mask = inside if mask is None else create("and", [mask, inside], T.int1, block_shape)
        if not _is_constant_one(strides[dim]):
            index = create("mul", [index, splat(as_index(strides[dim]), shape)], index_type,
                           shape)
        term = to_block(index)
        offset_sum = term if offset_sum is None else \
            create("add", [offset_sum, term], index_type, block_shape)
    pointers = create("addptr", [splat(base, block_shape), offset_sum], base.element,
                      block_shape)
    if op.opcode == "descriptor_store":
        emit(new_op("store", [pointers, value, mask], None, cache="", eviction="",
                    has_mask=True))
        return ops
    element = op.result.element
    other = splat(emit(constant(0.0 if element.is_floating() else 0, element)), block_shape)
    load = kir.Op("load", [pointers, mask, other], op.result,
                  dict(cache="", eviction="", volatile=False, has_mask=True, has_other=True),
                  op.loc)
    op.result.owner = load
    ops.append(load)
    return ops
