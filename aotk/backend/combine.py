"""The combine step of reductions and scans, on one thread's scalar registers.

In: a ``reduce`` / ``argreduce`` / ``scan`` op. Out: ``merge(first, second)``, a function
from two tuples of registers (one register per operand: the accumulated values first, then
the values that follow them in scan order) to the combined tuple. Named combines (add, mul,
max, min, xor) are one instruction each. A combine region (the inlined ``tl.reduce`` /
``tl.associative_scan`` combine function) is lowered op by op on the registers at every
step it is used: its values are 0-d, so the layout pass demands them as scalars, and each
step is straight-line code (a few blocks when the function branches).
"""
from __future__ import annotations

import llvmlite.ir as ir

from ..passes.layouts import SCALAR


def combine_named(ctx, element, combine: str, a, b):
    """a (+) b for the named combines; max/min on floats ignore NaN (maxnum/minnum). Float
    adds and products carry the kernel's contract flag, as its elementwise ones do (Triton's
    reductions are plain ``add.f32``): a product summed in a reduction may become one FMA,
    and NVPTX does not pin each step with ``add.rn``."""
    bld = ctx.builder
    if combine in ("add", "mul"):
        if element.is_floating():
            operation = bld.fadd if combine == "add" else bld.fmul
            return operation(a, b, flags=ctx.float_flags)
        return bld.add(a, b) if combine == "add" else bld.mul(a, b)
    if combine == "xor":
        return bld.xor(a, b)
    if combine == "or":
        return bld.or_(a, b)
    if element.is_floating():
        name = f"llvm.{'maxnum' if combine == 'max' else 'minnum'}.{a.type.intrinsic_name}"
        fn = ctx.module.globals.get(name) or ir.Function(
            ctx.module, ir.FunctionType(a.type, [a.type, a.type]), name=name)
        return bld.call(fn, [a, b])
    compare = bld.icmp_signed if element.is_int_signed() else bld.icmp_unsigned
    return bld.select(compare(">" if combine == "max" else "<", a, b), a, b)


def combine_region(ctx, region, first: tuple, second: tuple) -> tuple:
    """Lowers the combine region once on (first + second); returns what it yields."""
    arguments = [[register] for register in tuple(first) + tuple(second)]
    layouts = [SCALAR] * len(region.terminator.operands)
    # The region is lowered afresh at every step: each step binds its own arguments.
    yielded = ctx.lower_region(region, arguments, layouts)
    return tuple(registers[0] for registers in yielded)


def combiner(ctx, op):
    """``merge(first, second) -> tuple`` for a reduce/scan op without indices."""
    if op.regions:
        region = op.regions[0]
        return lambda first, second: combine_region(ctx, region, first, second)
    element, combine = op.operands[0].element, op.attrs["combine"]
    return lambda first, second: (combine_named(ctx, element, combine, first[0],
                                                second[0]),)


def scratch_bytes(element) -> int:
    """Bytes one value takes in a shared-memory exchange: at least a 32-bit word."""
    return max(4, element.itemsize)


def select_tuple(ctx, condition, first: tuple, second: tuple) -> tuple:
    """Per component: first where ``condition`` holds, else second."""
    return tuple(ctx.builder.select(condition, a, b) for a, b in zip(first, second))


def axis_geometry(blocked, size: int, axis: int) -> tuple:
    """(P, L, W, R) along ``axis`` for a block of ``size`` elements there: elements a thread
    holds per repeat, lanes and warps that hold distinct elements, repeats of the layout's
    tile. When the tile is larger than the block, lanes with coordinate c and c + L (warps
    w and w + W) hold the same elements: each group of L lanes (W warps) works on its own,
    so replicas end up with exactly the owner's values and nothing counts twice."""
    per_thread = min(blocked.size_per_thread[axis], size)
    lanes = min(blocked.threads_per_warp[axis], max(1, size // per_thread))
    warps = min(blocked.warps_per_cta[axis], max(1, size // (per_thread * lanes)))
    repeats = max(1, size // blocked.tile(axis))
    return per_thread, lanes, warps, repeats


def axis_coordinates(ctx, blocked, axis: int, lanes: int, warps: int) -> tuple:
    """This thread's lane and warp coordinates along ``axis`` within its group of ``lanes``
    lanes and ``warps`` warps (see ``axis_geometry``)."""
    bld = ctx.builder
    lane_stride, warp_stride = blocked.strides(axis)
    lane = bld.urem(bld.udiv(ctx.threads.lane, ir.Constant(ir.IntType(32), lane_stride)),
                    ir.Constant(ir.IntType(32), lanes))
    warp = bld.urem(bld.udiv(ctx.threads.warp, ir.Constant(ir.IntType(32), warp_stride)),
                    ir.Constant(ir.IntType(32), warps))
    return lane, warp
