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
from .llvm_types import I8, I32, I64
from .views import logical_indices

GENERIC_POINTER = ir.PointerType()


def _declare(module, name, return_type, argument_types):
    function = module.globals.get(name)
    if function is None:
        function = ir.Function(module, ir.FunctionType(return_type, argument_types), name=name)
    return function


def _string(lowering, text: str, stem: str):
    """A NUL-terminated constant in global memory, as a generic pointer."""
    data = bytearray(text.encode("ascii", "backslashreplace") + b"\0")
    module = lowering.module
    name = f"{stem}_{sum(1 for g in module.global_values if g.name.startswith(stem))}"
    array = ir.ArrayType(I8, len(data))
    variable = ir.GlobalVariable(module, array, name, addrspace=1)
    variable.global_constant = True
    variable.linkage = "internal"
    variable.initializer = ir.Constant(array, data)
    return lowering.builder.addrspacecast(variable, GENERIC_POINTER)


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


def _vprintf(lowering, format_pointer, arguments):
    b = lowering.builder
    vprintf = _declare(lowering.module, "vprintf", I32, [GENERIC_POINTER, GENERIC_POINTER])
    buffer_type = ir.LiteralStructType([a.type for a in arguments])
    # One buffer per argument layout, reused by every call: the stack frame stays small.
    buffers = lowering.__dict__.setdefault("printf_buffers", {})
    if buffer_type not in buffers:
        buffers[buffer_type] = lowering.prologue.alloca(buffer_type, name="printf_args")
    buffer = buffers[buffer_type]
    for index, argument in enumerate(arguments):
        slot = b.gep(buffer, [ir.Constant(I32, 0), ir.Constant(I32, index)], inbounds=True)
        b.store(argument, slot)
    b.call(vprintf, [format_pointer, b.addrspacecast(buffer, GENERIC_POINTER)
                     if buffer.type.addrspace else buffer])


def _guarded(lowering, predicate, emit):
    if predicate is None:
        emit()
        return
    with lowering.builder.if_then(predicate):
        emit()


def lower_print(lowering, op):
    b = lowering.builder
    prefix, hex_bits = op.attrs["prefix"], op.attrs.get("hex", False)
    pids = [lowering._sreg(f"ctaid.{axis}", f"pid_{axis}") for axis in "xyz"]
    if not op.operands:
        owner = b.icmp_unsigned("==", lowering.tid, ir.Constant(I32, 0))
        text = "pid (%u, %u, %u)" + prefix.replace("%", "%%") + "\n"
        _guarded(lowering, owner,
                 lambda: _vprintf(lowering, _string(lowering, text, "printf_format"), pids))
        return
    for number, value in enumerate(op.operands):
        layout = lowering.natural_layout(value)
        registers = lowering.regs(value, layout)
        indices = logical_indices(lowering, value, layout)
        which = f"(operand {number}) " if len(op.operands) > 1 else ""
        index_text = ", ".join(f"%{w}u" for w in index_widths(value.type.shape))
        text = (f"pid (%u, %u, %u) idx ({index_text}){prefix.replace('%', '%%')}{which}"
                f"{_format(value.element, hex_bits)}\n")
        element = value.element

        def emit(registers=registers, indices=indices, text=text, element=element):
            format_pointer = _string(lowering, text, "printf_format")
            for register, index in zip(registers, indices):
                _vprintf(lowering, format_pointer,
                         pids + list(index) + [_vararg(b, register, element, hex_bits)])
        _guarded(lowering, lowering.owner(value, layout), emit)


def lower_assert(lowering, op):
    b = lowering.builder
    (condition,) = op.operands
    registers = lowering.regs(condition, lowering.natural_layout(condition))
    failed = None
    for register in registers:
        bad = b.not_(register)
        failed = bad if failed is None else b.or_(failed, bad)
    filename, line = (op.loc[0], op.loc[1]) if op.loc else ("<unknown>", 0)
    assertfail = _declare(lowering.module, "__assertfail", ir.VoidType(),
                          [GENERIC_POINTER, GENERIC_POINTER, I32, GENERIC_POINTER, I64])

    def emit():
        b.call(assertfail, [_string(lowering, op.attrs["message"], "assert_message"),
                            _string(lowering, filename, "assert_file"), ir.Constant(I32, line),
                            _string(lowering, op.attrs["function"], "assert_function"),
                            ir.Constant(I64, 1)])
    _guarded(lowering, failed, emit)
    lowering.barrier()


def lower_debug_op(lowering, op):
    if op.opcode == "debug_barrier":
        lowering.barrier()
    elif op.opcode == "device_print":
        lower_print(lowering, op)
    else:
        lower_assert(lowering, op)
