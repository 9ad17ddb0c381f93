"""The lowering registry: which function lowers each kir op, and how much shared scratch
memory it needs.

In: registrations made by the op-family modules when they are imported (``backend.lower``
imports them all). Out: lookups by opcode for the driver and the scratch-buffer sizing.

Two kinds of lowering, named by what the function returns:

* ``@value_lowering("add", ...)``: ``fn(ctx, op, layout) -> [ir.Value]``, the registers of
  the op's one result in ``layout``. Values the layout pass gives a home are computed once
  there and converted to the other layouts they are wanted in; any other value is computed
  again in every layout it is wanted in (cheap index math, as in Triton).
* ``@lowering("store", ...)``: ``fn(ctx, op) -> [[ir.Value], ...]``, the registers of each
  of the op's results in its home layout (None for ops without results).

``@scratch("reduce", ...)``: ``fn(plan, op) -> int``, the bytes of the shared scratch
buffer the op's lowering uses (``backend.shared`` sizes the buffer for the largest).
"""
from __future__ import annotations

VALUE_LOWERINGS: dict = {}
OP_LOWERINGS: dict = {}
SCRATCH_SIZES: dict = {}


def _register(table: dict, taken, opcodes):
    """A decorator putting its function in ``table`` for each opcode not yet in ``taken``."""
    def decorate(function):
        for opcode in opcodes:
            if any(opcode in other for other in taken):
                raise AssertionError(f"{opcode!r} is registered twice")
            table[opcode] = function
        return function
    return decorate


def value_lowering(*opcodes):
    """Registers ``fn(ctx, op, layout) -> registers`` for ops with one result."""
    return _register(VALUE_LOWERINGS, (VALUE_LOWERINGS, OP_LOWERINGS), opcodes)


def lowering(*opcodes):
    """Registers ``fn(ctx, op) -> registers of each result`` (in their home layouts), or
    None for an op without results."""
    return _register(OP_LOWERINGS, (VALUE_LOWERINGS, OP_LOWERINGS), opcodes)


def scratch(*opcodes):
    """Registers ``fn(plan, op) -> bytes`` of shared scratch memory the op's lowering uses."""
    return _register(SCRATCH_SIZES, (SCRATCH_SIZES,), opcodes)


def scratch_bytes_of(plan, op) -> int:
    sizing = SCRATCH_SIZES.get(op.opcode)
    return sizing(plan, op) if sizing is not None else 0


def missing_lowering(opcode: str) -> NotImplementedError:
    return NotImplementedError(f"GPU backend: no lowering registered for kir op {opcode!r}")
