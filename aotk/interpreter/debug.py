"""Interpreter rules of ``debug_barrier``, ``device_print`` and ``device_assert``.

In: the op's operand arrays and the program's ids. Out: nothing; ``device_print`` writes the
lines the GPU's ``vprintf`` would (``pid (x, y, z) idx (i, j)<prefix><value>``, every
element in row-major order) to stdout; a failing ``device_assert`` raises ``AssertionError``
naming the kernel's file and line. Programs run one at a time, so a barrier does nothing.
"""
from __future__ import annotations

import numpy as np

from ..semantic.debug import index_widths
from .executor import register_op_rules


def format_value(value, element, hex_bits: bool) -> str:
    """One element as the device's printf formats it (%f, %i, %u, %p or 0x%0Nx)."""
    if element.is_ptr():
        return f"{int(value):#x}"
    if hex_bits:
        bits = int(value) & ((1 << element.bits) - 1)   # two's complement, as %x shows it
        return f"0x{bits:0{max(1, element.bits // 4)}x}"
    if element.is_floating():
        return f"{float(value):f}"
    return str(int(value))


def _device_print(ctx, op, *values):
    prefix, hex_bits = op.attrs["prefix"], op.attrs.get("hex", False)
    pid = "pid ({}, {}, {})".format(*ctx.pid)
    if not values:
        print(f"{pid}{prefix}", flush=True)
        return
    lines = []
    for number, (value, operand) in enumerate(zip(values, op.operands)):
        which = f"(operand {number}) " if len(values) > 1 else ""
        widths = index_widths(operand.type.shape)
        array = np.asarray(value)
        for index in np.ndindex(*array.shape):
            idx = ", ".join(f"{i:{w}d}" if w else str(i) for i, w in zip(index, widths))
            text = format_value(array[index], operand.element, hex_bits)
            lines.append(f"{pid} idx ({idx}){prefix}{which}{text}")
    print("\n".join(lines), flush=True)


def _device_assert(ctx, op, condition):
    condition = np.asarray(condition)
    if condition.all():
        return
    failing = tuple(int(i) for i in np.argwhere(~condition)[0]) if condition.ndim else ()
    filename, line = (op.loc[0], op.loc[1]) if op.loc else ("<unknown>", 0)
    where = f" at idx {failing}" if failing else ""
    raise AssertionError(f"{filename}:{line}: device assertion failed in "
                         f"{op.attrs['function']}, pid {tuple(ctx.pid)}{where}: "
                         f"{op.attrs['message']}")


register_op_rules({
    "debug_barrier": lambda ctx, op: None,
    "device_print": _device_print,
    "device_assert": _device_assert,
})
