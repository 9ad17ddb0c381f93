"""Layout conversions through the shared-memory scratch buffer.

In: a value's registers in the layout it was computed in (its home) and the layouts it is
wanted in. Out: its registers in each: stored once to a row-major buffer (rows padded so
that a side reading or writing down columns stays free of bank conflicts, and vectors where
both sides' rows allow: ``conversion_vector``), one barrier, read back per target. The
sizing side (``_conversions_bytes``) tells ``SharedMemory`` how much of the buffer a value's
conversions take. ``ConversionBuffers`` is a part of ``SharedMemory`` (``backend.shared``):
it uses its builder, pointers and barriers.
"""
from __future__ import annotations

import llvmlite.ir as ir

from ..passes.layouts import SCALAR
from . import warp_conversions
from .llvm_types import I8, llvm_type
from .shared_rows import load_vector, row_major_index, row_padding, store_vector


class ConversionBuffers:
    """The conversion methods of ``SharedMemory``."""

    def _conversions_bytes(self, values) -> int:
        """The largest conversion of ``values`` from their homes to the other layouts they
        are wanted in."""
        plan = self.plan
        needed = 0
        for value in values:
            home = plan.homes.get(value)
            for other in plan.demands.get(value, ()) if home is not None else ():
                if other != home and not warp_conversions.convertible(value, home, other):
                    needed = max(needed, self._conversion_bytes(value, home, other))
        return needed

    def _conversion_bytes(self, value, source, target) -> int:
        shape = value.type.shape
        pitch = (shape[-1] if shape else 1) + self._conversion_padding(value, source, target)
        return _rows(shape) * pitch * max(1, value.element.itemsize)

    def _conversion_padding(self, value, source, target) -> int:
        """Elements added to each row of a conversion's buffer. One 32-bit word, so that a
        side that reads or writes down a column stays free of bank conflicts. Where both
        sides move vectors along rows (``conversion_vector``), enough that each side's
        accesses stay free of them too: a warp's vector accesses go to shared memory 128
        bytes of lanes at a time, and where those lanes span several rows, each row must
        start where the previous row's lanes stopped (``_row_shift_bytes``); that is also
        a multiple of every vector, so each row starts aligned for it. A wgmma fp32
        accumulator going to a blocked layout of 4-wide rows is then written 8 and read
        16 bytes at a time in the fewest wavefronts (rows padded by 8 words), instead of
        one word at a time with 4-way bank conflicts. The padding stays within an eighth
        of a row (or one vector); 0 where the block fits only unpadded (``allocate``)."""
        if not self.pad_conversions:
            return 0
        shape, element = value.type.shape, value.element
        widths = self._conversion_vectors(value, source, target)
        if min(widths) == 1:
            return row_padding(shape, element)
        itemsize = max(1, element.itemsize)
        row_bytes, vector_bytes = shape[-1] * itemsize, max(widths) * itemsize
        shift = max(_row_shift_bytes(layout, shape, width * itemsize)
                    for layout, width in zip((source, target), widths))
        if shift > max(vector_bytes, row_bytes // 8):
            # Short rows: padding for that would grow the buffer by more than an eighth
            # (liger's mhc [256, 32] fp32 tiles: by a half); aligned rows only.
            shift = vector_bytes
        # Rows one shift long already start where the previous row's lanes stopped.
        return 0 if row_bytes == shift else shift // itemsize

    def _conversion_vectors(self, value, source, target) -> tuple:
        shape, element = value.type.shape, value.element
        return tuple(conversion_vector(layout, shape, element) for layout in (source, target))

    def _address(self, value, layout, slot_indices, padding):
        b = self.builder
        shape = value.type.shape
        indices = [slot_indices[layout.parent_axis(dim)] for dim in range(len(shape))]
        byte = row_major_index(b, indices, shape, padding, max(1, value.element.itemsize))
        memory_type = I8 if value.element.is_bool() else llvm_type(value.element)
        return self.pointer(byte, memory_type), memory_type

    def convert(self, value, registers, source, target) -> list:
        """``value``'s ``registers`` in layout ``source`` -> its registers in ``target``."""
        return self.convert_to(value, registers, source, [target])[target]

    def convert_to(self, value, registers, source, targets) -> dict:
        """``value``'s ``registers`` in layout ``source`` -> {target: its registers there},
        through a row-major buffer (its rows padded: ``_conversion_padding``), in vectors
        where each side's rows start aligned for them. Targets whose buffers are padded
        alike read one store of the value, after one barrier (a vector summed down its
        columns and wanted both as a row and as a column, in a loop, is stored once per
        trip, not twice with two barriers each)."""
        b = self.builder
        src_dist = self.threads.distribution(source, value.type.shape)
        src_axes = [src_dist.axis_indices(a) for a in range(len(src_dist.embedded))]
        by_padding: dict = {}
        for target in targets:
            padding = self._conversion_padding(value, source, target)
            widths = self._conversion_vectors(value, source, target)
            # Vectors need rows that start aligned for them (padded for vectors, or not at
            # all) and an aligned buffer: above a pipelined loop's stages, whose mbarriers
            # may end on 8 bytes, it may not be.
            if (padding and min(widths) == 1) or self.floor % 16:
                widths = (1, 1)
            by_padding.setdefault(padding, []).append((target, widths))
        element_bytes = max(1, value.element.itemsize)
        out = {}
        for padding, group in by_padding.items():
            # One store, in the widest vectors every target's alignment allows.
            store_width = min(widths[0] for _, widths in group)
            self.begin_use()
            slots = src_dist.slots()
            for first in range(0, len(registers), store_width):
                indices = [src_axes[a][k] for a, k in enumerate(slots[first])]
                address, memory_type = self._address(value, source, indices, padding)
                store_vector(b, [b.zext(reg, I8) if value.element.is_bool() else reg
                                 for reg in registers[first:first + store_width]],
                             address, memory_type, element_bytes)
            self.barrier()
            for target, widths in group:
                out[target] = self._read_back(value, target, padding, widths[1])
        return out

    def _read_back(self, value, target, padding, width) -> list:
        """The registers of ``value`` in ``target``, loaded from a conversion's buffer."""
        b = self.builder
        dst_dist = self.threads.distribution(target, value.type.shape)
        dst_axes = [dst_dist.axis_indices(a) for a in range(len(dst_dist.embedded))]
        element_bytes = max(1, value.element.itemsize)
        out = []
        slots = dst_dist.slots()
        for first in range(0, len(slots), width):
            indices = [dst_axes[a][k] for a, k in enumerate(slots[first])]
            address, memory_type = self._address(value, target, indices, padding)
            for loaded in load_vector(b, address, memory_type, width, element_bytes):
                out.append(b.icmp_unsigned("!=", loaded, ir.Constant(I8, 0))
                           if value.element.is_bool() else loaded)
        return out


def conversion_vector(layout, shape, element) -> int:
    """How many consecutive registers of a value of ``shape`` in ``layout`` hold
    consecutive elements of one row, each run starting at a multiple of that count (so a
    run is one aligned vector of a row-major buffer): the thread's elements per run along
    the last dimension (a blocked layout's size_per_thread, an mma fragment's column
    pair), when that dimension's slots are the fastest-varying registers; at most 16
    bytes, and 1 for booleans (bytes in shared memory) and 0-d or 1-d values."""
    if layout is SCALAR or len(shape) < 2 or element.is_bool():
        return 1
    parent = layout.blocked
    axis = layout.parent_axis(len(shape) - 1)
    embedded = layout.embed(shape)
    if any(len(parent.slot_offsets(a, embedded[a])) != 1
           for a in range(axis + 1, parent.rank)):
        return 1
    width = min(parent.size_per_thread[axis], embedded[axis],
                max(1, 16 // max(1, element.itemsize)))
    width = 1 << (max(1, width).bit_length() - 1)
    offsets = parent.slot_offsets(axis, embedded[axis])
    for start in range(0, len(offsets), width):
        run = offsets[start:start + width]
        if len(run) != width or run[0] % width or \
                run != list(range(run[0], run[0] + width)):
            return 1
    return width


def _row_shift_bytes(layout, shape, vector_bytes) -> int:
    """Bytes one row of a padded buffer should start past a 128-byte boundary for the
    vector accesses of ``layout`` (``vector_bytes`` each) to hit distinct banks: the bytes
    the lanes of one 128-byte access phase cover in a row, where the phase spans several
    rows (an mma fragment: 4 lanes per row, 8 bytes each, 4 rows per phase -> 32); else
    just the vector, for alignment."""
    parent = layout.blocked
    axis = layout.parent_axis(len(shape) - 1)
    lane_stride, _ = parent.strides(axis)
    lanes_per_row = parent.threads_per_warp[axis] if lane_stride == 1 else 1
    row_bytes = lanes_per_row * vector_bytes
    return row_bytes if row_bytes < 128 else vector_bytes


def _rows(shape) -> int:
    rows = 1
    for s in shape[:-1]:
        rows *= s
    return rows
