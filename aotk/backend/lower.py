"""gir -> LLVM IR: every block value becomes the registers one thread holds.

In: a kir ``Function``, its ``LayoutPlan`` and axis info. Out: an llvmlite ``ir.Module``
with one ``ptx_kernel`` function. For a value in a layout, each thread holds a list of
registers; register k stands for the element at a logical index computed from the thread
id (``Distribution``). Elementwise ops map register lists; ``broadcast``/``expand_dims`` only
re-index them; loads and stores go through ``memory`` in vectors; a load needed in two
layouts is converted through shared memory. ``for`` / ``if`` / ``while`` become basic blocks
with one phi per register of each carried value (carried values have one layout, see
``passes.layouts``). Thread geometry is computed once, in the entry block, so that it
dominates every use.
"""
from __future__ import annotations

import itertools

import llvmlite.ir as ir

from ..ir.kir import ASYNC_OPS, ATOMICS, COMBINING, SHUFFLES, SIDE_EFFECT_OPS, TERMINATORS
from ..passes.layouts import SCALAR, Layout, LayoutPlan
from ..passes.mma_layout import Mma
from .atomics import lower_atomic
from .debug import lower_debug_op
from .dot import lower_dot
from .llvm_types import I1, I32, I64, llvm_type
from .memory import emit_load, emit_store
from .mma import lower_mma
from .pipeline import ASYNC_LOWERING, plan_buffers
from .reduce import lower_reduce
from .scans import lower_scan
from .shared import SharedMemory
from .tma import tensor_map_parameters
from .views import lower_shuffle
from .wgmma import lower_wgmma, wait_for_wgmma


class Distribution:
    """Which logical indices a thread holds for a shape in a layout."""

    def __init__(self, lowering: "KernelLowering", layout: Layout, shape: tuple):
        self.layout = layout
        self.embedded = layout.embed(shape)
        # per parent axis: constant offset of each slot from the thread's base index
        self.slot_offsets = [layout.blocked.slot_offsets(axis, size)
                             for axis, size in enumerate(self.embedded)]
        self.counts = [len(o) for o in self.slot_offsets]
        self.lowering = lowering

    def axis_indices(self, axis: int) -> list:
        """LLVM i32 index of each slot along ``axis``."""
        size = self.embedded[axis]
        if size == 1:
            return [ir.Constant(I32, 0)] * self.counts[axis]
        b = self.lowering.builder
        base = self.lowering.thread_base(self.layout.blocked, axis)
        return [b.and_(b.add(base, ir.Constant(I32, c)), ir.Constant(I32, size - 1))
                for c in self.slot_offsets[axis]]

    def slots(self):
        """Multi-indices (per parent axis) of the registers, in register order."""
        return list(itertools.product(*(range(c) for c in self.counts)))

    def owner_predicate(self):
        """True on the one thread that owns each element (others hold replicas)."""
        b = self.lowering.builder
        blocked = self.layout.blocked
        predicate = None
        for axis, size in enumerate(self.embedded):
            if blocked.tile(axis) <= size:
                continue
            owns = b.icmp_unsigned("<", self.lowering.thread_base(blocked, axis), ir.Constant(I32, size))
            predicate = owns if predicate is None else b.and_(predicate, owns)
        return predicate


class KernelLowering(SharedMemory):
    def __init__(self, function, plan: LayoutPlan, infos: dict, target: str = "sm_90"):
        self.function = function
        self.target = target   # only where an instruction exists on some archs (bf16 atomics)
        self.plan = plan
        self.infos = infos
        self.module = ir.Module(name=function.name)
        self.module.triple = "nvptx64-nvidia-cuda"
        arg_types = [ir.PointerType(addrspace=1) if p.value.element.is_ptr()
                     else llvm_type(p.value.element) for p in function.params]
        # TMA tensor maps follow the params (by value: ``backend.tma.grid_constant_params``).
        arg_types += [ir.PointerType()] * len(function.tensor_maps)
        self.kernel = ir.Function(self.module, ir.FunctionType(ir.VoidType(), arg_types),
                                  name=function.name)
        self.kernel.calling_convention = "ptx_kernel"
        entry = self.kernel.append_basic_block("entry")
        self.builder = ir.IRBuilder(entry)
        self.registers: dict = {}
        self._bases: dict = {}
        self._distributions: dict = {}
        self._shared = None
        self._shared_used = False
        self.shared_bytes = 0
        # Pipelined loops' operand stages (passes.pipeline), and the bytes below which other
        # shared-memory users must stay out while such a loop runs.
        self.staged_buffers, self._pipeline_bytes, self.mbarrier_offsets = plan_buffers(function)
        self.shared_floor = 0
        b = self.builder
        self.tid = self._sreg("tid.x", "tid")
        self.lane = b.and_(self.tid, ir.Constant(I32, 31), name="lane")
        self.warp = b.lshr(self.tid, ir.Constant(I32, 5), name="warp")
        for param, arg in zip(function.params, self.kernel.args):
            arg.name = param.name
            value = b.ptrtoint(arg, I64, name=param.name + "_addr") if param.value.element.is_ptr() \
                else arg
            self.registers[(param.value, SCALAR)] = [value]
        tensor_map_parameters(self, len(function.params))
        # The entry block keeps thread geometry; the kernel body starts in the next block.
        body = self.kernel.append_basic_block("body")
        b.branch(body)
        self.prologue = ir.IRBuilder(entry)
        self.prologue.position_before(entry.terminator)
        b.position_at_end(body)

    # -- thread geometry ---------------------------------------------------------------
    def _sreg(self, register: str, name: str):
        fn = self.module.globals.get(f"llvm.nvvm.read.ptx.sreg.{register}")
        if fn is None:
            fn = ir.Function(self.module, ir.FunctionType(I32, []),
                             name=f"llvm.nvvm.read.ptx.sreg.{register}")
        return self.builder.call(fn, [], name=name)

    def thread_base(self, parent, axis: int):
        """First index along ``axis`` of this thread's elements in a parent layout (blocked
        or mma), computed once in the entry block so that it dominates every use."""
        key = (parent, axis)
        if key not in self._bases:
            self._bases[key] = parent.thread_base(self.prologue, self.lane, self.warp, axis)
        return self._bases[key]

    def distribution(self, layout: Layout, shape: tuple) -> Distribution:
        key = (layout, shape)
        if key not in self._distributions:
            self._distributions[key] = Distribution(self, layout, shape)
        return self._distributions[key]

    def count(self, value, layout) -> int:
        if layout is SCALAR:
            return 1
        return len(self.distribution(layout, value.type.shape).slots())

    # -- driver ------------------------------------------------------------------------
    def lower(self) -> ir.Module:
        self._allocate_shared()
        self._lower_ops(self.function.body)
        self.builder.ret_void()
        return self.module

    def _lower_ops(self, ops):
        for op in ops:
            self.builder.comment = None
            if op.opcode == "store":
                self._lower_store(op)
                continue
            if op.opcode in ASYNC_OPS:
                ASYNC_LOWERING[op.opcode](self, op)
                continue
            if op.opcode in SIDE_EFFECT_OPS:
                # Lowered whether or not the result is used; old values come back in the
                # natural layout, their home.
                registers = (lower_atomic if op.opcode in ATOMICS else lower_debug_op)(self, op)
                if op.result is not None and op.result in self.plan.demands:
                    self._define(op.result, registers)
                continue
            if op.opcode in COMBINING:
                # Reductions and scans, with a named combine or a combine region: one
                # result per operand, each at home in the layout the lowering returns.
                if any(result in self.plan.demands for result in op.results):
                    lowered = (lower_scan if op.opcode == "scan" else lower_reduce)(self, op)
                    for value, registers in zip(op.results, lowered):
                        self._define(value, registers)
                continue
            if op.regions:
                getattr(self, "_lower_" + op.opcode)(op)
                continue
            if op.result is None or op.result not in self.plan.demands:
                continue
            layouts = self.plan.demands[op.result]
            if op.result in self.plan.homes:
                home = self.plan.homes[op.result]
                if op.opcode == "load":
                    registers = self._lower_load(op, home)
                elif op.opcode in SHUFFLES:
                    registers = lower_shuffle(self, op)
                elif op.opcode == "dot":
                    registers = self._lower_dot(op)
                else:   # an accumulator epilogue op, kept in the mma layout (passes.layouts)
                    registers = self._lower_op(op, home)
                self._define(op.result, registers)
                continue
            for layout in layouts:
                self.registers[(op.result, layout)] = self._lower_op(op, layout)

    def _lower_dot(self, op) -> list:
        layout = self.plan.mma.get(op)
        if layout is None:
            return lower_dot(self, op)
        return lower_wgmma(self, op) if layout.instruction == "wgmma" else lower_mma(self, op)

    def _define(self, value, registers):
        """Binds a value computed in its home layout, then converts it to every other layout
        it is demanded in."""
        home = self.plan.homes[value]
        self.registers[(value, home)] = registers
        for other in self.plan.demands.get(value, [home]):
            if other != home:
                self.registers[(value, other)] = self._convert(value, home, other)

    # -- structured control flow -------------------------------------------------------
    def natural_layout(self, value):
        """The layout of ``value``'s rank that stores and region boundaries use."""
        return self.plan.natural(value)

    def owner(self, value, layout):
        """True on the one thread that owns each element of ``value`` (None: every thread)."""
        if layout is SCALAR:
            return self.builder.icmp_unsigned("==", self.tid, ir.Constant(I32, 0))
        return self.distribution(layout, value.type.shape).owner_predicate()

    def _natural_registers(self, value):
        """Registers of ``value`` in its rank's natural layout: the one values crossing a
        region boundary use."""
        return self.regs(value, self.plan.natural(value))

    def _lower_region(self, region, arg_registers, layouts=None) -> list:
        """Lowers a region at the current block; returns its terminator's operands, in
        ``layouts`` (default: their natural layouts)."""
        for value, registers in zip(region.args, arg_registers):
            self._define(value, registers)
        self._lower_ops(region.body[:-1])
        assert region.terminator.opcode in TERMINATORS
        operands = region.terminator.operands
        if layouts is None:
            return [self._natural_registers(v) for v in operands]
        return [self.regs(v, layout) for v, layout in zip(operands, layouts)]

    def _phis(self, incoming, block):
        phis = [[self.builder.phi(r.type) for r in registers] for registers in incoming]
        self._add_incoming(phis, incoming, block)
        return phis

    @staticmethod
    def _add_incoming(phis, incoming, block):
        for phi_list, registers in zip(phis, incoming):
            for phi, register in zip(phi_list, registers):
                phi.add_incoming(register, block)

    def _enter_loop(self, kind: str, op, incoming):
        """Branches to a new header block holding one phi per incoming register; returns the
        phis and the (not yet entered) body and exit blocks."""
        b = self.builder
        header, body, exit_block = (self.kernel.append_basic_block(f"{kind}.{part}")
                                    for part in ("header", "body", "exit"))
        preheader = b.block
        b.branch(header)
        b.position_at_end(header)
        phis = self._phis(incoming, preheader)
        # The body's first shared-memory use may follow the previous trip's last one: it
        # needs a barrier (a body without shared memory pays nothing for this).
        self._shared_used = self._shared_used or self._shared is not None
        return phis, body, exit_block

    def _lower_for(self, op):
        b = self.builder
        start, end, step = (self.regs(v, SCALAR)[0] for v in op.operands[:3])
        # Carried values keep their block argument's layout (a dot accumulator: mma).
        layouts = [self.plan.homes[a] for a in op.regions[0].args[1:]]
        inits = [self.regs(v, layout) for v, layout in zip(op.operands[3:], layouts)]
        direction = op.attrs["direction"]
        in_flight = op.attrs.get("wgmma_in_flight")

        def keep_going(value):
            going_up = b.icmp_signed("<", value, end)
            going_down = b.icmp_signed(">", value, end)
            if direction == "up":
                return going_up
            if direction == "down":
                return going_down
            positive = b.icmp_signed(">", step, ir.Constant(step.type, 0))
            return b.select(positive, going_up, going_down)

        if in_flight:
            # Tested before the first trip and after each (see the drain below).
            guard = b.block
            entry = self.kernel.append_basic_block("for.enter")
            skipped = keep_going(start)
            b.position_at_end(entry)
        ((induction,), *carried), body, exit_block = self._enter_loop("for", op, [[start]] + inits)
        header = b.block
        if in_flight:
            with b.goto_block(guard):   # the exit block exists now
                b.cbranch(skipped, entry, exit_block)
            b.branch(body)
        else:
            b.cbranch(keep_going(induction), body, exit_block)
        b.position_at_end(body)
        floor = self.shared_floor
        if op.attrs.get("pipeline") is not None:
            # The operand stages stay live for the whole loop: other users go above them.
            self.shared_floor = self._pipeline_bytes[op.attrs["pipeline"]]
        yielded = self._lower_region(op.regions[0], [[induction]] + carried, layouts)
        self.shared_floor = floor
        latch = b.block
        next_induction = b.add(induction, step)
        self._add_incoming([[induction]] + carried, [[next_induction]] + yielded, latch)
        if not in_flight:
            b.branch(header)
            b.position_at_end(exit_block)
            results = carried
        else:
            # The last trip's wgmma may still be writing the accumulators: the latch leaves
            # through a block that waits for it. The wait must come first after the loop
            # (ptxas serializes every wgmma when other instructions run before it), so it
            # is not in the exit block, where LLVM sinks the code that follows the loop.
            drain = self.kernel.append_basic_block("for.drain")
            b.cbranch(keep_going(next_induction), header, drain)
            b.position_at_end(drain)
            drained = [wait_for_wgmma(b, registers, 0)
                       if isinstance(getattr(layout, "blocked", None), Mma) else registers
                       for registers, layout in zip(yielded, layouts)]
            b.branch(exit_block)
            b.position_at_end(exit_block)
            results = self._phis(inits, guard)
            self._add_incoming(results, drained, drain)
        for value, registers in zip(op.results, results):
            self._define(value, registers)

    def _lower_if(self, op):
        b = self.builder
        (condition,) = self.regs(op.operands[0], SCALAR)
        blocks = [self.kernel.append_basic_block(name) for name in ("if.then", "if.else")]
        merge = self.kernel.append_basic_block("if.end")
        b.cbranch(condition, *blocks)
        shared_before, shared_after, incoming = self._shared_used, False, []
        for region, block in zip(op.regions, blocks):
            b.position_at_end(block)
            self._shared_used = shared_before
            yielded = self._lower_region(region, [])
            shared_after = shared_after or self._shared_used
            incoming.append((yielded, b.block))
            b.branch(merge)
        self._shared_used = shared_after
        b.position_at_end(merge)
        (then_values, then_block), (else_values, else_block) = incoming
        phis = self._phis(then_values, then_block)
        self._add_incoming(phis, else_values, else_block)
        for value, registers in zip(op.results, phis):
            self._define(value, registers)

    def _lower_while(self, op):
        b = self.builder
        inits = [self._natural_registers(v) for v in op.operands]
        carried, body, exit_block = self._enter_loop("while", op, inits)
        before = b.block
        (condition,), *forwarded = self._lower_region(op.regions[0], carried)
        b.cbranch(condition, body, exit_block)
        b.position_at_end(body)
        yielded = self._lower_region(op.regions[1], forwarded)
        self._add_incoming(carried, yielded, b.block)
        b.branch(before)
        b.position_at_end(exit_block)
        for value, registers in zip(op.results, forwarded):
            self._define(value, registers)

    def regs(self, value, layout):
        return self.registers[(value, layout)]

    # -- ops ---------------------------------------------------------------------------
    def _lower_op(self, op, layout):
        from .arith import lower_elementwise
        kind = op.opcode
        result = op.result
        b = self.builder
        if kind in ("program_id", "num_programs"):
            register = ("ctaid." if kind == "program_id" else "nctaid.") + "xyz"[op.attrs["axis"]]
            return [self._sreg(register, kind)]
        if kind == "constant":
            value = _llvm_constant(result.element, op.attrs["value"])
            return [value] * self.count(result, layout)
        if kind == "arange":
            if layout is SCALAR:
                raise AssertionError("arange is a block")
            dist = self.distribution(layout, result.type.shape)
            axis = layout.parent_axis(0)
            indices = dist.axis_indices(axis)
            start = op.attrs["start"]
            return [b.add(indices[slot[axis]], ir.Constant(I32, start)) if start else indices[slot[axis]]
                    for slot in dist.slots()]
        if kind == "splat":
            (scalar,) = self.regs(op.operands[0], SCALAR)
            return [scalar] * self.count(result, layout)
        if kind == "expand_dims":
            source_layout = Layout(layout.blocked, tuple(sorted(
                layout.sliced + (layout.parent_axis(op.attrs["axis"]),))))
            return self.regs(op.operands[0], source_layout)
        if kind == "broadcast":
            return self._broadcast(op, layout)
        if kind == "hint":
            return self.regs(op.operands[0], layout)
        operand_regs = [self.regs(v, layout) for v in op.operands]
        return [lower_elementwise(self, op, [regs[i] for regs in operand_regs])
                for i in range(len(operand_regs[0]))]

    def _broadcast(self, op, layout):
        source = op.operands[0]
        src_regs = self.regs(source, layout)
        src_dist = self.distribution(layout, source.type.shape)
        dst_dist = self.distribution(layout, op.result.type.shape)
        src_index = {slot: i for i, slot in enumerate(src_dist.slots())}
        out = []
        for slot in dst_dist.slots():
            mapped = tuple(0 if src_dist.embedded[a] == 1 else k for a, k in enumerate(slot))
            out.append(src_regs[src_index[mapped]])
        return out

    # -- memory ------------------------------------------------------------------------
    def _vector_groups(self, op, layout, count):
        """Register indices grouped into vector accesses along the fastest dimension."""
        width = self.plan.vector_width.get(op, 1)
        if layout is SCALAR:
            return [[0]]
        dist = self.distribution(layout, op.operands[0].type.shape)
        fastest = layout.blocked.order[0]
        rank = len(op.operands[0].type.shape)
        if layout.parent_axis(rank - 1) != fastest:
            width = 1
        width = min(width, min(layout.blocked.size_per_thread[fastest], dist.embedded[fastest]))
        return [list(range(i, i + width)) for i in range(0, count, width)]

    def _lower_load(self, op, layout):
        pointers = self.regs(op.operands[0], layout)
        has_mask, has_other = op.attrs.get("has_mask"), op.attrs.get("has_other")
        masks = self.regs(op.operands[1], layout) if has_mask else None
        element = op.result.element
        if has_other:
            others = self.regs(op.operands[2], layout)
        else:
            others = [_llvm_constant(element, 0)] * len(pointers)
        out = []
        for group in self._vector_groups(op, layout, len(pointers)):
            out += emit_load(self.builder, pointers[group[0]],
                             masks[group[0]] if masks is not None else None, element, len(group),
                             [others[i] for i in group], op.attrs.get("cache", ""),
                             op.attrs.get("eviction", ""), op.attrs.get("volatile", False))
        return out

    def _lower_store(self, op):
        pointer = op.operands[0]
        # Stores anchor the natural layout of their rank (see passes.layouts).
        layout = SCALAR if not pointer.type.shape else Layout(self.plan.blocked_by_rank[
            len(pointer.type.shape)])
        pointers = self.regs(pointer, layout)
        values = self.regs(op.operands[1], layout)
        masks = self.regs(op.operands[2], layout) if op.attrs.get("has_mask") else None
        b = self.builder
        if layout is SCALAR:
            owner = b.icmp_unsigned("==", self.tid, ir.Constant(I32, 0))
        else:
            owner = self.distribution(layout, pointer.type.shape).owner_predicate()
        element = pointer.element.element_ty
        for group in self._vector_groups(op, layout, len(pointers)):
            predicate = masks[group[0]] if masks is not None else None
            if owner is not None:
                predicate = owner if predicate is None else b.and_(predicate, owner)
            emit_store(b, pointers[group[0]], predicate, element, [values[i] for i in group],
                       op.attrs.get("cache", ""), op.attrs.get("eviction", ""))


def _llvm_constant(element, value):
    ty = llvm_type(element)
    if element.is_floating():
        return ir.Constant(ty, float(value))
    if element.is_bool():
        return ir.Constant(I1, int(bool(value)))
    return ir.Constant(ty, int(value) & ((1 << element.bits) - 1) if not element.is_ptr() else int(value))


def lower_to_llvm(function, plan: LayoutPlan, infos: dict, target: str = "sm_90") -> tuple:
    lowering = KernelLowering(function, plan, infos, target)
    module = lowering.lower()
    return module, lowering.shared_bytes

