"""The kernel's shared-memory scratch buffer: its size, pointers into it, the barriers that
order its users, and layout conversions through it.

In: the kir function, its layout plan and the scratch sizes the op families registered
(``backend.registry.scratch``). Out: one dynamic ``extern .shared`` array sized for the
largest user, and the helpers every user goes through: ``begin_use`` (a barrier when an
earlier use may still be read), ``pointer`` (above a pipelined loop's operand stages while
that loop runs), ``stage_pointer`` (the stages themselves), ``barrier`` and ``convert`` (a
value from one layout to another, through padded rows so that reading down columns stays
free of bank conflicts; unpadded where only that fits the block's shared memory, as a
128x256 fp16 tile does in Turing's 64 KB: ``backend.shared_conversions``). Row-major
blocks' padding, addresses and vector accesses are ``backend.shared_rows``'.

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

from .llvm_types import I8, I32, cta_barrier
from .operand_tiles import ResidentTiles, plan_resident_tiles
from .registry import scratch_bytes_of
from .shared_conversions import ConversionBuffers
from .swizzle import SWIZZLE_ATOM_BYTES


# In ``read_tiles`` when any resident tile may have been read since the last barrier.
EVERY_TILE = "every resident tile"


class SharedMemory(ConversionBuffers):
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
