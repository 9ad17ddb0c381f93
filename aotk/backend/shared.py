"""The kernel's shared-memory scratch buffer: its size, pointers into it, the barriers that
order its users, and layout conversions through it.

In: the kir function, its layout plan and the scratch sizes the op families registered
(``backend.registry.scratch``). Out: one dynamic ``extern .shared`` array sized for the
largest user, and the helpers every user goes through: ``begin_use`` (a barrier when an
earlier use may still be read), ``pointer`` (above a pipelined loop's operand stages while
that loop runs), ``stage_pointer`` (the stages themselves), ``barrier`` and ``convert`` (a
value from one layout to another, through padded rows so that reading down columns stays
free of bank conflicts; unpadded where only that fits the block's shared memory, as a
128x256 fp16 tile does in Turing's 64 KB).

Each use (a layout conversion, a reduction's cross-warp step, a scan's, a shuffle, a dot's
operands, an atomic's result broadcast) is live only from its first store to its last load,
and no two uses overlap in time; so one buffer of the largest use's size is exactly what
allocating by liveness gives. Two kinds of tiles are the exception, and sit below every
other use while they live: a pipelined loop's stages, for the whole loop, and the operand
tiles that several dots read (``backend.operand_tiles``), from the start of the loop (or
kernel) body around their value to its last dot; their barriers are tracked per tile
(``write_resident``, ``read_resident``), joined at control flow as ``in_use`` is.
"""
from __future__ import annotations

from contextlib import contextmanager

import llvmlite.ir as ir

from ..passes.layouts import SCALAR
from . import warp_conversions
from .llvm_types import I8, I32, cta_barrier, llvm_type
from .operand_tiles import ResidentTiles, plan_resident_tiles
from .registry import scratch_bytes_of
from .swizzle import SWIZZLE_ATOM_BYTES


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


# In ``read_tiles`` when any resident tile may have been read since the last barrier.
EVERY_TILE = "every resident tile"


class SharedMemory:
    """The scratch buffer of one kernel being lowered (see the module text)."""

    def __init__(self, module, builder, plan, threads, pipeline_bytes: dict, limit: int):
        self.module = module
        self.builder = builder
        self.plan = plan
        self.threads = threads
        # Bytes of each pipelined loop's operand stages (``backend.pipeline.plan_buffers``).
        self.pipeline_bytes = pipeline_bytes
        self.buffer = None
        self.bytes = 0
        # Whether an earlier use may still be read: the next use starts with a barrier.
        self.in_use = False
        # Bytes below which other users stay out while a pipelined loop's stages are live.
        self.floor = 0
        # The most a block may use on the target; layout conversions give up their row
        # padding (and its freedom from bank conflicts) only where that alone fits it.
        self.limit = limit
        self.pad_conversions = True
        # Operand tiles stored once (``backend.operand_tiles``): the plan, the offsets of those
        # reserved now, those a dot may have read since the last barrier, those written since.
        self.tiles = ResidentTiles([], {}, {})
        self.resident: dict = {}
        self._reservations: dict = {}   # id() of a region's op list -> (floor, its tiles)
        self.read_tiles = frozenset()
        self.unpublished = frozenset()

    def _bytes_of(self, ops, floor: int, args=()) -> int:
        """The top of the largest scratch use among ``ops`` (nested ones included) and the
        conversions of ``args`` (a region's block arguments: a carried value needed outside
        its layout), when they start at ``floor``, with the resident tiles they reserve
        (below every use up to the op holding the last dot that reads them)."""
        _, top = self.tiles.reserve(ops, floor)
        needed = top + self._conversions_bytes(args)
        for op in ops:
            needed = max(needed, self._op_bytes(op, top))
            if op in self.tiles.release_after:
                top = floor
        return needed

    def _op_bytes(self, op, floor: int) -> int:
        """The top of ``op``'s largest scratch use (its regions' included) above ``floor``."""
        plan = self.plan
        needed = floor + self._conversions_bytes(op.results)
        if plan.is_live(op):
            scratch = scratch_bytes_of(plan, op)
            if op.opcode == "dot":
                scratch = self.tiles.dot_scratch_bytes(plan, op, scratch)
            needed = max(needed, floor + scratch)
        for region in op.regions:
            inner = floor
            if op.opcode == "for" and op.attrs.get("pipeline") is not None:
                inner = self.pipeline_bytes[op.attrs["pipeline"]]
            needed = max(needed, self._bytes_of(region.body, inner, region.args))
        return needed

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

    def _needed(self, function) -> int:
        return self._bytes_of(function.body, 0)

    def allocate(self, function):
        """Declares the scratch buffer, sized for the largest user (see the module's text)."""
        self.tiles = plan_resident_tiles(function, self.plan)
        needed = self._needed(function)
        if needed > self.limit and self.tiles.tiles:
            # The tiles stored once stay below every other use: without them it may fit.
            self.tiles = ResidentTiles([], {}, {})
            needed = self._needed(function)
        if needed > self.limit:
            self.pad_conversions = False
            unpadded = self._needed(function)
            if unpadded <= self.limit:
                needed = unpadded
            else:   # too large either way: the compile error names the padded size
                self.pad_conversions = True
        if needed:
            # Dynamic (`extern .shared`): the launch passes its size, over 48 KB allowed.
            array = ir.ArrayType(I8, 0)
            self.buffer = ir.GlobalVariable(self.module, array, "shared_scratch", addrspace=3)
            self.buffer.linkage = "external"
            # wgmma's and TMA stores' swizzled tiles start on 1024-byte swizzle atoms.
            swizzled = self.plan.uses_wgmma or function.tensor_maps
            self.buffer.align = SWIZZLE_ATOM_BYTES if swizzled else 16
            self.bytes = needed

    barrier_threads = None   # after a producer warp left: the compute warps' (consumers_only)

    def barrier(self):
        cta_barrier(self.builder, self.barrier_threads)
        self.read_tiles = self.unpublished = frozenset()

    # -- resident operand tiles (``backend.operand_tiles``) -------------------------------
    @property
    def resident_slots(self) -> dict:   # (dot, operand index) -> the tile that slot reads
        return self.tiles.slots

    @contextmanager
    def region(self, ops):
        """Lowering the region of ``ops``: the resident tiles it reserves are placed at its
        floor and its other users go above them until ``after_op`` frees the space (at the
        latest when the region ends); then the next user of that space waits for the dots
        that read them."""
        placed, top = self.tiles.reserve(ops, self.floor)
        if not placed:
            yield
            return
        self._reservations[id(ops)] = (self.floor, placed)
        self.floor = top
        self.resident.update(placed)
        if self.in_use:   # an earlier use of that space may still be read
            self.read_tiles = self.read_tiles | set(placed)
        try:
            yield
        finally:
            self._release(id(ops))

    def after_op(self, op):
        """After lowering ``op``: where no later dot of its region reads the region's
        resident tiles, their space is free for the ops that follow."""
        key = self.tiles.release_after.get(op)
        if key is not None:
            self._release(key)

    def _release(self, key):
        if key not in self._reservations:
            return
        self.floor, placed = self._reservations.pop(key)
        for value in placed:
            del self.resident[value]
        # Tiles read, or written, since the last barrier: the next user of their space
        # waits for those accesses to finish.
        self.in_use = self.in_use or bool(self.read_tiles) or bool(self.unpublished)

    @contextmanager
    def floor_at(self, floor: int):
        """``pointer`` offsets count from ``floor`` meanwhile."""
        saved, self.floor = self.floor, floor
        try:
            yield
        finally:
            self.floor = saved

    def write_resident(self, value) -> int:
        """The byte offset ``value``'s tile is about to be written at, after a barrier if a
        dot may have read it since the last one."""
        if EVERY_TILE in self.read_tiles or value in self.read_tiles:
            self.barrier()
        self.unpublished = self.unpublished | {value}
        return self.resident[value]

    def read_resident(self, value) -> int:
        """The byte offset of ``value``'s tile, for a dot about to read it: after a barrier
        if it was written since the last one."""
        if value in self.unpublished:
            self.barrier()
        self.read_tiles = self.read_tiles | {value}
        return self.resident[value]

    def control_state(self) -> tuple:
        """What the barriers ahead depend on, for control flow to save, ``restore``, ``join``."""
        return self.in_use, self.read_tiles, self.unpublished

    def restore(self, state: tuple):
        self.in_use, self.read_tiles, self.unpublished = state

    def join(self, states) -> None:
        """The state after control flow whose paths end in ``states``."""
        self.in_use = any(state[0] for state in states)
        self.read_tiles = frozenset().union(*(state[1] for state in states))
        self.unpublished = frozenset().union(*(state[2] for state in states))

    def enter_loop(self):
        """At a loop's header: the body's first scratch use, and the first write of a
        resident tile, may follow the previous trip's last reads."""
        self.in_use = self.in_use or self.buffer is not None
        if self.tiles.tiles:
            self.read_tiles = self.read_tiles | {EVERY_TILE}

    def begin_use(self):
        """Every user of the scratch buffer starts here: a barrier so that readers of the
        previous use are done, except for the first use, which has no predecessor."""
        if self.in_use:
            self.barrier()
        self.in_use = True

    def pointer(self, byte_offset, element_type):
        """A typed pointer ``byte_offset`` bytes into the scratch buffer (above the
        operand stages while a pipelined loop runs)."""
        if self.floor:
            byte_offset = self.builder.add(byte_offset, ir.Constant(I32, self.floor))
        return self.stage_pointer(byte_offset, element_type)

    def stage_pointer(self, byte_offset, element_type=I8):
        """A typed pointer ``byte_offset`` bytes into the scratch buffer itself."""
        address = self.builder.gep(self.buffer, [ir.Constant(I32, 0), byte_offset])
        return self.builder.bitcast(address, element_type.as_pointer(3))

    # -- layout conversion ------------------------------------------------------------
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
                _store_vector(b, [b.zext(reg, I8) if value.element.is_bool() else reg
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


def _store_vector(builder, registers, address, memory_type, element_bytes):
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


def _rows(shape) -> int:
    rows = 1
    for s in shape[:-1]:
        rows *= s
    return rows
