"""The kernel's shared-memory scratch buffer: its size, pointers into it, the barriers that
order its users, and layout conversions through it.

In: the ``KernelLowering`` this mixes into (its function, plan, builder and registers).
Out: one dynamic ``extern .shared`` array sized for the largest user, and the helpers every
user goes through: ``begin_shared_use`` (a barrier when an earlier use may still be read),
``shared_pointer`` (above a pipelined loop's operand stages while that loop runs),
``pipeline_pointer`` (the stages themselves), ``barrier`` and ``_convert`` (a value from one
layout to another, through rows padded so that reading down columns stays conflict-free).

Each use (a layout conversion, a reduction's cross-warp step, a scan's, a shuffle, a dot's
operands, an atomic's result broadcast) is live only from its first store to its last load,
and no two uses overlap in time; so one buffer of the largest use's size is exactly what
allocating by liveness gives. A pipelined loop's stages are the exception: live for the
whole loop, they sit below every other use inside it.
"""
from __future__ import annotations

import llvmlite.ir as ir

from ..ir.kir import ATOMICS, COMBINING, SHUFFLES, walk
from .atomics import shared_bytes_needed as atomic_bytes_needed
from .dot import shared_bytes_needed as dot_bytes_needed
from .llvm_types import I8, I32, llvm_type
from .mma import shared_bytes_needed as mma_bytes_needed
from .reduce import shared_bytes_needed as reduce_bytes_needed
from .scans import shared_bytes_needed as scan_bytes_needed
from .views import padded_bytes, row_major_index, row_padding
from .views import shared_bytes_needed as shuffle_bytes_needed
from .wgmma import SWIZZLE_ATOM_BYTES
from .wgmma import shared_bytes_needed as wgmma_bytes_needed


class SharedMemory:
    """Mixed into ``KernelLowering``: needs ``function``, ``plan``, ``module``, ``builder``,
    ``regs``/``distribution``, and ``_pipeline_bytes`` (bytes of each pipelined loop's
    stages, from ``backend.pipeline.plan_buffers``)."""

    def _shared_bytes_of(self, ops) -> int:
        """The largest scratch use among ``ops`` (nested ones included)."""
        plan = self.plan
        needed = 0
        for op in walk(ops):
            if op.opcode in COMBINING and any(r in plan.demands for r in op.results):
                blocked = plan.blocked_by_rank[len(op.operands[0].type.shape)]
                sizing = scan_bytes_needed if op.opcode == "scan" else reduce_bytes_needed
                needed = max(needed, sizing(op, blocked))
            if op.opcode in SHUFFLES and op.result in plan.demands:
                needed = max(needed, shuffle_bytes_needed(op))
            if op.opcode == "dot" and op.result in plan.demands:
                layout = plan.mma.get(op)
                sizing = dot_bytes_needed if layout is None else (
                    wgmma_bytes_needed if layout.instruction == "wgmma" else mma_bytes_needed)
                needed = max(needed, sizing(op))
            if op.opcode in ATOMICS:
                needed = max(needed, atomic_bytes_needed(op, plan))
            # Values computed in one layout (their home) and wanted in others: results,
            # and block arguments (a carried value needed outside its layout).
            values = list(op.results) + [a for region in op.regions for a in region.args]
            for value in values:
                home = plan.homes.get(value)
                if home is not None and any(lay != home for lay in plan.demands[value]):
                    needed = max(needed, padded_bytes(value.type.shape, value.element))
        return needed

    def _allocate_shared(self):
        """Declares the scratch buffer, sized for the largest user (see the module's text)."""
        needed = self._shared_bytes_of(self.function.body)
        for op in walk(self.function.body):
            if op.opcode == "for" and op.attrs.get("pipeline") is not None:
                needed = max(needed, self._pipeline_bytes[op.attrs["pipeline"]] +
                             self._shared_bytes_of(op.regions[0].body))
        if needed:
            # Dynamic shared memory (`extern .shared`): the launch passes its size, so a
            # kernel may use more than the 48 KB a static allocation is limited to.
            array = ir.ArrayType(I8, 0)
            self._shared = ir.GlobalVariable(self.module, array, "shared_scratch", addrspace=3)
            self._shared.linkage = "external"
            # wgmma's swizzled tiles start on 1024-byte swizzle atoms (backend.wgmma).
            self._shared.align = SWIZZLE_ATOM_BYTES if self.plan.uses_wgmma else 16
            self.shared_bytes = needed

    def barrier(self):
        asm = ir.InlineAsm(ir.FunctionType(ir.VoidType(), []), "bar.sync 0;", "", side_effect=True)
        self.builder.call(asm, [])

    def begin_shared_use(self):
        """Every user of the scratch buffer starts here: a barrier so that readers of the
        previous use are done, except for the first use, which has no predecessor."""
        if self._shared_used:
            self.barrier()
        self._shared_used = True

    def shared_pointer(self, byte_offset, element_type):
        """A typed pointer ``byte_offset`` bytes into the scratch buffer (above the
        operand stages while a pipelined loop runs)."""
        if self.shared_floor:
            byte_offset = self.builder.add(byte_offset, ir.Constant(I32, self.shared_floor))
        return self.pipeline_pointer(byte_offset, element_type)

    def pipeline_pointer(self, byte_offset, element_type=I8):
        """A typed pointer ``byte_offset`` bytes into the scratch buffer itself."""
        address = self.builder.gep(self._shared, [ir.Constant(I32, 0), byte_offset])
        return self.builder.bitcast(address, element_type.as_pointer(3))

    # -- layout conversion through shared memory ---------------------------------------
    def _shared_address(self, value, layout, slot_indices, dist):
        b = self.builder
        shape = value.type.shape
        indices = [slot_indices[layout.parent_axis(dim)] for dim in range(len(shape))]
        # Padded rows, as for shuffles: a conversion that reads down columns stays
        # free of bank conflicts.
        linear = row_major_index(b, indices, shape, row_padding(shape, value.element))
        memory_type = I8 if value.element.is_bool() else llvm_type(value.element)
        byte = b.mul(linear, ir.Constant(I32, max(1, value.element.itemsize)))
        return self.shared_pointer(byte, memory_type), memory_type

    def _convert(self, value, source, target):
        b = self.builder
        src_dist = self.distribution(source, value.type.shape)
        dst_dist = self.distribution(target, value.type.shape)
        src_regs = self.regs(value, source)
        src_axes = [src_dist.axis_indices(a) for a in range(len(src_dist.embedded))]
        dst_axes = [dst_dist.axis_indices(a) for a in range(len(dst_dist.embedded))]
        self.begin_shared_use()
        for reg, slot in zip(src_regs, src_dist.slots()):
            indices = [src_axes[a][k] for a, k in enumerate(slot)]
            address, memory_type = self._shared_address(value, source, indices, src_dist)
            stored = b.zext(reg, I8) if value.element.is_bool() else reg
            b.store(stored, address)
        self.barrier()
        out = []
        for slot in dst_dist.slots():
            indices = [dst_axes[a][k] for a, k in enumerate(slot)]
            address, memory_type = self._shared_address(value, target, indices, dst_dist)
            loaded = b.load(address, typ=memory_type)
            out.append(b.icmp_unsigned("!=", loaded, ir.Constant(I8, 0))
                       if value.element.is_bool() else loaded)
        return out
