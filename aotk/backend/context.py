"""What a lowering rule works with: the one public object every ``backend`` op family gets.

In: built by ``backend.lower`` for one kernel. Out, to each rule (``backend.registry``):

* the kernel being built: ``function`` (kir), ``plan`` (layouts), ``infos`` (axis info),
  ``target``, ``module``, ``kernel`` (the LLVM function), ``builder`` (at the current
  point), ``prologue`` (a builder in the entry block: values that must dominate every use);
* ``threads`` (``backend.geometry``: tid / lane / warp, distributions, owners) and
  ``shared`` (``backend.shared``: the scratch buffer, barriers, layout conversions);
* the registers of every lowered value per layout (``regs``, ``bind``, ``define``);
* ``lower_region``, for rules that own regions (control flow, combine functions);
* the pipelined loops' stages and the kernel's tensor-map arguments (``backend.pipeline``,
  ``backend.tma``).
"""
from __future__ import annotations

from ..ir.kir import TERMINATORS
from . import operand_tiles, warp_conversions


class LoweringContext:
    def __init__(self, function, plan, infos, target, module, kernel, builder, threads,
                 shared, pipeline, lower_ops):
        self.function = function
        self.plan = plan
        self.infos = infos
        self.target = target   # only where an instruction exists on some archs (``aotk.targets``)
        self.module = module
        self.kernel = kernel
        self.builder = builder
        self.threads = threads
        self.shared = shared
        # backend.pipeline.PipelineBuffers: operand stages and mbarriers of pipelined loops.
        self.pipeline = pipeline
        # Generic addresses (i64) of the kernel's TMA tensor-map arguments, in order.
        self.tensor_map_addresses: list = []
        self.lower_ops = lower_ops
        # Float add / sub / mul carry LLVM's contract flag: a * b + c may become an FMA.
        self.float_flags = ("contract",)
        self._registers: dict = {}
        self._entry_allocas: dict = {}
        # Values a helper derives from registers, keyed by what they are derived from and
        # the basic block they were built in, where a later use in that block reuses them
        # (an operand's register fragments, built once for the dots that share it).
        self.derived: dict = {}
        # ids of instructions that keep their place (reduction trees, whose order
        # ``backend.reduce`` chose), and of those whose inputs are computed just before them
        # (``backend.sink_to_use``).
        self.placed_in_order: set = set()
        self.inputs_sunk_to: set = set()
        # The fragments the last tensor-core dot read from resident tiles, per operand:
        # (block, tile value, how it is read, shape) and {kk: registers}; the next dot
        # reading the same tile the same way in that block takes them (``backend.mma``).
        self.last_tile_fragments: list = [None, None]
        self._value_users = None

    def value_users(self) -> dict:
        """kir value -> the ops of the kernel (nested ones included) that take it."""
        if self._value_users is None:
            from ..passes.rewrite import users_of
            self._value_users = users_of(self.function.body)
        return self._value_users

    @property
    def prologue(self):
        """A builder at the end of the entry block, for values that must dominate every use."""
        return self.threads.prologue

    def emitted_in_order(self, emit, sink_inputs: bool = False):
        """``emit()``'s result; the instructions it appended to the current block keep
        their places (``placed_in_order``) and, with ``sink_inputs``, what they take is
        computed just before them (``inputs_sunk_to``)."""
        block = self.builder.block
        before = len(block.instructions)
        result = emit()
        if self.builder.block is not block:
            return result   # branched (a combine with control flow): nothing is moved
        emitted = {id(i) for i in block.instructions[before:]}
        self.placed_in_order |= emitted
        if sink_inputs:
            self.inputs_sunk_to |= emitted
        return result

    # -- registers of lowered values ---------------------------------------------------
    def regs(self, value, layout) -> list:
        """The registers of ``value`` in ``layout`` (lowered earlier)."""
        return self._registers[(value, layout)]

    def bind(self, value, layout, registers):
        self._registers[(value, layout)] = registers

    def define(self, value, registers):
        """Binds a value computed in its home layout, then converts it to every other layout
        it is demanded in."""
        home = self.plan.homes[value]
        self._registers[(value, home)] = registers
        others = []
        for other in self.plan.demands.get(value, [home]):
            if other == home:
                continue
            if warp_conversions.convertible(value, home, other):
                self._registers[(value, other)] = warp_conversions.convert(
                    self, value, registers, home, other)
            else:
                others.append(other)
        if others:
            for other, converted in self.shared.convert_to(value, registers, home,
                                                           others).items():
                self._registers[(value, other)] = converted
        self.store_resident(value)

    def store_resident(self, value):
        """Once ``value``'s registers are bound in every layout it is wanted in: its tile
        if dots read it from one of its own (``backend.operand_tiles``)."""
        tile = self.shared.tiles.of_value.get(value)
        if tile is not None:
            operand_tiles.store(self, tile)

    def natural_registers(self, value) -> list:
        """Registers of ``value`` in its rank's natural layout: the one values crossing a
        region boundary use."""
        return self.regs(value, self.plan.natural(value))

    def operand_layout(self, value, layout):
        """``layout`` if the plan has ``value`` there, else its home (where an op's rule
        asked for a layout that an accumulator epilogue overrode)."""
        layouts = self.plan.demands.get(value, [])
        return layout if layout in layouts or not layouts else layouts[0]

    # -- regions ----------------------------------------------------------------------
    def lower_region(self, region, arg_registers, layouts=None) -> list:
        """Lowers a region at the current block; returns its terminator's operands, in
        ``layouts`` (default: their natural layouts)."""
        with self.shared.region(region.body):
            for value, registers in zip(region.args, arg_registers):
                self.define(value, registers)
            self.lower_ops(region.body[:-1])
            assert region.terminator.opcode in TERMINATORS
            operands = region.terminator.operands
            if layouts is None:
                return [self.natural_registers(v) for v in operands]
            return [self.regs(v, layout) for v, layout in zip(operands, layouts)]

    # -- helpers several families share -----------------------------------------------
    def entry_alloca(self, llvm_type, name: str):
        """One stack slot of ``llvm_type`` per name, in the entry block, shared by every use
        (the stack frame stays small however many ops need scratch registers)."""
        key = (llvm_type, name)
        if key not in self._entry_allocas:
            self._entry_allocas[key] = self.prologue.alloca(llvm_type, name=name)
        return self._entry_allocas[key]
