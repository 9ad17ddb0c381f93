"""gir -> LLVM IR: the driver that walks the kernel and calls each op's registered lowering.

In: a kir ``Function``, its ``LayoutPlan`` and axis info. Out: an llvmlite ``ir.Module``
with one ``ptx_kernel`` function, and the bytes of dynamic shared memory it needs. For a
value in a layout, each thread holds a list of registers (``backend.geometry``); each op
family's module registers how its ops become instructions (``backend.registry``) and works
through the public ``LoweringContext`` alone. The driver skips ops nothing needs
(``LayoutPlan.is_live``), binds what each lowering returns, and converts values the plan
wants in more than one layout through shared memory. The entry block keeps the thread
geometry and parameters; the kernel body starts in the next block.
"""
from __future__ import annotations

import llvmlite.ir as ir

# The op families register their lowerings when imported.
from . import (atomics, control, creation, debug, descriptors, dot, elementwise,  # noqa: F401
               gather, histogram, inline_asm, map_elementwise, math, memory, multicast,
               pipeline, reduce, scan, sort, tma, views, warp_specialize)
from ..passes.layouts import SCALAR, LayoutPlan
from ..targets import SHARED_BYTES_PER_BLOCK
from .context import LoweringContext
from .geometry import ThreadGeometry
from .llvm_types import I64, llvm_type
from .pipeline import plan_buffers
from .registry import OP_LOWERINGS, VALUE_LOWERINGS, missing_lowering
from .shared import SharedMemory
from .sink_to_use import sink_to_first_use
from .tma import tensor_map_parameters


def _drain_after(ops, index):
    """The op after ``ops[index]`` when it drains that pipelined loop's copies (the
    ``async_wait(0)`` / ``tma_release`` that ``passes.pipeline`` puts right after it)."""
    if ops[index].opcode != "for" or "pipeline" not in ops[index].attrs \
            or index + 1 == len(ops):
        return None
    after = ops[index + 1]
    if (after.opcode == "async_wait" and after.attrs.get("pending") == 0) or \
            after.opcode == "tma_release":
        return after
    return None


def _lower_ops(ctx: LoweringContext, ops):
    plan = ctx.plan
    drained = set()
    for index, op in enumerate(ops):
        ctx.builder.comment = None
        if id(op) in drained or not plan.is_live(op):
            continue
        _lower_op(ctx, ops, index, drained)
        # The last dot reading a region's resident tiles: the space is free again.
        ctx.shared.after_op(op)


def _lower_op(ctx: LoweringContext, ops, index: int, drained: set):
    plan = ctx.plan
    op = ops[index]
    value_rule = VALUE_LOWERINGS.get(op.opcode)
    if value_rule is not None:
        home = plan.homes.get(op.result)
        if home is not None:
            ctx.define(op.result, value_rule(ctx, op, home))
        else:
            for layout in plan.demands[op.result]:
                ctx.bind(op.result, layout, value_rule(ctx, op, layout))
            ctx.store_resident(op.result)
        return
    op_rule = OP_LOWERINGS.get(op.opcode)
    if op_rule is None:
        raise missing_lowering(op.opcode)
    lowered = op_rule(ctx, op)
    drain = _drain_after(ops, index)
    if drain is not None:
        # Before the loop's results are defined: defining one converts it to its other
        # layouts through shared memory, which the loop's last copies (zero-filled
        # past the end) may still be writing.
        OP_LOWERINGS[drain.opcode](ctx, drain)
        drained.add(id(drain))
    for value, registers in zip(op.results, lowered or ()):
        if value in plan.demands:
            ctx.define(value, registers)


def lower_to_llvm(function, plan: LayoutPlan, infos: dict, target: str = "sm_90",
                  fp_fusion: bool = True) -> tuple:
    """(llvmlite module, bytes of dynamic shared memory the kernel needs, whether its
    layout conversions through shared memory kept their padded rows). ``fp_fusion``: float
    adds, subtractions and products may contract into FMAs (Triton's enable_fp_fusion)."""
    # Its own context: the register structs asm calls return are named there (one module's
    # names would otherwise be declared in every later module of the process).
    module = ir.Module(name=function.name, context=ir.Context())
    module.triple = "nvptx64-nvidia-cuda"
    arg_types = [ir.PointerType(addrspace=1) if p.value.element.is_ptr()
                 else llvm_type(p.value.element) for p in function.params]
    # TMA tensor maps follow the params (by value: ``backend.tma.grid_constant_params``).
    arg_types += [ir.PointerType()] * len(function.tensor_maps)
    kernel = ir.Function(module, ir.FunctionType(ir.VoidType(), arg_types), name=function.name)
    kernel.calling_convention = "ptx_kernel"
    entry = kernel.append_basic_block("entry")
    builder = ir.IRBuilder(entry)
    buffers = plan_buffers(function)
    threads = ThreadGeometry(builder, 32 * plan.num_warps)
    shared = SharedMemory(module, builder, plan, threads, buffers.loop_bytes,
                          SHARED_BYTES_PER_BLOCK[target.rstrip("a")])
    ctx = LoweringContext(function, plan, infos, target, module, kernel, builder, threads,
                          shared, buffers, lambda ops: _lower_ops(ctx, ops))
    if not fp_fusion:
        ctx.float_flags = ()
    for param, arg in zip(function.params, kernel.args):
        arg.name = param.name
        # A launch passes a defined value for every parameter. Saying so lets LLVM stop its
        # poison walks at the parameters: NVPTX's straight-line strength reduction asks, for
        # every (basis, candidate) pair of address computations, whether the basis may be
        # poison, and without it walked up to every parameter each time.
        arg.attributes.add("noundef")
        value = builder.ptrtoint(arg, I64, name=param.name + "_addr") \
            if param.value.element.is_ptr() else arg
        ctx.bind(param.value, SCALAR, [value])
    tensor_map_parameters(ctx, len(function.params))
    body = kernel.append_basic_block("body")
    builder.branch(body)
    threads.prologue = ir.IRBuilder(entry)
    threads.prologue.position_before(entry.terminator)
    builder.position_at_end(body)

    shared.allocate(function)
    with shared.region(function.body):
        _lower_ops(ctx, function.body)
    builder.ret_void()
    sink_to_first_use(module, keep=ctx.placed_in_order, sinks=ctx.inputs_sunk_to)
    return module, shared.bytes, shared.pad_conversions
