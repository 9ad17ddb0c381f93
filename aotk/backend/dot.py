"""``dot`` -> LLVM IR: on tensor cores where the layout pass chose an ``Mma`` layout for it
(``backend.wgmma`` on sm_90a, ``backend.mma`` for mma.sync), else on CUDA cores, here: both
operands through shared memory, then a loop over K in which every thread updates the
accumulator elements it owns with FMAs.

In: a, b in their natural layouts, the accumulator in the result's home layout. Out: the
result's registers in that layout. The CUDA-core path is the portable one, exact for every dtype the
language allows (fp16/bf16 inputs are widened, int8 products are summed in int32, tf32
inputs drop their low 13 mantissa bits as a tensor core would); the tensor-core paths
(mma.sync, wgmma) replace it where the shapes and the target allow.

Shared memory holds A as [.., M, K] and B as [.., K, N], rows padded (``views.row_padding``).
Inside the K loop each thread loads A[m, k] once per distinct row m it owns and B[k, n] once
per distinct column n, so a thread with a 4x4 patch does 8 shared loads per 16 FMAs.
"""
from __future__ import annotations

import llvmlite.ir as ir

from . import mma, wgmma
from .llvm_types import I32, llvm_type
from .registry import scratch, value_lowering
from .shared_rows import padded_bytes, row_major_index, row_padding

TF32_MASK = 0xFFFFE000


@scratch("dot")
def dot_scratch_bytes(plan, op) -> int:
    layout = plan.mma.get(op)
    if layout is not None:
        instruction = wgmma if layout.instruction == "wgmma" else mma
        return instruction.shared_bytes_needed(plan, op)
    a, b = op.operands[:2]
    return _aligned(padded_bytes(a.type.shape, a.element)) + padded_bytes(b.type.shape, b.element)


def _aligned(n: int) -> int:
    return (n + 15) // 16 * 16


def _store_operand(ctx, value, byte_base):
    """Writes ``value`` (natural layout) row-major with padded rows at ``byte_base``."""
    b = ctx.builder
    layout = ctx.plan.natural(value)
    shape, element = value.type.shape, value.element
    padding = row_padding(shape, element)
    memory_type = llvm_type(element)
    for register, index in zip(ctx.regs(value, layout),
                               ctx.threads.logical_indices(value, layout)):
        offset = b.add(row_major_index(b, index, shape, padding, element.itemsize),
                       ir.Constant(I32, byte_base))
        b.store(register, ctx.shared.pointer(offset, memory_type))


def _load_operand(ctx, value, byte_base, index):
    b = ctx.builder
    shape, element = value.type.shape, value.element
    offset = b.add(row_major_index(b, index, shape, row_padding(shape, element),
                                   element.itemsize), ir.Constant(I32, byte_base))
    return b.load(ctx.shared.pointer(offset, llvm_type(element)), typ=llvm_type(element))


def _widen(ctx, x, element, precision):
    """An operand element in the accumulation type (fp32 for 16-bit floats, i32 for int8)."""
    b = ctx.builder
    if element.is_int():
        return b.sext(x, I32)
    if element.bits == 16:
        return b.fpext(x, ir.FloatType())
    if element.is_fp32() and precision == "tf32":
        bits = b.and_(b.bitcast(x, I32), ir.Constant(I32, TF32_MASK))
        return b.bitcast(bits, ir.FloatType())
    return x


@value_lowering("dot")
def lower_dot(ctx, op, layout) -> list:
    """``layout`` is the result's home: an ``Mma`` layout, or its rank's on CUDA cores."""
    mma_layout = ctx.plan.mma.get(op)
    if mma_layout is not None:
        instruction = wgmma.lower_wgmma if mma_layout.instruction == "wgmma" else mma.lower_mma
        return instruction(ctx, op)
    return _fma_dot(ctx, op)


def _fma_dot(ctx, op) -> list:
    b = ctx.builder
    a, b_value, acc = op.operands
    result = op.result
    precision = op.attrs.get("precision")
    rank = len(result.type.shape)
    k_size = a.type.shape[-1]
    b_base = _aligned(padded_bytes(a.type.shape, a.element))

    ctx.shared.begin_use()
    _store_operand(ctx, a, 0)
    _store_operand(ctx, b_value, b_base)
    ctx.shared.barrier()

    layout = ctx.plan.natural(result)
    dist = ctx.threads.distribution(layout, result.type.shape)
    per_axis = [dist.axis_indices(axis) for axis in range(rank)]
    slots = dist.slots()
    accumulate_type = I32 if result.element.is_int() else (
        ir.DoubleType() if result.element.is_fp64() else ir.FloatType())
    initial = [_to_accumulator(ctx, r, result.element, accumulate_type)
               for r in ctx.regs(acc, layout)]

    # for k in [0, K): phis carry k and every accumulator register.
    preheader = b.block
    header = ctx.kernel.append_basic_block("dot.k")
    exit_block = ctx.kernel.append_basic_block("dot.done")
    b.branch(header)
    b.position_at_end(header)
    k = b.phi(I32, name="k")
    k.add_incoming(ir.Constant(I32, 0), preheader)
    accumulators = [b.phi(accumulate_type) for _ in initial]
    for phi, value in zip(accumulators, initial):
        phi.add_incoming(value, preheader)
    batch = lambda slot: [per_axis[0][slot[0]]] if rank == 3 else []   # noqa: E731
    a_rows, b_cols, updated = {}, {}, []
    for slot, accumulator in zip(slots, accumulators):
        row_key, col_key = (slot[:-1]), (slot[:-2] + slot[-1:])
        if row_key not in a_rows:
            index = batch(slot) + [per_axis[rank - 2][slot[rank - 2]], k]
            a_rows[row_key] = _widen(ctx, _load_operand(ctx, a, 0, index), a.element,
                                     precision)
        if col_key not in b_cols:
            index = batch(slot) + [k, per_axis[rank - 1][slot[rank - 1]]]
            b_cols[col_key] = _widen(ctx, _load_operand(ctx, b_value, b_base, index),
                                     b_value.element, precision)
        x, y = a_rows[row_key], b_cols[col_key]
        if accumulate_type == I32:
            updated.append(b.add(accumulator, b.mul(x, y)))
        else:
            fma = ctx.module.globals.get(f"llvm.fma.{accumulate_type.intrinsic_name}") or \
                ir.Function(ctx.module, ir.FunctionType(accumulate_type, [accumulate_type] * 3),
                            name=f"llvm.fma.{accumulate_type.intrinsic_name}")
            updated.append(b.call(fma, [x, y, accumulator]))
    next_k = b.add(k, ir.Constant(I32, 1))
    latch = b.block
    k.add_incoming(next_k, latch)
    for phi, value in zip(accumulators, updated):
        phi.add_incoming(value, latch)
    b.cbranch(b.icmp_signed("<", next_k, ir.Constant(I32, k_size)), header, exit_block)
    b.position_at_end(exit_block)
    return [_from_accumulator(ctx, value, result.element) for value in updated]


def _to_accumulator(ctx, register, element, accumulate_type):
    if element.is_floating() and element.bits == 16:
        return ctx.builder.fpext(register, accumulate_type)
    return register


def _from_accumulator(ctx, value, element):
    if element.is_floating() and element.bits == 16:
        return ctx.builder.fptrunc(value, llvm_type(element))
    return value
