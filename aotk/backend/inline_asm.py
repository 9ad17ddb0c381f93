"""``inline_asm`` -> LLVM IR: the user's assembly called once per ``pack`` elements.

In: the op (its arguments and results share one layout: the results' natural one) and the
layout plan. Out: the registers of every result there. Each thread takes its registers in
runs of ``pack`` (a short last run is padded with copies of its last element, whose
results are dropped). Arguments narrower than 32 bits go in packed registers of
``min(32 // bits, pack)`` elements (a vector bitcast to one integer), the others one per
operand; results come back the same way (``semantic.inline_asm`` checked the constraints
against this count). Floats bound to an integer constraint (``r``, ``l``, ``h``) are passed
as their bits, booleans as bytes. Impure assembly is a side-effecting call, never merged
or removed.
"""
from __future__ import annotations

import llvmlite.ir as ir

from .llvm_types import I8, call_asm, llvm_type, register_struct
from .registry import lowering

_INTEGER_CONSTRAINTS = {"r": 32, "l": 64, "h": 16, "c": 8}


def escaped(text: str) -> str:
    """``text`` as the body of an LLVM IR string (llvmlite writes inline asm unescaped)."""
    out = []
    for ch in text:
        code = ord(ch)
        if ch in '"\\' or code < 32 or code > 126:
            out.append("".join(f"\\{byte:02X}" for byte in ch.encode()))
        else:
            out.append(ch)
    return "".join(out)


def _register_type(element):
    return I8 if element.is_bool() else llvm_type(element)


def _bits(element) -> int:
    return 64 if element.is_ptr() else max(8, element.bits)


def _per_register(element, pack: int, output: bool) -> int:
    bits = _bits(element)
    if output:
        return min(max(32 // bits, 1), pack)
    return min(32 // bits, pack) if bits < 32 else 1


def _as_operand(b, value, constraint: str):
    """A float bound to an integer register constraint goes as its bits."""
    if isinstance(value.type, (ir.HalfType, ir.FloatType, ir.DoubleType)) or \
            str(value.type) == "bfloat":
        if constraint.lstrip("=") in _INTEGER_CONSTRAINTS:
            return b.bitcast(value, ir.IntType(_width(value.type)))
    return value


def _width(ty) -> int:
    if isinstance(ty, ir.IntType):
        return ty.width
    return {"half": 16, "bfloat": 16, "float": 32, "double": 64}[str(ty)]


def _packed_operands(b, registers, element, pack):
    """The asm operands of one run: single registers, or vectors bitcast to an integer."""
    per_register = _per_register(element, pack, output=False)
    ty = _register_type(element)
    values = [b.zext(r, I8) if element.is_bool() else r for r in registers]
    if per_register == 1:
        return values
    operands = []
    for start in range(0, pack, per_register):
        vector = ir.Constant(ir.VectorType(ty, per_register), ir.Undefined)
        for k in range(per_register):
            vector = b.insert_element(vector, values[start + k], ir.Constant(ir.IntType(32), k))
        operands.append(b.bitcast(vector, ir.IntType(_bits(element) * per_register)))
    return operands


def _output_types(element, pack: int, constraints: list) -> list:
    per_register = _per_register(element, pack, output=True)
    if per_register > 1:
        return [ir.IntType(_bits(element) * per_register)] * (pack // per_register)
    ty = _register_type(element)
    return [ir.IntType(_width(ty)) if not isinstance(ty, ir.IntType) and
            c.lstrip("=") in _INTEGER_CONSTRAINTS else ty for c in constraints]


def _unpacked_results(b, words, element, pack):
    """The ``pack`` element registers of one result, from its asm outputs."""
    per_register = _per_register(element, pack, output=True)
    ty = _register_type(element)
    values = []
    for word in words:
        if per_register > 1:
            vector = b.bitcast(word, ir.VectorType(ty, per_register))
            values += [b.extract_element(vector, ir.Constant(ir.IntType(32), k))
                       for k in range(per_register)]
        else:
            values.append(word if word.type == ty else b.bitcast(word, ty))
    if element.is_bool():
        values = [b.icmp_unsigned("!=", v, ir.Constant(I8, 0)) for v in values]
    return values


@lowering("inline_asm")
def lower_inline_asm(ctx, op) -> list:
    b = ctx.builder
    layout = ctx.plan.homes[op.results[0]]
    pack = op.attrs["pack"]
    outputs, inputs = list(op.attrs["outputs"]), list(op.attrs["inputs"])
    clobbers = list(op.attrs["clobbers"])
    argument_registers = [ctx.regs(v, layout) for v in op.operands]
    count = ctx.threads.count(op.results[0], layout)
    results = [[] for _ in op.results]
    for start in range(0, count, pack):
        run = [min(start + k, count - 1) for k in range(pack)]
        operands = []
        for value, registers in zip(op.operands, argument_registers):
            operands += _packed_operands(b, [registers[i] for i in run], value.element, pack)
        operands = [_as_operand(b, v, c) for v, c in zip(operands, inputs)]
        output_types, constraint_index = [], 0
        for result in op.results:
            n = pack // _per_register(result.element, pack, output=True)
            output_types += _output_types(result.element, pack,
                                          outputs[constraint_index:constraint_index + n])
            constraint_index += n
        return_type = output_types[0] if len(output_types) == 1 else \
            register_struct(b, output_types)
        constraints = ",".join(outputs + inputs + clobbers)
        asm = ir.InlineAsm(ir.FunctionType(return_type, [o.type for o in operands]),
                           escaped(op.attrs["asm"]), constraints,
                           side_effect=not op.attrs["pure"])
        call = call_asm(b, asm, operands)
        words = [call] if len(output_types) == 1 else \
            [b.extract_value(call, i) for i in range(len(output_types))]
        taken = 0
        for number, result in enumerate(op.results):
            n = pack // _per_register(result.element, pack, output=True)
            values = _unpacked_results(b, words[taken:taken + n], result.element, pack)
            taken += n
            results[number] += values[:min(pack, count - start)]
    return results
