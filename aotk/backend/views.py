"""Lowering of ``permute``, ``reshape``, ``join`` and ``split``: elements change places
through the shared scratch buffer.

In: the operands' registers in their natural layouts. Out: the result's registers in its
natural layout. Every op is described by a *buffer* (a logical shape in shared memory), how
each operand's element index maps into it, and how each result element index maps into it:

  permute   buffer = operand shape       write x[i] at i        read r at r placed back by order
  reshape   buffer = [numel]             write at row-major i   read at row-major r
  join      buffer = result shape        write a[i] at (i, 0),  b[i] at (i, 1); read r at r
  split     buffer = operand shape       write x[i] at i        read r at (r, index)

Rows of a buffer of rank >= 2 are padded by one 32-bit word: a transpose reads down a
column, and without padding every lane of a warp would hit the same bank. Writers store
unpredicated (replicas write the same value); one barrier separates writes from reads.
"""
from __future__ import annotations

import llvmlite.ir as ir

from ..passes.layouts import SCALAR, Layout
from .llvm_types import I8, I32, llvm_type


def _buffer_shape(op) -> tuple:
    if op.opcode == "reshape":
        return (op.result.type.numel,)
    if op.opcode == "join":
        return op.result.type.shape
    return op.operands[0].type.shape


def row_padding(shape, element) -> int:
    """Elements added to each row so that consecutive rows start in different banks."""
    if len(shape) < 2 or shape[-1] < 2:
        return 0
    return max(1, 4 // max(1, element.itemsize))


def padded_bytes(shape, element) -> int:
    """Bytes of a buffer of ``shape`` with padded rows."""
    rows = 1
    for s in shape[:-1]:
        rows *= s
    pitch = (shape[-1] if shape else 1) + row_padding(shape, element)
    return rows * pitch * max(1, element.itemsize)


def shared_bytes_needed(op) -> int:
    return padded_bytes(_buffer_shape(op), op.result.element)


def logical_indices(lowering, value, layout) -> list:
    """Per register of ``value`` in ``layout``: its element index, one i32 per dimension."""
    if layout is SCALAR or not value.type.shape:
        return [[]]
    dist = lowering.distribution(layout, value.type.shape)
    per_axis = [dist.axis_indices(a) for a in range(len(dist.embedded))]
    dims = range(len(value.type.shape))
    return [[per_axis[layout.parent_axis(d)][slot[layout.parent_axis(d)]] for d in dims]
            for slot in dist.slots()]


def row_major_index(builder, indices, shape, padding=0):
    linear = ir.Constant(I32, 0)
    stride = 1
    for dim in reversed(range(len(shape))):
        term = indices[dim] if stride == 1 else builder.mul(indices[dim], ir.Constant(I32, stride))
        linear = builder.add(linear, term)
        stride *= shape[dim] + (padding if dim == len(shape) - 1 else 0)
    return linear


def _natural(lowering, value):
    shape = value.type.shape
    return Layout(lowering.plan.blocked_by_rank[len(shape)]) if shape else SCALAR


def lower_shuffle(lowering, op) -> list:
    b = lowering.builder
    element = op.result.element
    shape = _buffer_shape(op)
    padding = row_padding(shape, element)
    memory_type = I8 if element.is_bool() else llvm_type(element)
    size = max(1, element.itemsize)

    def address(buffer_index):
        if op.opcode == "reshape":
            buffer_index = [buffer_index]
        linear = row_major_index(b, buffer_index, shape, padding)
        return lowering.shared_pointer(b.mul(linear, ir.Constant(I32, size)), memory_type)

    def to_buffer(operand_position, index):
        if op.opcode == "reshape":
            return row_major_index(b, index, op.operands[0].type.shape)
        if op.opcode == "join":
            return index + [ir.Constant(I32, operand_position)]
        return index

    def from_result(index):
        if op.opcode == "permute":
            placed = [None] * len(index)
            for position, axis in enumerate(op.attrs["order"]):
                placed[axis] = index[position]
            return placed
        if op.opcode == "reshape":
            return row_major_index(b, index, op.result.type.shape)
        if op.opcode == "split":
            return index + [ir.Constant(I32, op.attrs["index"])]
        return index

    lowering.begin_shared_use()
    for position, operand in enumerate(op.operands):
        layout = _natural(lowering, operand)
        registers = lowering.regs(operand, layout)
        for register, index in zip(registers, logical_indices(lowering, operand, layout)):
            stored = b.zext(register, I8) if element.is_bool() else register
            b.store(stored, address(to_buffer(position, index)))
    lowering.barrier()
    out = []
    for index in logical_indices(lowering, op.result, _natural(lowering, op.result)):
        loaded = b.load(address(from_result(index)), typ=memory_type)
        out.append(b.icmp_unsigned("!=", loaded, ir.Constant(I8, 0)) if element.is_bool()
                   else loaded)
    return out
