"""Row-major blocks in shared memory: row padding, element addresses, vector accesses.

In: a block's shape and element type, per-thread element indices (LLVM i32 values) and
registers. Out: the padding that keeps consecutive rows in different banks, the byte
offset of an element (``row_major_index``), and the loads and stores of a run of a
thread's consecutive elements as one access. Every user of the scratch buffer that keeps a
block row-major goes through these (``backend.shared`` for the buffer itself).
"""
from __future__ import annotations

import llvmlite.ir as ir

from .llvm_types import I8, I32, llvm_type


def row_padding(shape, element) -> int:
    """Elements added to each row so that consecutive rows start in different banks."""
    if len(shape) < 2 or shape[-1] < 2:
        return 0
    return max(1, 4 // max(1, element.itemsize))


def padded_bytes(shape, element, padded: bool = True) -> int:
    """Bytes of a buffer of ``shape`` with padded rows (unpadded if not ``padded``)."""
    rows = 1
    for s in shape[:-1]:
        rows *= s
    pitch = (shape[-1] if shape else 1) + (row_padding(shape, element) if padded else 0)
    return rows * pitch * max(1, element.itemsize)


def row_major_index(builder, indices, shape, padding=0, element_bytes=1):
    """The linear index (i32) of an element in a row-major buffer with padded rows, times
    ``element_bytes`` (a byte offset).

    Indices of the form ``thread base + constant`` (what a layout that does not wrap gives)
    are summed as (sum of the bases) + (one constant): every register of a thread then
    shares the variable part, which LLVM computes once, and each address is that plus an
    immediate. Summed term by term instead, NVPTX's straight-line strength reduction sees
    thousands of related candidates in a large block and takes quadratic time."""
    variable, constant, stride = None, 0, element_bytes
    for dim in reversed(range(len(shape))):
        base, offset = _base_and_offset(indices[dim])
        constant += offset * stride
        if base is not None:
            term = base if stride == 1 else builder.mul(base, ir.Constant(I32, stride))
            variable = term if variable is None else builder.add(variable, term)
        stride *= shape[dim] + (padding if dim == len(shape) - 1 else 0)
    if variable is None:
        return ir.Constant(I32, constant)
    return builder.add(variable, ir.Constant(I32, constant)) if constant else variable


def _base_and_offset(index):
    """(variable part or None, constant) of an i32 index."""
    if isinstance(index, ir.Constant):
        return None, int(index.constant)
    if isinstance(index, ir.Instruction) and index.opname == "add" and \
            isinstance(index.operands[1], ir.Constant):
        return index.operands[0], int(index.operands[1].constant)
    return index, 0


class RowMajorBuffer:
    """A block held row-major (unpadded) in the scratch buffer, for ops whose threads read
    elements other threads hold (sort, gather): ``write`` stores a thread's registers
    (replicas store the same value, so they need no care), ``slot`` points at an element,
    ``read`` loads one. Booleans are kept as bytes."""

    def __init__(self, ctx, shape, element):
        self.ctx, self.shape, self.element = ctx, tuple(shape), element
        self.memory_type = I8 if element.is_bool() else llvm_type(element)
        self.element_bytes = max(1, element.itemsize)

    def slot(self, indices):
        b = self.ctx.builder
        offset = row_major_index(b, indices, self.shape, 0, self.element_bytes)
        return self.ctx.shared.pointer(offset, self.memory_type)

    def write(self, value, layout):
        b = self.ctx.builder
        for register, indices in zip(self.ctx.regs(value, layout),
                                     self.ctx.threads.logical_indices(value, layout)):
            b.store(b.zext(register, I8) if self.element.is_bool() else register,
                    self.slot(indices))

    def read(self, indices):
        b = self.ctx.builder
        loaded = b.load(self.slot(indices), typ=self.memory_type)
        return b.icmp_unsigned("!=", loaded, ir.Constant(I8, 0)) if self.element.is_bool() \
            else loaded


def store_vector(builder, registers, address, memory_type, element_bytes):
    """``registers`` (consecutive elements) stored at a shared-memory ``address`` in one
    access."""
    if len(registers) == 1:
        builder.store(registers[0], address)
        return
    vector_type = ir.VectorType(memory_type, len(registers))
    vector = ir.Constant(vector_type, ir.Undefined)
    for lane, register in enumerate(registers):
        vector = builder.insert_element(vector, register, ir.Constant(I32, lane))
    pointer = builder.bitcast(address, vector_type.as_pointer(3))
    builder.store(vector, pointer, align=len(registers) * element_bytes)


def load_vector(builder, address, memory_type, width, element_bytes) -> list:
    """``width`` consecutive elements at a shared-memory ``address`` in one access."""
    if width == 1:
        return [builder.load(address, typ=memory_type)]
    vector_type = ir.VectorType(memory_type, width)
    pointer = builder.bitcast(address, vector_type.as_pointer(3))
    vector = builder.load(pointer, typ=vector_type, align=width * element_bytes)
    return [builder.extract_element(vector, ir.Constant(I32, lane)) for lane in range(width)]
