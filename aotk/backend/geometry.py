"""Thread geometry: where a layout puts each element, as LLVM IR index math.

In: the layouts the layout pass chose (``passes.layouts``: blocked, sliced, ``Mma``) and
the kernel's entry block. Out: per thread, the logical index of each register a value
holds (``Distribution``), and which thread owns each element (replicas excepted).

The thread's coordinates (tid, lane, warp) and each layout's per-axis base index are
computed once, in the entry block, so that they dominate every use; register k of a value
stands for the element at base + a constant offset along each axis, wrapped to the shape.
"""
from __future__ import annotations

import itertools

import llvmlite.ir as ir

from ..passes.layouts import SCALAR, Blocked, Layout
from ..passes.mma_layout import MMA_TILE, Mma
from .llvm_types import I32, inline_asm


def _i32(n: int):
    return ir.Constant(I32, n)


def special_register(builder, register: str, name: str):
    """Reads the PTX special register ``register`` (``tid.x``, ``ctaid.y``...)."""
    module = builder.module
    function = module.globals.get(f"llvm.nvvm.read.ptx.sreg.{register}")
    if function is None:
        function = ir.Function(module, ir.FunctionType(I32, []),
                               name=f"llvm.nvvm.read.ptx.sreg.{register}")
    return builder.call(function, [], name=name)


def _blocked_thread_base(layout: Blocked, builder, lane, warp, axis: int, tid=None):
    """First index along ``axis`` of this thread's elements, before wrapping."""
    lane_stride, warp_stride = layout.strides(axis)
    tpw, wpc = layout.threads_per_warp[axis], layout.warps_per_cta[axis]
    if tid is not None and tpw > 1 and wpc > 1 and lane_stride * tpw == 32 and warp_stride == 1:
        # The axis takes the top lane bits and the bottom warp bits: one run of tid's bits,
        # read with one shift and mask, as Triton's. Composed as (warp << a) | (lane >> b)
        # instead, the index of register k (base + k * tile, zero-extended for 64-bit
        # addresses) was a three-term sum to SCEV, which then proved no nuw for it: loop
        # strength reduction kept one 64-bit induction variable per register row instead
        # of one base plus immediates (fla chunk_fwd_kernel_h, sm_90: 94 -> 64 registers).
        thread = builder.urem(builder.udiv(tid, _i32(lane_stride)), _i32(tpw * wpc))
        return builder.mul(thread, _i32(layout.size_per_thread[axis]), name=f"base{axis}")
    lane_coord = builder.urem(builder.udiv(lane, _i32(lane_stride)),
                              _i32(layout.threads_per_warp[axis]))
    warp_coord = builder.urem(builder.udiv(warp, _i32(warp_stride)),
                              _i32(layout.warps_per_cta[axis]))
    thread = builder.add(builder.mul(warp_coord, _i32(layout.threads_per_warp[axis])), lane_coord)
    return builder.mul(thread, _i32(layout.size_per_thread[axis]), name=f"base{axis}")


def _mma_thread_base(layout: Mma, builder, lane, warp, axis: int):
    """First row (axis 0) or column (axis 1) of this thread's accumulator fragments."""
    wm = layout.warps_per_cta[0]
    if axis == 0:
        warp_coord, lane_coord = builder.urem(warp, _i32(wm)), builder.udiv(lane, _i32(4))
    else:
        warp_coord = builder.udiv(warp, _i32(wm))
        lane_coord = builder.mul(builder.urem(lane, _i32(4)), _i32(2))
    # A warp column's first column: its 8-column tile, or its own slice of N.
    warp_step = layout.warp_columns if axis == 1 and layout.warp_columns else MMA_TILE[axis]
    return builder.add(builder.mul(warp_coord, _i32(warp_step)), lane_coord,
                       name=f"mma_base{axis}")


class ThreadGeometry:
    """This thread's coordinates and the per-layout index math built from them."""

    def __init__(self, builder, threads: int):
        self.builder = builder      # where the kernel body is being emitted
        # A builder before the entry block's terminator, set once the body block exists.
        self.prologue = None
        self.tid = special_register(builder, "tid.x", "tid")
        # tid < threads: with that range LLVM sees that `base | tid | k * threads` adds
        # disjoint bits, so sext(index) * size becomes one product plus immediate offsets
        # per element (Triton's code does the same), instead of a 64-bit product each.
        self.tid.set_metadata("range", builder.module.add_metadata(
            [_i32(0), _i32(threads)]))
        self.lane = builder.and_(self.tid, _i32(31), name="lane")
        self.warp = builder.lshr(self.tid, _i32(5), name="warp")
        self.threads = threads
        self._warpgroup = None
        self._bases: dict = {}
        self._distributions: dict = {}

    @property
    def warpgroup(self):
        """This thread's warpgroup (4 warps), computed once in the entry block. With several,
        broadcast from lane 0 (``shfl.sync.idx``), which ptxas knows to be the same across
        the warp: the wgmma descriptors built from it then stay in uniform registers
        instead of being moved there before each instruction (R2UR, 16 a trip in flash
        attention's 8-warp loop). With one, 0, which LLVM folds from tid's range."""
        if self._warpgroup is None:
            b = self.prologue
            self._warpgroup = b.lshr(self.warp, _i32(2), name="warpgroup")
            if self.threads > 128:
                self._warpgroup = inline_asm(b, "shfl.sync.idx.b32 $0, $1, 0, 31, -1;",
                                             "=r,r", [self._warpgroup], I32,
                                             side_effect=False)
        return self._warpgroup

    def thread_base(self, parent, axis: int):
        """First index along ``axis`` of this thread's elements in a parent layout (blocked
        or mma), computed once in the entry block so that it dominates every use."""
        key = (parent, axis)
        if key not in self._bases:
            emit = _mma_thread_base if isinstance(parent, Mma) else _blocked_thread_base
            if emit is _blocked_thread_base:
                self._bases[key] = emit(parent, self.prologue, self.lane, self.warp, axis,
                                        self.tid)
            else:
                self._bases[key] = emit(parent, self.prologue, self.lane, self.warp, axis)
        return self._bases[key]

    def distribution(self, layout: Layout, shape: tuple) -> "Distribution":
        key = (layout, shape)
        if key not in self._distributions:
            self._distributions[key] = Distribution(self, layout, shape)
        return self._distributions[key]

    def count(self, value, layout) -> int:
        """Registers a thread holds for ``value`` in ``layout``."""
        if layout is SCALAR:
            return 1
        return len(self.distribution(layout, value.type.shape).slots())

    def owner(self, value, layout):
        """True on the one thread that owns each element of ``value`` (None: every thread)."""
        if layout is SCALAR:
            return self.builder.icmp_unsigned("==", self.tid, _i32(0))
        return self.distribution(layout, value.type.shape).owner_predicate()

    def logical_indices(self, value, layout) -> list:
        """Per register of ``value`` in ``layout``: its element index, one i32 per dimension."""
        if layout is SCALAR or not value.type.shape:
            return [[]]
        dist = self.distribution(layout, value.type.shape)
        per_axis = [dist.axis_indices(a) for a in range(len(dist.embedded))]
        dims = range(len(value.type.shape))
        return [[per_axis[layout.parent_axis(d)][slot[layout.parent_axis(d)]] for d in dims]
                for slot in dist.slots()]

    def logical_offsets(self, value, layout) -> list:
        """Per register of ``value`` in ``layout``: the constant each of its
        ``logical_indices`` adds to the thread's part (shared by every register), one int
        per dimension; None for a register whose index wraps by a mask instead."""
        dist = self.distribution(layout, value.type.shape)
        per_axis = [dist.axis_offsets(a) for a in range(len(dist.embedded))]
        axes = [layout.parent_axis(d) for d in range(len(value.type.shape))]
        found = []
        for slot in dist.slots():
            offsets = [per_axis[a][slot[a]] for a in axes]
            found.append(None if None in offsets else offsets)
        return found


class Distribution:
    """Which logical indices a thread holds for a shape in a layout."""

    def __init__(self, geometry: ThreadGeometry, layout: Layout, shape: tuple):
        self.layout = layout
        self.embedded = layout.embed(shape)
        # per parent axis: constant offset of each slot from the thread's base index
        self.slot_offsets = [layout.blocked.slot_offsets(axis, size)
                             for axis, size in enumerate(self.embedded)]
        self.counts = [len(o) for o in self.slot_offsets]
        self.geometry = geometry

    def axis_indices(self, axis: int) -> list:
        """LLVM i32 index of each slot along ``axis``."""
        size = self.embedded[axis]
        if size == 1:
            return [_i32(0)] * self.counts[axis]
        b = self.geometry.builder
        parent = self.layout.blocked
        base = self.geometry.thread_base(parent, axis)
        # Indices come out as (thread part) + constant wherever possible: every register
        # then shares the thread part, and addresses built from them are that plus an
        # immediate (see shared_rows.row_major_index). With the mask on every register instead,
        # NVPTX's straight-line strength reduction takes quadratic time on large blocks.
        if parent.tile(axis) <= size:
            # No wrapping along this axis: base + offset < size already.
            pass
        elif isinstance(parent, Blocked):
            # Wrapping (replicas): base is a multiple of size_per_thread and every offset is
            # below it (sizes are powers of two), so masking the base alone is the same.
            base = b.and_(base, _i32(size - 1))
        else:
            return [b.and_(b.add(base, _i32(c)), _i32(size - 1)) for c in self.slot_offsets[axis]]
        return [b.add(base, _i32(c), flags=("nuw", "nsw")) if c else base
                for c in self.slot_offsets[axis]]

    def axis_offsets(self, axis: int) -> list:
        """Per slot along ``axis``: the constant ``axis_indices`` adds to the thread's part,
        or None where the index wraps by a mask (the sum is then no thread part + constant)."""
        size = self.embedded[axis]
        if size == 1:
            return [0] * self.counts[axis]
        parent = self.layout.blocked
        if parent.tile(axis) <= size or isinstance(parent, Blocked):
            return list(self.slot_offsets[axis])
        return [None] * self.counts[axis]

    def slots(self):
        """Multi-indices (per parent axis) of the registers, in register order."""
        return list(itertools.product(*(range(c) for c in self.counts)))

    def owner_predicate(self):
        """True on the one thread that owns each element (others hold replicas)."""
        b = self.geometry.builder
        blocked = self.layout.blocked
        predicate = None
        for axis, size in enumerate(self.embedded):
            if blocked.tile(axis) <= size:
                continue
            owns = b.icmp_unsigned("<", self.geometry.thread_base(blocked, axis), _i32(size))
            predicate = owns if predicate is None else b.and_(predicate, owns)
        return predicate
