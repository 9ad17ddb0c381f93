"""Layouts, the data of gir: how a block value is spread over a CTA's threads.

A ``Blocked`` layout gives each thread ``size_per_thread`` contiguous elements per dimension,
lanes and warps tiling the shape fastest dimension first (``order``); it is shape-agnostic,
as in Triton: smaller shapes wrap, size-1 dimensions replicate. A ``Layout(blocked,
sliced)`` lays a value out as its parent layout (blocked, or a tensor-core ``Mma``) lays out
a shape with size-1 dimensions at the ``sliced`` parent axes; ``SCALAR`` is a value every
thread holds whole. A ``LayoutPlan`` (what ``passes.assign_layouts`` produces) says, for a
kernel, the blocked layout of each rank (and of each block shape that layout would
replicate), the vector width of each memory op, the
tensor-core layout of each dot, and for each value the layouts it is wanted in and, where
it has one, its home; its ``listing`` is the gir dump. Nothing here emits code:
``backend.geometry`` turns layouts into index math.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..ir.kir import CONTROL_FLOW, SIDE_EFFECT_OPS, print_function
from .mma_layout import Mma

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

    def lane_step(self, axis: int) -> int:
        """Elements along ``axis`` between the first elements of neighbouring lanes."""
        return self.size_per_thread[axis]

    def strides(self, axis: int) -> tuple:
        """(lane, warp) id distance between neighbours along ``axis``."""
        lane_stride = warp_stride = 1
        for dim in self.order:
            if dim == axis:
                break
            lane_stride *= self.threads_per_warp[dim]
            warp_stride *= self.warps_per_cta[dim]
        return lane_stride, warp_stride


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
    # Loads and stores whose memory is contiguous along a dimension other than the last
    # (a transposed tile): that dimension, and a blocked layout of their own, fastest along
    # it, that the op reads or writes in (``layout_facts.access_layouts``); and stores of
    # 4-byte accumulators, made from the accumulator's fragments (``layout_demands._store``).
    vector_dim: dict = field(default_factory=dict)
    access: dict = field(default_factory=dict)
    demands: dict = field(default_factory=dict)        # value -> [layouts], home first
    # Values computed once in a layout of their own (loads, reductions); any other layout
    # they are demanded in is a conversion through shared memory.
    homes: dict = field(default_factory=dict)
    mma: dict = field(default_factory=dict)            # dot op -> Mma layout, or None
    # Tensor-core dot operands stored into their transposed tile (B K-major, A M-major) from
    # the layout their loads read them in down their columns
    # (``layout_facts.column_read_operands``): (dot, operand index) -> that layout.
    stored_transposed: dict = field(default_factory=dict)
    # mma.sync dots whose A is the transpose of a value left in accumulator fragments
    # (``mma_residency.fragment_views``): {(dot, 0)}. The dot reads that value's own
    # row-major tile M-major, stored from the fragments; the transpose is never computed.
    fragment_views: set = field(default_factory=set)

    def k_major_b(self, op):
        """The layout the dot ``op`` stores its B K-major from, or None."""
        return self.stored_transposed.get((op, 1))

    def m_major_a(self, op):
        """The layout the dot ``op`` stores its A M-major from, or None."""
        return self.stored_transposed.get((op, 0))

    def a_view_source(self, op):
        """The value whose row-major tile dot ``op`` reads M-major as its A (``A =
        tl.trans(value)`` with the value in accumulator fragments), or None."""
        if (op, 0) not in self.fragment_views:
            return None
        return op.operands[0].owner.operands[0]
    # Values whose natural layout is not their shape's: the addresses and masks of an
    # async_copy, laid out for the copied tile itself (see ``layout_facts.copy_layouts``).
    preferred: dict = field(default_factory=dict)
    # Block shapes with a layout of their own: the rank's would replicate them
    # (``layout_facts.blocked_layouts``).
    blocked_by_shape: dict = field(default_factory=dict)

    @property
    def uses_wgmma(self) -> bool:
        """Whether a dot runs on Hopper's wgmma (the kernel then targets sm_90a)."""
        return any(layout is not None and layout.instruction == "wgmma"
                   for layout in self.mma.values())

    def natural(self, value) -> "Layout":
        """The layout stores, region boundaries and side effects use for ``value``."""
        if value in self.preferred:
            return self.preferred[value]
        return self.shape_layout(value)

    def shape_layout(self, value) -> "Layout":
        """The blocked layout of ``value``'s shape: its own where its rank's would replicate
        it, else its rank's (SCALAR for a 0-d value)."""
        shape = value.type.shape
        if not shape:
            return SCALAR
        return Layout(self.blocked_by_shape.get(shape) or self.blocked_by_rank[len(shape)])

    def is_live(self, op) -> bool:
        """Whether code must be generated for ``op``: it has effects (stores, side-effect
        ops, control flow, ops without results), or one of its results is wanted."""
        if not op.results or op.opcode in SIDE_EFFECT_OPS or op.opcode in CONTROL_FLOW:
            return True
        return any(result in self.demands for result in op.results)

    def listing(self, function) -> str:
        """The gir dump: the kir listing with the layouts of each value (its home first,
        marked, then the layouts it is converted to; or each layout it is recomputed in)
        and the vector width of each memory op, after the parent layouts they name."""
        aliases: dict = {}

        def alias(parent) -> str:
            if parent not in aliases:
                kind = "mma" if isinstance(parent, Mma) else "blocked"
                aliases[parent] = f"#{kind}{sum(1 for a in aliases.values() if kind in a)}"
            return aliases[parent]

        def name(layout) -> str:
            if layout is SCALAR:
                return "scalar"
            parent = alias(layout.blocked)
            return f"{parent}.slice{list(layout.sliced)}" if layout.sliced else parent

        def value_note(value) -> str:
            layouts = self.demands.get(value)
            if not layouts:
                return ""
            names = [name(layout) for layout in layouts]
            if value in self.homes:
                names[0] += " (home)"
            return "in " + ", ".join(names)

        def op_note(op) -> str:
            notes = [name for name, stored in (("a=m_major", self.m_major_a(op)),
                                               ("a=m_major_view", self.a_view_source(op)),
                                               ("b=k_major", self.k_major_b(op))) if stored]
            if notes:
                return " ".join(notes)
            width = self.vector_width.get(op)
            if width is None:
                return ""
            if op in self.access:
                along = self.vector_dim.get(op, op.operands[0].type.rank - 1)
                return f"vec={width} along={along} in {name(self.access[op])}"
            return f"vec={width}"

        for rank in sorted(self.blocked_by_rank):
            alias(self.blocked_by_rank[rank])
        body = print_function(function, value_note, op_note)
        definitions = [f"{text} = {parent}" for parent, text in aliases.items()]
        return "\n".join(definitions) + "\n" + body


def unit_reshape_layout(layout, shape: tuple, other_shape: tuple):
    """The layout of ``other_shape`` in which every thread holds, in the same registers,
    the elements ``layout`` gives it of ``shape``, where the two shapes differ only in
    size-1 dimensions (a reshape that adds or drops them, like ``[BM, BN] -> [1, BM, BN]``
    before a rank-3 descriptor store); None for any other reshape, or where ``layout``
    spreads threads or warps along a size-1 dimension (replicas the other shape has no
    dimension for). Lanes, warps and register slots are counted over the dimensions
    larger than 1 only, so the reshape then moves no element."""
    if layout is SCALAR or layout.sliced or not isinstance(layout.blocked, Blocked):
        return None
    kept = [axis for axis, size in enumerate(shape) if size != 1]
    other_kept = [axis for axis, size in enumerate(other_shape) if size != 1]
    if [shape[a] for a in kept] != [other_shape[a] for a in other_kept]:
        return None
    blocked = layout.blocked
    if any((blocked.size_per_thread[a], blocked.threads_per_warp[a],
            blocked.warps_per_cta[a]) != (1, 1, 1)
           for a in range(len(shape)) if a not in kept):
        return None
    to_other = dict(zip(kept, other_kept))
    rank = len(other_shape)

    def spread(values):
        out = [1] * rank
        for axis, other in to_other.items():
            out[other] = values[axis]
        return tuple(out)

    order = tuple(to_other[a] for a in blocked.order if a in to_other) + \
        tuple(a for a in range(rank - 1, -1, -1) if a not in other_kept)
    return Layout(Blocked(spread(blocked.size_per_thread), spread(blocked.threads_per_warp),
                          spread(blocked.warps_per_cta), order))


def permuted_layout(layout, order: tuple):
    """The layout in which every thread holds, in the same registers, the elements of
    ``permute(value, order)`` that ``layout`` gives it of ``value``: result dimension ``i``
    is value dimension ``order[i]``, so each per-dimension count moves with it and the
    fastest-first order names the result's dimensions. None where ``layout`` is not a whole
    blocked layout (a slice, an accumulator's fragments, a scalar)."""
    if layout is SCALAR or layout.sliced or not isinstance(layout.blocked, Blocked):
        return None
    blocked = layout.blocked
    position = {axis: i for i, axis in enumerate(order)}
    return Layout(Blocked(tuple(blocked.size_per_thread[a] for a in order),
                          tuple(blocked.threads_per_warp[a] for a in order),
                          tuple(blocked.warps_per_cta[a] for a in order),
                          tuple(position[a] for a in blocked.order)))


def memory_vector_width(op, infos, dim: int | None = None) -> int:
    """Elements per access along ``dim`` (default: the last) that axis info proves legal."""
    pointer = op.operands[0]
    shape = pointer.type.shape
    if not shape:
        return 1
    if dim is None:
        dim = len(shape) - 1
    info = infos[pointer]
    itemsize = pointer.element.element_ty.itemsize
    width = min(info.contiguity[dim], max(1, info.divisibility[dim] // itemsize),
                max(1, MAX_VECTOR_BYTES // itemsize), shape[dim])
    # store / atomic_rmw: (ptr, value, mask); load / async_copy: (ptr, mask, ..)
    mask_index = 2 if op.opcode in ("store", "atomic_rmw") else 1
    if op.attrs.get("has_mask"):
        width = min(width, infos[op.operands[mask_index]].constancy[dim])
    return 1 << (max(1, width).bit_length() - 1)


def memory_vector_dim(op, infos) -> int:
    """The dimension a load or store accesses memory in vectors along: the last, unless
    another allows wider vectors (a tile stored column by column, read as its transpose)."""
    shape = op.operands[0].type.shape
    last = len(shape) - 1
    if op.opcode == "async_copy" and op.attrs.get("vector_dim") is not None:
        return op.attrs["vector_dim"]   # a copy down columns, or into a plain tile
    if op.opcode not in ("load", "store") or len(shape) < 2:
        return last
    widths = {dim: memory_vector_width(op, infos, dim) for dim in range(len(shape))}
    best = max(range(len(shape)), key=lambda dim: (widths[dim], dim))
    return best if widths[best] > widths[last] else last


def blocked_for(shape: tuple, vector: int, num_warps: int, fastest: int | None = None) -> Blocked:
    """A blocked layout for ``shape``: ``vector`` contiguous elements per thread along the
    fastest dimension (default: the last; then the others, last first), as far as the
    threads stay busy, then lanes and warps fastest first."""
    rank = len(shape)
    order = tuple(range(rank - 1, -1, -1))
    if fastest is not None:
        order = (fastest,) + tuple(dim for dim in order if dim != fastest)
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
