"""Shape ops -> LLVM IR: ``splat``, ``broadcast`` and ``expand_dims`` only re-index
registers; ``permute``, ``reshape``, ``join`` and ``split`` move elements through the shared
scratch buffer, except a transpose that a dot stores K-major and a reshape of size-1
dimensions, which the layout pass keeps in registers (re-indexed).

In: the op and the layout its result is wanted in. Out: the result's registers there.
``splat`` repeats its scalar register; ``broadcast`` gives each register of the result the
operand's register for the same slot (size-1 dimensions map to slot 0); ``expand_dims``
takes the operand in the slice of the same layout along the new axis, whose registers are
exactly the result's.

The shuffles read their operands in their rank's layout and build the result in its own
(the layout pass gives them that home). Every shuffle is described by a *buffer* (a logical
shape in shared memory), how each operand's element index maps into it, and how each
result element index maps into it:

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

from ..ir.kir import SHUFFLES
from ..passes.layouts import SCALAR, Layout, unit_reshape_layout
from .llvm_types import I8, I32, inline_asm, llvm_type
from .registry import scratch, value_lowering
from .shared_rows import padded_bytes, row_major_index, row_padding


def _buffer_shape(op) -> tuple:
    if op.opcode == "reshape":
        return (op.result.type.numel,)
    if op.opcode == "join":
        return op.result.type.shape
    return op.operands[0].type.shape


@value_lowering("splat")
def lower_splat(ctx, op, layout):
    (scalar,) = ctx.regs(op.operands[0], SCALAR)
    if op.attrs.get("opaque"):
        # A copy LLVM cannot see through: its loop strength reduction would turn the
        # sums of this loop-carried offset and invariant pointers back into one 64-bit
        # induction variable per register (``passes.pipeline_carried.carry_offsets``). ptxas
        # drops the mov.
        scalar = inline_asm(ctx.builder, "mov.b64 $0, $1;", "=l,l", [scalar], scalar.type,
                            side_effect=False)
    return [scalar] * ctx.threads.count(op.result, layout)


@value_lowering("expand_dims")
def lower_expand_dims(ctx, op, layout):
    if not op.operands[0].type.shape:   # a 0-d value: every register is the scalar's
        return lower_splat(ctx, op, layout)
    sliced = layout.sliced + (layout.parent_axis(op.attrs["axis"]),)
    return ctx.regs(op.operands[0], Layout(layout.blocked, tuple(sorted(sliced))))


@value_lowering("broadcast")
def lower_broadcast(ctx, op, layout):
    source = op.operands[0]
    source_registers = ctx.regs(source, layout)
    source_dist = ctx.threads.distribution(layout, source.type.shape)
    result_dist = ctx.threads.distribution(layout, op.result.type.shape)
    source_index = {slot: i for i, slot in enumerate(source_dist.slots())}
    out = []
    for slot in result_dist.slots():
        mapped = tuple(0 if source_dist.embedded[a] == 1 else k for a, k in enumerate(slot))
        out.append(source_registers[source_index[mapped]])
    return out


@scratch(*SHUFFLES)
def shuffle_scratch_bytes(plan, op) -> int:
    if _relabels(plan, op):
        return 0
    return padded_bytes(_buffer_shape(op), op.result.element)


def _relabels(plan, op) -> bool:
    """Whether ``op`` is a reshape or permute the layout pass keeps in registers (a reshape
    that adds or drops size-1 dimensions only, a transpose a dot stores K-major:
    ``layout_demands._reshape`` and ``_permute``): it then has no home."""
    return op.opcode in ("reshape", "permute") and op.result in plan.demands and \
        op.result not in plan.homes


def _permuted_registers(ctx, op, layout) -> list:
    """The result of a permute kept in registers, in ``layout`` (the transposed view of its
    operand's natural layout): the operand's registers, each placed at the slot its element
    moves to (result slot ``s`` is operand slot ``t`` with ``t[order[i]] = s[i]``)."""
    operand = op.operands[0]
    natural = ctx.plan.natural(operand)
    registers = ctx.regs(operand, natural)
    source = ctx.threads.distribution(natural, operand.type.shape)
    register_of = {slot: register for slot, register in zip(source.slots(), registers)}
    order = op.attrs["order"]
    out = []
    for slot in ctx.threads.distribution(layout, op.result.type.shape).slots():
        moved = [None] * len(slot)
        for position, axis in enumerate(order):
            moved[axis] = slot[position]
        out.append(register_of[tuple(moved)])
    return out


@value_lowering(*SHUFFLES)
def lower_shuffle(ctx, op, layout) -> list:
    """``layout`` is the result's home, its rank's layout; or, for a permute kept in
    registers, the transposed view of its operand's layout; or, for a reshape that adds or
    drops size-1 dimensions, any layout it is wanted in: its operand's registers there
    (less or plus those dimensions) are the result's, in the same order."""
    if _relabels(ctx.plan, op) and op.opcode == "permute":
        return _permuted_registers(ctx, op, layout)
    if _relabels(ctx.plan, op):
        return ctx.regs(op.operands[0], unit_reshape_layout(
            layout, op.result.type.shape, op.operands[0].type.shape))
    b = ctx.builder
    element = op.result.element
    shape = _buffer_shape(op)
    padding = row_padding(shape, element)
    memory_type = I8 if element.is_bool() else llvm_type(element)
    size = max(1, element.itemsize)

    def address(buffer_index):
        if op.opcode == "reshape":
            buffer_index = [buffer_index]
        return ctx.shared.pointer(row_major_index(b, buffer_index, shape, padding, size),
                                  memory_type)

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

    ctx.shared.begin_use()
    for position, operand in enumerate(op.operands):
        operand_layout = ctx.plan.natural(operand)
        registers = ctx.regs(operand, operand_layout)
        for register, index in zip(registers, ctx.threads.logical_indices(operand,
                                                                          operand_layout)):
            stored = b.zext(register, I8) if element.is_bool() else register
            b.store(stored, address(to_buffer(position, index)))
    ctx.shared.barrier()
    out = []
    for index in ctx.threads.logical_indices(op.result, ctx.plan.natural(op.result)):
        loaded = b.load(address(from_result(index)), typ=memory_type)
        out.append(b.icmp_unsigned("!=", loaded, ir.Constant(I8, 0)) if element.is_bool()
                   else loaded)
    return out
