"""Elementwise kir ops -> LLVM IR, one register at a time: the binary and unary ops, ``cmp``,
``fma``, ``select``, ``cast`` and ``addptr``, and (by ``backend.math``'s rules) the math
functions.

In: the op and the layout its result is wanted in (its operands are wanted in the same
one). Out: one instruction (or a short sequence) per register. A table maps each opcode to
a rule ``(ctx, op, args) -> ir.Value``; rules read the operand and result types from kir
and never infer them.
"""
from __future__ import annotations

import llvmlite.ir as ir

from ..ir import types as T
from ..targets import has_bf16_convert
from . import float8
from .llvm_types import I16, I32, I64, call_asm, inline_asm, llvm_type
from .math import float_call
from .per_register import apply_per_register, constant_runs
from .registry import value_lowering


_INT_COMPARE = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
_FLOAT_COMPARE = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}


def _shift(ctx, op, args):
    """Shifts by >= the bit width give 0 (or the sign for arithmetic shr), as PTX does."""
    b = ctx.builder
    x, amount = args
    element = op.result.element
    width = ir.Constant(x.type, element.bits)
    too_far = b.icmp_unsigned(">=", amount, width)
    if op.opcode == "shl":
        return b.select(too_far, ir.Constant(x.type, 0), b.shl(x, amount))
    if element.is_int_signed():
        return b.ashr(x, b.select(too_far, ir.Constant(x.type, element.bits - 1), amount))
    return b.select(too_far, ir.Constant(x.type, 0), b.lshr(x, amount))


def _int_binary(name_signed, name_unsigned=None):
    def rule(ctx, op, args):
        b = ctx.builder
        unsigned = not op.result.element.is_int_signed()
        return getattr(b, name_unsigned if unsigned and name_unsigned else name_signed)(*args)
    return rule


def _min_max(ctx, op, args):
    """Floats: minnum / maxnum (the non-NaN operand), or minimum / maximum (NaN wins)
    with ``propagate_nan``."""
    b = ctx.builder
    element = op.result.element
    if element.is_floating():
        if op.attrs.get("propagate_nan"):
            return float_call(ctx, op, args, f"llvm.{'minimum' if op.opcode == 'min' else 'maximum'}")
        return float_call(ctx, op, args)
    x, y = args
    less = (b.icmp_signed if element.is_int_signed() else b.icmp_unsigned)("<", x, y)
    return b.select(less, x, y) if op.opcode == "min" else b.select(less, y, x)


def _divide(ctx, op, args):
    """C division/remainder; a zero divisor gives 0 instead of LLVM's undefined behaviour."""
    b = ctx.builder
    x, y = args
    zero = ir.Constant(y.type, 0)
    is_zero = b.icmp_unsigned("==", y, zero)
    safe = b.select(is_zero, ir.Constant(y.type, 1), y)
    signed = op.result.element.is_int_signed()
    if op.opcode == "idiv":
        value = b.sdiv(x, safe) if signed else b.udiv(x, safe)
    else:
        value = b.srem(x, safe) if signed else b.urem(x, safe)
    return b.select(is_zero, zero, value)


def _float_or_int(float_name, int_name):
    def rule(ctx, op, args):
        b = ctx.builder
        if op.result.element.is_floating():
            return getattr(b, float_name)(*args, flags=ctx.float_flags)
        return getattr(b, int_name)(*args)
    return rule


def _compare(ctx, op, args):
    b = ctx.builder
    element = op.operands[0].element
    predicate = op.attrs["predicate"]
    if element.is_floating():
        if predicate == "ne":
            return b.fcmp_unordered("!=", *args)
        return b.fcmp_ordered(_FLOAT_COMPARE[predicate], *args)
    if element.is_int_signed():
        return b.icmp_signed(_INT_COMPARE[predicate], *args)
    return b.icmp_unsigned(_INT_COMPARE[predicate], *args)


def _neg(ctx, op, args):
    b = ctx.builder
    (x,) = args
    if op.result.element.is_floating():
        return b.fneg(x)
    return b.sub(ir.Constant(x.type, 0), x)


def _not(ctx, op, args):
    (x,) = args
    return ctx.builder.xor(x, ir.Constant(x.type, -1 if x.type.width > 1 else 1))


def _abs(ctx, op, args):
    if op.result.element.is_floating():
        return float_call(ctx, op, args)
    b = ctx.builder
    (x,) = args
    negative = b.icmp_signed("<", x, ir.Constant(x.type, 0))
    return b.select(negative, b.sub(ir.Constant(x.type, 0), x), x)


def _cast(ctx, op, args):
    b = ctx.builder
    (x,) = args
    source, target = op.operands[0].element, op.result.element
    if op.attrs.get("bitcast"):
        return x if source.is_ptr() else b.bitcast(x, llvm_type(target))
    rounding = op.attrs.get("rounding", "rtne")
    if target.is_fp8e4b15():
        # Through f16 (semantic allows f16 and f32 sources): f32 narrowed towards zero first,
        # by the same cvt.rz Triton's conversion uses.
        if not source.is_fp16():
            x = _narrow_toward_zero(ctx, x, source, T.float16)
        return float8.encode_from_half(b, x)
    if source.is_fp8() or target.is_fp8():
        # Through f32: exact for every fp8 value (a wider source is narrowed to f32 first,
        # as Triton's conversions do).
        if source.is_fp8():
            x, source = float8.decode_to_f32(b, source.float8_format, x), T.float32
        if target.is_fp8():
            return float8.encode_from_f32(b, target.float8_format,
                                          _convert(b, x, source, T.float32), rounding)
        return _convert(b, x, source, target)
    if rounding == "rtz":
        return _narrow_toward_zero(ctx, x, source, target)
    return _convert(b, x, source, target)


def _convert(b, x, source, target):
    """A value conversion between the register types (fp8 aside), rounding to nearest."""
    if source == target:
        return x
    target_type = llvm_type(target)
    if target.is_bool():
        if source.is_floating():
            return b.fcmp_unordered("!=", x, ir.Constant(x.type, 0.0))
        return b.icmp_unsigned("!=", x, ir.Constant(x.type, 0))
    if source.is_floating() and target.is_floating():
        if source.bits == target.bits:   # fp16 <-> bf16 goes through fp32
            return b.fptrunc(b.fpext(x, ir.FloatType()), target_type)
        return b.fpext(x, target_type) if target.bits > source.bits else b.fptrunc(x, target_type)
    if source.is_floating():
        return b.fptosi(x, target_type) if target.is_int_signed() else b.fptoui(x, target_type)
    if target.is_floating():
        return b.sitofp(x, target_type) if source.is_int_signed() else b.uitofp(x, target_type)
    if target.bits < source.bits:
        return b.trunc(x, target_type)
    if target.bits == source.bits:
        return x
    return b.sext(x, target_type) if source.is_int_signed() else b.zext(x, target_type)


# PTX conversions rounding towards zero (LLVM's fptrunc rounds to nearest even).
_TOWARD_ZERO = {("float32", "float16"): ("cvt.rz.f16.f32", "h", "f"),
                ("float32", "bfloat16"): ("cvt.rz.bf16.f32", "h", "f"),
                ("float64", "float32"): ("cvt.rz.f32.f64", "f", "d"),
                ("float64", "float16"): ("cvt.rz.f16.f64", "h", "d")}


def _narrow_toward_zero(ctx, x, source, target):
    """``fp_downcast_rounding="rtz"`` between the standard float types."""
    b = ctx.builder
    if (source.name, target.name) == ("float64", "bfloat16"):
        # PTX has no f64 -> bf16 conversion; towards zero twice is towards zero once.
        x, source = _narrow_toward_zero(ctx, x, source, T.float32), T.float32
    if target.is_bf16() and not has_bf16_convert(ctx.target):
        return _bf16_toward_zero(b, x)
    instruction, out, into = _TOWARD_ZERO[(source.name, target.name)]
    result = inline_asm(b, f"{instruction} $0, $1;", f"={out},{into}", [x],
                        ir.IntType(16) if out == "h" else llvm_type(target), side_effect=False)
    return b.bitcast(result, llvm_type(target)) if out == "h" else result


def _bf16_toward_zero(b, x):
    """f32 -> bf16 towards zero without ``cvt.rz.bf16.f32`` (sm_75): bf16 is the high half
    of an f32, and dropping the low half shortens the magnitude, except that a NaN whose
    payload sits in that half alone would become an infinity: NaN gives the canonical
    0x7FFF, as the instruction does."""
    high = b.trunc(b.lshr(b.bitcast(x, I32), ir.Constant(I32, 16)), I16)
    nan = b.fcmp_unordered("uno", x, x)
    return b.bitcast(b.select(nan, ir.Constant(I16, 0x7FFF), high), llvm_type(T.bfloat16))


def _addptr(ctx, op, args):
    """``address + offset * size`` as a getelementptr on the address (round-tripped through
    a pointer): LLVM's NVPTX pipeline separates constant offsets out of GEP indices
    (``sext(base | 128)`` becomes ``sext(base)`` plus an immediate), so a thread's elements
    share one 64-bit product instead of one each."""
    b = ctx.builder
    address, offset = args
    offset_type = op.operands[1].element
    if offset.type.width < 32 or (offset.type.width == 32 and not offset_type.is_int_signed()):
        # GEP indices are signed: widen narrow and unsigned 32-bit offsets first.
        offset = b.sext(offset, I64) if offset_type.is_int_signed() else b.zext(offset, I64)
    size = op.result.element.element_ty.itemsize
    moved = b.gep(_as_pointer(b, address), [offset], inbounds=False,
                  source_etype=ir.IntType(8 * size))
    return b.ptrtoint(moved, address.type)


def _as_pointer(b, address):
    """The pointer at ``address``. Where the address is a pointer's ptrtoint (a kernel
    argument's, or the GEP of an earlier addptr), that pointer itself: the round trip
    through an integer is left out of the emitted IR (a 128x256 matmul emitted one
    inttoptr per element per addptr: 528 of its 5,090 instructions)."""
    if isinstance(address, ir.CastInstr) and address.opname == "ptrtoint":
        source = address.operands[0]
        if isinstance(source.type, ir.PointerType) and source.type.addrspace == 1:
            return source
    return b.inttoptr(address, ir.PointerType(addrspace=1))


def _fdiv(ctx, op, args):
    """fp32 ``/`` is ``div.full.f32`` (at most 2 ulp), as in Triton; other widths are IEEE."""
    b = ctx.builder
    if op.result.element.is_fp32():
        asm = ir.InlineAsm(ir.FunctionType(ir.FloatType(), [ir.FloatType(), ir.FloatType()]),
                           "div.full.f32 $0, $1, $2;", "=f,f,f")
        return call_asm(b, asm, args)
    return b.fdiv(*args)


def _select(ctx, op, args):
    return ctx.builder.select(*args)


RULES = {
    "add": _float_or_int("fadd", "add"),
    "sub": _float_or_int("fsub", "sub"),
    "mul": _float_or_int("fmul", "mul"),
    "fdiv": _fdiv,
    "idiv": _divide, "irem": _divide,
    "frem": float_call,
    "and": _int_binary("and_"), "or": _int_binary("or_"), "xor": _int_binary("xor"),
    "shl": _shift, "shr": _shift,
    "min": _min_max, "max": _min_max,
    "cmp": _compare,
    "neg": _neg, "not": _not, "abs": _abs,
    "select": _select, "cast": _cast, "addptr": _addptr,
}


@value_lowering(*RULES)
def lower_elementwise(ctx, op, layout):
    """Each register by the op's rule (``per_register``), or two at a time for a narrowing
    that PTX converts in pairs."""
    if _narrows_in_pairs(ctx, op):
        registers = ctx.regs(op.operands[0], layout)
        return _narrow_in_pairs(ctx, op, registers,
                                constant_runs(ctx, op.result, layout, len(registers)))
    if _ends_accumulation(ctx, op):
        return ctx.emitted_in_order(
            lambda: apply_per_register(ctx, op, layout, RULES[op.opcode]), sink_inputs=True)
    return apply_per_register(ctx, op, layout, RULES[op.opcode])


ACCUMULATION_MIN_LINKS = 2
_ACCUMULATES = ("add", "sub")


def _accumulator(users, op):
    """The operand of float add/sub ``op`` that an earlier add/sub of the same type makes
    and only ``op`` takes (``acc`` of ``acc += t``), or None."""
    for operand in op.operands:
        owner = operand.owner
        if owner is not None and owner.opcode in _ACCUMULATES \
                and operand.type == op.result.type and users.get(operand) == [op]:
            return owner
    return None


def _ends_accumulation(ctx, op) -> bool:
    """Is float add/sub ``op`` the last of a chain of at least ``ACCUMULATION_MIN_LINKS``
    (``acc += x_s * h_s`` over a static_range, unrolled)? Its inputs are then computed just
    before it, one register's chain at a time (``backend.sink_to_use``), after every load
    of the steps: in program order each step's products were added right after its loads,
    and ptxas 13 then kept the loads of all steps and the partial sums live at once
    (liger's mhc_pre fwd, 4 steps of a 32x128 fp32 tile: 120 registers, Triton 64, whose
    SLP vectorizer happens to move the arithmetic after the loads)."""
    if op.opcode not in _ACCUMULATES or not op.result.shape \
            or not op.result.element.is_floating():
        return False
    users = ctx.value_users()
    for user in users.get(op.result, ()):
        if user.opcode in _ACCUMULATES and _accumulator(users, user) is op:
            return False   # not the last link
    links, current, size = [], op, op.result.type.numel
    while current is not None:
        links.append(current)
        current = _accumulator(users, current)
    if len(links) < ACCUMULATION_MIN_LINKS:
        return False
    inside = {id(link) for link in links}
    for link in links:
        accumulator = _accumulator(users, link)
        terms = [v for v in link.operands if accumulator is None or v is not accumulator.result]
        if not all(_streamed_term(users, term, inside, size) for term in terms):
            return False
    return True


_TERM_OPS = frozenset(RULES) | {"broadcast", "expand_dims", "splat", "constant", "fma"}
BROADCAST_SHARE = 8


def _streamed_term(users, term, inside: set, size: int) -> bool:
    """Is ``term`` (what one step adds) elementwise arithmetic on loads that nothing else
    takes? Sunk to the chain's end, such a term holds its loads from the step to the chain,
    which ptxas schedules well where each register of the tile feeds one chain (the term's
    full-size load) and what a broadcast shares among a thread's chains is small (a row or
    column vector: at most 1/BROADCAST_SHARE of the accumulator). Not: a step's reduction
    or dot (liger's mhc_mm_norm fwd: its x tiles then stayed live for every step's sum of
    squares, 178 -> 255 registers), a tile broadcast over another axis (mhc_post_res fwd:
    each x tile feeds HC chains, 216 B spilled), a value something else also takes."""
    work, seen = [term], set()
    while work:
        value = work.pop()
        if id(value) in seen:
            continue
        seen.add(id(value))
        owner = value.owner
        if owner is None or not value.shape:
            continue   # a parameter or a scalar
        if any(id(user) not in inside and id(user.result) not in seen
               for user in users.get(value, ()) if user.result is not None) \
                or any(user.result is None for user in users.get(value, ())):
            return False   # something else takes it too
        if owner.opcode == "load":
            if value.type.numel < size and value.type.numel * BROADCAST_SHARE > size:
                return False
            continue
        if owner.opcode not in _TERM_OPS:
            return False
        work.extend(owner.operands)
    return True


def _narrows_in_pairs(ctx, op) -> bool:
    """fp32 -> fp16 / bf16 rounding to nearest, on sm_80 on: PTX converts two floats in one
    instruction (``cvt.rn.f16x2.f32``, ``cvt.rn.bf16x2.f32``), the same rounding as two."""
    if op.opcode != "cast" or op.attrs.get("bitcast") \
            or op.attrs.get("rounding", "rtne") != "rtne":
        return False
    source, target = op.operands[0].element, op.result.element
    return source.is_fp32() and (target.is_fp16() or target.is_bf16()) \
        and has_bf16_convert(ctx.target)


def _narrow_in_pairs(ctx, op, registers, runs) -> list:
    """The registers converted two at a time, as a ``<2 x float>`` fptrunc, which LLVM's
    NVPTX backend emits as one paired cvt (a thread's neighbouring registers: the pairs a
    16-bit store or a packed operand takes, so the halves stay in one 32-bit register).
    Registers that repeat an earlier one (``runs``) reuse its result."""
    b = ctx.builder
    half = llvm_type(op.result.element)
    fresh = [i for i in range(len(registers)) if runs[i] == i]
    converted = {}
    for first, second in zip(fresh[0::2], fresh[1::2]):
        pair = ir.Constant(ir.VectorType(ir.FloatType(), 2), None)
        pair = b.insert_element(pair, registers[first], ir.Constant(I32, 0))
        pair = b.insert_element(pair, registers[second], ir.Constant(I32, 1))
        narrowed = b.fptrunc(pair, ir.VectorType(half, 2))
        converted[first] = b.extract_element(narrowed, ir.Constant(I32, 0))
        converted[second] = b.extract_element(narrowed, ir.Constant(I32, 1))
    if len(fresh) % 2:
        converted[fresh[-1]] = b.fptrunc(registers[fresh[-1]], half)
    return [converted[runs[i]] for i in range(len(registers))]
