"""``debug_barrier``, ``device_print`` and ``device_assert`` -> LLVM IR.

In: the op, its operands' registers in their natural layouts. Out: nothing (side effects).

- ``debug_barrier``: ``bar.sync 0``.
- ``device_print``: one ``vprintf`` per element, from the thread owning it (replicas stay
  quiet, so each element prints once), with Triton's line:
  ``pid (x, y, z) idx (i, j)<prefix>[(operand n) ]<value>``. C varargs rules apply to the
  argument buffer: floats travel as double, integers narrower than 32 bits as int.
- ``device_assert`` (present only in debug builds): a thread with any false element calls
  ``__assertfail`` (CUDA's device assert: message, file, line, function, char size), then
  every thread meets at a barrier so nothing after the assert runs before it fired.
``vprintf`` and ``__assertfail`` are system calls ptxas resolves itself.
"""
from __future__ import annotations

import llvmlite.ir as ir

from ..semantic.debug import index_widths
from .llvm_types import I8, I32, I64, declare_function
from .geometry import special_register
from .registry import lowering

GENERIC_POINTER = ir.PointerType()


def _string(ctx, text: str, stem: str):
    """A NUL-terminated constant in global memory, as a generic pointer."""
    data = bytearray(text.encode("ascii", "backslashreplace") + b"\0")
    module = ctx.module
    name = f"{stem}_{sum(1 for g in module.global_values if g.name.startswith(stem))}"
    array = ir.ArrayType(I8, len(data))
    variable = ir.GlobalVariable(module, array, name, addrspace=1)
    variable.global_constant = True
    variable.linkage = "internal"
    variable.initializer = ir.Constant(array, data)
    return ctx.builder.addrspacecast(variable, GENERIC_POINTER)


def _format(element, hex_bits: bool) -> str:
    if element.is_ptr():
        return "%p"
    if hex_bits:
        return f"0x%0{max(1, element.bits // 4)}{'ll' if element.bits > 32 else ''}x"
    if element.is_floating():
        return "%f"
    signed = element.is_int_signed()
    return ("%lli" if signed else "%llu") if element.bits == 64 else ("%i" if signed else "%u")


def _vararg(builder, register, element, hex_bits: bool):
    """A value as C varargs pass it (hex shows only the element's own bits)."""
    if element.is_floating():
        return register if element.bits == 64 else builder.fpext(register, ir.DoubleType())
    if element.bits < 32:
        extend = builder.sext if element.is_int_signed() and not hex_bits else builder.zext
        return extend(register, I32)
    return register


def _vprintf(ctx, format_pointer, arguments):
    b = ctx.builder
    vprintf = declare_function(ctx.module, "vprintf", I32, [GENERIC_POINTER, GENERIC_POINTER])
    buffer_type = ir.LiteralStructType([a.type for a in arguments])
    # One buffer per argument layout, reused by every call: the stack frame stays small.
    buffer = ctx.entry_alloca(buffer_type, "printf_args")
    for index, argument in enumerate(arguments):
        slot = b.gep(buffer, [ir.Constant(I32, 0), ir.Constant(I32, index)], inbounds=True)
        b.store(argument, slot)
    b.call(vprintf, [format_pointer, b.addrspacecast(buffer, GENERIC_POINTER)
                     if buffer.type.addrspace else buffer])


def _guarded(ctx, predicate, emit):
    if predicate is None:
        emit()
        return
    with ctx.builder.if_then(predicate):
        emit()


@lowering("device_print")
def lower_print(ctx, op):
    b = ctx.builder
    prefix, hex_bits = op.attrs["prefix"], op.attrs.get("hex", False)
    pids = [special_register(b, f"ctaid.{axis}", f"pid_{axis}") for axis in "xyz"]
    if not op.operands:
        owner = b.icmp_unsigned("==", ctx.threads.tid, ir.Constant(I32, 0))
        text = "pid (%u, %u, %u)" + prefix.replace("%", "%%") + "\n"
        _guarded(ctx, owner,
                 lambda: _vprintf(ctx, _string(ctx, text, "printf_format"), pids))
        return
    for number, value in enumerate(op.operands):
        layout = ctx.plan.natural(value)
        registers = ctx.regs(value, layout)
        indices = ctx.threads.logical_indices(value, layout)
        which = f"(operand {number}) " if len(op.operands) > 1 else ""
        index_text = ", ".join(f"%{w}u" for w in index_widths(value.type.shape))
        text = (f"pid (%u, %u, %u) idx ({index_text}){prefix.replace('%', '%%')}{which}"
                f"{_format(value.element, hex_bits)}\n")
        element = value.element

        def emit(registers=registers, indices=indices, text=text, element=element):
            format_pointer = _string(ctx, text, "printf_format")
            for register, index in zip(registers, indices):
                _vprintf(ctx, format_pointer,
                         pids + list(index) + [_vararg(b, register, element, hex_bits)])
        _guarded(ctx, ctx.threads.owner(value, layout), emit)


@lowering("device_assert")
def lower_assert(ctx, op):
    b = ctx.builder
    (condition,) = op.operands
    registers = ctx.regs(condition, ctx.plan.natural(condition))
    failed = None
    for register in registers:
        bad = b.not_(register)
        failed = bad if failed is None else b.or_(failed, bad)
    filename, line = (op.loc[0], op.loc[1]) if op.loc else ("<unknown>", 0)
    assertfail = declare_function(ctx.module, "__assertfail", ir.VoidType(),
                          [GENERIC_POINTER, GENERIC_POINTER, I32, GENERIC_POINTER, I64])

    def emit():
        b.call(assertfail, [_string(ctx, op.attrs["message"], "assert_message"),
                            _string(ctx, filename, "assert_file"), ir.Constant(I32, line),
                            _string(ctx, op.attrs["function"], "assert_function"),
                            ir.Constant(I64, 1)])
    _guarded(ctx, failed, emit)
    ctx.shared.barrier()


@lowering("debug_barrier")
def lower_debug_barrier(ctx, op):
    ctx.shared.barrier()
