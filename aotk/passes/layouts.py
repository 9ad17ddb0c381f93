"""Layout assignment: kir + axis info -> gir, the distribution of every block over threads.

In: a kir ``Function``, its axis info, ``num_warps``, whether the target has ``wgmma``.
Out: a ``LayoutPlan`` giving

- one blocked layout per block rank (``sizePerThread`` from the widest vector access the
  axis info proves legal for that rank's memory ops, then threads and warps filling the
  dominant shape fastest-dimension first);
- for each memory op, its vector width in elements;
- for each dot, its tensor-core accumulator layout (``passes.mma_layout``), or None;
- for each value, the layouts it is needed in. Values are demanded backward from stores:
  elementwise ops take their result's layout, ``expand_dims`` asks for a slice of it,
  ``splat`` a scalar. Pure values are recomputed per layout (cheap: index math); a load
  demanded in several layouts is loaded once and converted through shared memory.
- Values that cross a region boundary (loop-carried values, block arguments, results of
  ``for`` / ``if`` / ``while``, whatever a terminator yields) live in the natural layout of
  their rank, so that every path agrees on which thread holds which element.

A layout is ``Layout(blocked, sliced)``: the value is laid out as the parent blocked
layout of a shape with size-1 dimensions at the ``sliced`` parent axes. Blocked layouts are
shape-agnostic, as in Triton: smaller shapes wrap, size-1 dimensions replicate.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..ir.kir import (BINARY_OPS, COMBINING, CONTROL_FLOW, PURE_OPS, SHUFFLES, SIDE_EFFECT_OPS, TERMINATORS,
                      UNARY_OPS, Function, walk)
from .mma_layout import Mma, choose_mma

THREADS_PER_WARP = 32
MAX_VECTOR_BYTES = 16


@dataclass(frozen=True)
class Blocked:
    size_per_thread: tuple
    threads_per_warp: tuple
    warps_per_cta: tuple
    order: tuple            # dimensions, fastest first

    @property
    def rank(self) -> int:
        return len(self.size_per_thread)

    def tile(self, dim: int) -> int:
        """Elements one CTA covers along ``dim`` before the layout wraps."""
        return self.size_per_thread[dim] * self.threads_per_warp[dim] * self.warps_per_cta[dim]

    def __str__(self) -> str:
        return (f"#blocked<spt={list(self.size_per_thread)} tpw={list(self.threads_per_warp)} "
                f"wpc={list(self.warps_per_cta)} order={list(self.order)}>")

    def slot_offsets(self, axis: int, size: int) -> list:
        """Offsets from the thread's base index of the elements it holds along ``axis``."""
        per_thread = min(self.size_per_thread[axis], size)
        repeats = max(1, size // self.tile(axis))
        return [r * self.tile(axis) + s for r in range(repeats) for s in range(per_thread)]

    def strides(self, axis: int) -> tuple:
        """(lane, warp) id distance between neighbours along ``axis``."""
        lane_stride = warp_stride = 1
        for dim in self.order:
            if dim == axis:
                break
            lane_stride *= self.threads_per_warp[dim]
            warp_stride *= self.warps_per_cta[dim]
        return lane_stride, warp_stride


# Elementwise ops an accumulator epilogue may run in the accumulator's own layout.
EPILOGUE_OPS = BINARY_OPS | UNARY_OPS | frozenset(("cmp", "select", "cast", "fma"))


@dataclass(frozen=True)
class Layout:
    blocked: Blocked
    sliced: tuple = ()      # parent axes removed from the value's shape

    def embed(self, shape: tuple) -> tuple:
        """The value's shape in parent coordinates (size 1 at sliced axes)."""
        dims = iter(shape)
        return tuple(1 if axis in self.sliced else next(dims) for axis in range(self.blocked.rank))

    def parent_axis(self, dim: int) -> int:
        """Parent axis of the value's dimension ``dim``."""
        return [a for a in range(self.blocked.rank) if a not in self.sliced][dim]

    def __str__(self) -> str:
        return str(self.blocked) if not self.sliced else f"#slice<{self.blocked}, dims={list(self.sliced)}>"


SCALAR = "scalar"   # every thread holds the one value


@dataclass
class LayoutPlan:
    num_warps: int
    blocked_by_rank: dict
    vector_width: dict = field(default_factory=dict)   # memory op -> elements per access
    demands: dict = field(default_factory=dict)        # value -> [layouts], home first
    # Values computed once in a layout of their own (loads, reductions); any other layout
    # they are demanded in is a conversion through shared memory.
    homes: dict = field(default_factory=dict)
    mma: dict = field(default_factory=dict)            # dot op -> Mma layout, or None
    # Values whose natural layout is not their rank's: the addresses and masks of an
    # async_copy, laid out for the copied tile itself (see ``copy_layouts``).
    preferred: dict = field(default_factory=dict)

    @property
    def uses_wgmma(self) -> bool:
        """Whether a dot runs on Hopper's wgmma (the kernel then targets sm_90a)."""
        return any(layout is not None and layout.instruction == "wgmma"
                   for layout in self.mma.values())

    def natural(self, value) -> "Layout":
        """The layout stores, region boundaries and side effects use for ``value``."""
        if value in self.preferred:
            return self.preferred[value]
        return self.rank_layout(value)

    def rank_layout(self, value) -> "Layout":
        """The blocked layout of ``value``'s rank (SCALAR for a 0-d value)."""
        rank = len(value.type.shape)
        return Layout(self.blocked_by_rank[rank]) if rank else SCALAR

    def is_live(self, op) -> bool:
        """Whether code must be generated for ``op``: it has effects (stores, side-effect
        ops, control flow, ops without results), or one of its results is wanted."""
        if not op.results or op.opcode in SIDE_EFFECT_OPS or op.opcode in CONTROL_FLOW:
            return True
        return any(result in self.demands for result in op.results)

    def describe(self) -> str:
        return "\n".join(f"rank {r}: {b}" for r, b in sorted(self.blocked_by_rank.items()))


def memory_vector_width(op, infos) -> int:
    """Elements per access along the fastest dimension that axis info proves legal."""
    pointer = op.operands[0]
    shape = pointer.type.shape
    if not shape:
        return 1
    dim = len(shape) - 1
    info = infos[pointer]
    itemsize = pointer.element.element_ty.itemsize
    width = min(info.contiguity[dim], max(1, info.divisibility[dim] // itemsize),
                max(1, MAX_VECTOR_BYTES // itemsize), shape[dim])
    mask_index = 2 if op.opcode == "store" else 1   # load / async_copy: (ptr, mask, ..)
    if op.attrs.get("has_mask"):
        width = min(width, infos[op.operands[mask_index]].constancy[dim])
    return 1 << (max(1, width).bit_length() - 1)


def _blocked_for(shape: tuple, vector: int, num_warps: int) -> Blocked:
    rank = len(shape)
    order = tuple(range(rank - 1, -1, -1))
    numel = 1
    for s in shape:
        numel *= s
    threads = num_warps * THREADS_PER_WARP
    size_per_thread = [1] * rank
    # Keep every thread busy before widening its vector (Triton's coalescing rule).
    size_per_thread[order[0]] = max(1, min(vector, shape[order[0]], max(1, numel // threads)))
    threads_per_warp = [1] * rank
    remaining = THREADS_PER_WARP
    for dim in order:
        share = min(remaining, max(1, shape[dim] // size_per_thread[dim]))
        threads_per_warp[dim] = share
        remaining //= share
    threads_per_warp[order[-1]] *= remaining   # left-over lanes replicate along the slowest dim
    warps = [1] * rank
    remaining = num_warps
    for dim in order:
        share = min(remaining, max(1, shape[dim] // (size_per_thread[dim] * threads_per_warp[dim])))
        warps[dim] = share
        remaining //= share
    warps[order[-1]] *= remaining
    return Blocked(tuple(size_per_thread), tuple(threads_per_warp), tuple(warps), order)


def copy_layouts(function: Function, vector_width: dict, num_warps: int) -> dict:
    """value -> Layout for the tiles async_copy moves and what computes their addresses.

    The rank's blocked layout is shaped by the rank's largest block (a dot's accumulator),
    so a smaller operand tile would wrap in it: threads would hold replicas and carry
    pointers for them across the loop. A layout shaped by the tile itself gives every
    thread its own vectors. It spreads backwards from the copy's pointer and mask through
    ops of the tile's shape, and through loop-carried values (init, block argument, yield)."""
    preferred: dict = {}
    carried_from: dict = {}   # block argument -> (init, yielded)
    for op in walk(function.body):
        if op.opcode == "for":
            region = op.regions[0]
            for arg, init, yielded in zip(region.args[1:], op.operands[3:],
                                          region.terminator.operands):
                carried_from[arg] = (init, yielded)
    for op in walk(function.body):
        if op.opcode != "async_copy":
            continue
        shape = op.operands[0].type.shape
        layout = Layout(_blocked_for(shape, vector_width[op], num_warps))
        pending = list(op.operands[:2 if op.attrs["has_mask"] else 1])
        while pending:
            value = pending.pop()
            if value in preferred or value.type.shape != shape:
                continue
            preferred[value] = layout
            if value in carried_from:
                pending.extend(carried_from[value])
            elif value.owner is not None and value.owner.opcode in PURE_OPS and \
                    not value.owner.regions:
                pending.extend(value.owner.operands)
    return preferred


def assign_layouts(function: Function, infos: dict, num_warps: int,
                   wgmma: bool = False) -> LayoutPlan:
    memory_ops = [op for op in walk(function.body)
                  if op.opcode in ("load", "store", "async_copy")]
    vector_width = {op: memory_vector_width(op, infos) for op in memory_ops}

    # One blocked layout per rank, shaped by the largest block of that rank.
    largest: dict = {}
    widths: dict = {}
    for op in walk(function.body):
        block_args = [a for region in op.regions for a in region.args]
        for value in list(op.operands) + op.results + block_args:
            shape = value.type.shape
            if shape and (len(shape) not in largest or
                          value.type.numel > _numel(largest[len(shape)])):
                largest[len(shape)] = shape
    for op in memory_ops:
        rank = len(op.operands[0].type.shape)
        if rank:
            widths[rank] = min(widths.get(rank, MAX_VECTOR_BYTES), vector_width[op])
    blocked_by_rank = {rank: _blocked_for(shape, widths.get(rank, 1), num_warps)
                       for rank, shape in largest.items()}

    demands: dict = {}
    homes: dict = {}

    def demand(value, layout):
        layouts = demands.setdefault(value, [])
        if layout not in layouts:
            layouts.append(layout)

    plan = LayoutPlan(num_warps, blocked_by_rank, vector_width,
                      preferred=copy_layouts(function, vector_width, num_warps))
    natural = plan.natural

    mma = {op: choose_mma(op, num_warps, wgmma)
           for op in walk(function.body) if op.opcode == "dot"}
    yield_layouts: dict = {}   # a for body's yield -> the layout of each carried value

    def carried_layout(region, value):
        """A loop-carried accumulator of a dot keeps the dot's mma layout; anything else its
        natural layout."""
        inside = {id(op) for op in region.body}
        pending, seen = [value], set()
        while pending:
            v = pending.pop()
            owner = v.owner
            if owner is None or id(owner) not in inside or id(v) in seen:
                continue
            seen.add(id(v))
            if owner.opcode == "dot" and mma.get(owner) is not None:
                return Layout(mma[owner])
            if owner.result is not None and owner.result.type.shape == value.type.shape:
                pending.extend(owner.operands)
        return natural(value)

    def accumulator_epilogue() -> dict:
        """value -> Mma layout, for values an epilogue computes elementwise from a loop's dot
        accumulator (with splatted scalars): they stay in the accumulator's layout, so only
        the last of them (usually the cast to a narrower type) goes through shared memory."""
        resident: dict = {}
        for op in walk(function.body):
            if op.opcode == "for":
                body = op.regions[0]
                for result, yielded in zip(op.results, body.terminator.operands):
                    layout = carried_layout(body, yielded)
                    if isinstance(layout, Layout) and isinstance(layout.blocked, Mma):
                        resident[result] = layout
                continue
            if op.result is None or op.regions or op.opcode not in EPILOGUE_OPS:
                continue
            found = set()
            for value in op.operands:
                if value in resident:
                    found.add(resident[value])
                elif value.owner is None or value.owner.opcode not in ("splat", "constant"):
                    break
            else:
                if len(found) == 1:
                    resident[op.result] = found.pop()
        return resident

    epilogue = accumulator_epilogue()

    def demand_home(value, home=None):
        """A value with one layout: region boundaries and their results (natural unless a
        loop carries a dot's accumulator)."""
        home = home or natural(value)
        homes[value] = home
        layouts = demands.setdefault(value, [])
        if home in layouts:
            layouts.remove(home)
        layouts.insert(0, home)

    def demand_combining(op):
        """Reductions and scans work on their operands' natural layout; a scan's results
        stay there, a reduction's come out in its slice along the axis. A combine region
        runs on one register per value: its arguments and body are scalars."""
        for value in op.operands:
            demand(value, natural(value))
        for result in op.results:
            if op.opcode == "scan" or not result.type.shape:
                demand_home(result)
            else:
                demand_home(result, Layout(natural(op.operands[0]).blocked, (op.attrs["axis"],)))
        for region in op.regions:
            for value in region.args:
                demand_home(value, SCALAR)
            demand_ops(region.body)

    def demand_ops(ops):
        for op in reversed(ops):
            if op.opcode == "store" or op.opcode in TERMINATORS:
                layouts = yield_layouts.get(op) or [
                    natural(op.operands[0]) if op.opcode == "store" else natural(v)
                    for v in op.operands]
                for value, layout in zip(op.operands, layouts):
                    demand(value, layout)
                continue
            if op.opcode in COMBINING:
                if any(result in demands for result in op.results):
                    demand_combining(op)
                continue
            if op.regions:
                operand_layouts = [natural(v) for v in op.operands]
                if op.opcode == "for":
                    body = op.regions[0]
                    carried = [carried_layout(body, v) for v in body.terminator.operands]
                    yield_layouts[body.terminator] = carried
                    operand_layouts[3:] = carried
                    for value, layout in zip(op.results, carried):
                        demand_home(value, layout)
                    for value, layout in zip(body.args, [SCALAR] + carried):
                        demand_home(value, layout)
                else:
                    for value in op.results:
                        demand_home(value)
                    for region in op.regions:
                        for value in region.args:
                            demand_home(value)
                for region in reversed(op.regions):
                    demand_ops(region.body)
                for value, layout in zip(op.operands, operand_layouts):
                    demand(value, layout)
                continue
            if op.opcode in SIDE_EFFECT_OPS:
                # Roots like stores: operands in their natural layouts; an atomic's old
                # values are computed there once (their home) and converted where wanted.
                for value in op.operands:
                    demand(value, natural(value))
                if op.result is not None and op.result in demands:
                    demand_home(op.result)
                continue
            if op.result is None or op.result not in demands:
                continue
            wanted = demands[op.result]
            if op.result in epilogue:
                # Computed where the accumulator lives; converted once, from there, to
                # whatever layouts its users want.
                demand_home(op.result, epilogue[op.result])
                for value in op.operands:
                    demand(value, epilogue[op.result])
                continue
            if op.opcode == "dot" and mma.get(op) is not None:
                # a and b are staged through shared memory from their natural layouts
                # (or already there: a pipelined loop's shared_read); the accumulator lives
                # in the mma fragments.
                for operand in op.operands[:2]:
                    if operand.owner is not None and operand.owner.opcode == "shared_read":
                        demand(operand.owner.operands[0], SCALAR)
                    else:
                        demand(operand, natural(operand))
                demand(op.operands[2], Layout(mma[op]))
                demand_home(op.result, Layout(mma[op]))
                continue
            if op.opcode in SHUFFLES or op.opcode == "dot":
                # Elements change places through shared memory: read from the operands'
                # natural layouts, written out in the result's.
                for value in op.operands:
                    demand(value, natural(value))
                demand_home(op.result)
                continue
            if op.opcode == "load":
                # Loaded once, in a full (unsliced) layout when one is wanted: that is where
                # the vector width was proven.
                wanted.sort(key=lambda lay: lay is SCALAR or bool(lay.sliced))
                homes[op.result] = wanted[0]
                wanted = wanted[:1]
            for layout in wanted:
                for value in op.operands:
                    demand(value, _operand_layout(op, layout))

    demand_ops(function.body)
    for value in list(demands):
        if value.type.shape == ():
            demands[value] = [SCALAR]
            if value in homes:
                homes[value] = SCALAR
    plan.demands, plan.homes, plan.mma = demands, homes, mma
    return plan


def _operand_layout(op, layout):
    if layout is SCALAR or op.opcode == "splat":
        return SCALAR
    if op.opcode == "expand_dims":
        axis = layout.parent_axis(op.attrs["axis"])
        return Layout(layout.blocked, tuple(sorted(layout.sliced + (axis,))))
    return layout


def _numel(shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n
