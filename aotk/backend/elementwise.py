"""Elementwise kir ops -> LLVM IR, one register at a time: the binary and unary ops, ``cmp``,
``fma``, ``select``, ``cast`` and ``addptr``.

In: the op and the layout its result is wanted in (its operands are wanted in the same
one). Out: one instruction (or a short sequence) per register. A table maps each opcode to
a rule ``(ctx, op, args) -> ir.Value``; rules read the operand and result types from kir
and never infer them. Transcendental functions call
libdevice (``__nv_expf`` ...), linked in later by ``backend.ptx``; 16-bit floats are
computed in fp32 and rounded back, as Triton does.
"""
from __future__ import annotations

import math

import llvmlite.ir as ir

from ..ir import types as T
from ..passes.layouts import Blocked, Layout
from ..semantic.elementwise import (DIRECTED_ROUNDINGS, LIBDEVICE_BIT_CASTS,
                                    LIBDEVICE_CONVERSIONS, LIBDEVICE_ROUNDINGS,
                                    ROUNDED_ARITHMETIC, operand_signature)
from ..targets import has_bf16_convert
from . import float8
from .llvm_types import I16, I32, I64, call_asm, declare_function, inline_asm, llvm_type
from .registry import value_lowering


LOG2_E = 1.4426950408889634
_FLOAT_MATH = {  # opcode -> (libdevice fp32 name, fp64 name) or an LLVM intrinsic
    "exp": ("__nv_expf", "__nv_exp"), "exp2": ("__nv_exp2f", "__nv_exp2"),
    "log": ("__nv_logf", "__nv_log"), "log2": ("__nv_log2f", "__nv_log2"),
    "sin": ("__nv_sinf", "__nv_sin"), "cos": ("__nv_cosf", "__nv_cos"),
    "rsqrt": ("__nv_rsqrtf", "__nv_rsqrt"), "frem": ("__nv_fmodf", "__nv_fmod"),
    # Triton's tl.sqrt: libdevice's, whose __CUDA_PREC_SQRT reflects to 0 (sqrt.approx,
    # .ftz with __CUDA_FTZ) on fp32 and sqrt.rn on fp64; tl.sqrt_rn is the exact one
    "sqrt": ("__nv_sqrtf", "__nv_sqrt"),
}
def _float_symbols(stem: str) -> dict:
    """libdevice's usual spelling: ``__nv_<stem>f`` for fp32, ``__nv_<stem>`` for fp64."""
    return {"fp32": f"__nv_{stem}f", "fp64": f"__nv_{stem}"}


# The math functions of aotk.semantic's MATH_FUNCTIONS (kir op ``math``): libdevice's
# symbol for each signature the row takes (semantic.operand_signature of the operands);
# LIBDEVICE_FUNCTIONS' rows follow.
LIBDEVICE = {
    **{name: _float_symbols(name) for name in (
        "erf", "erfc", "erfinv", "tanh", "exp10", "log10", "log1p", "expm1", "sinh", "cosh",
        "tan", "asin", "acos", "atan", "asinh", "acosh", "atanh", "cbrt", "rcbrt", "lgamma",
        "tgamma", "round", "trunc", "rint", "nearbyint", "sinpi", "cospi", "normcdf", "pow",
        "atan2", "hypot", "copysign", "fmod", "fdim", "remainder", "nextafter")},
    "sqrt_rn": {"fp32": "__nv_fsqrt_rn", "fp64": "__nv_dsqrt_rn"},
    "exp": {"fp32": "__nv_expf", "fp64": "__nv_exp"},
    "rcp_rn": {"fp32": "__nv_frcp_rn", "fp64": "__nv_drcp_rn"},
    "div_rn": {"fp32": "__nv_fdiv_rn", "fp64": "__nv_ddiv_rn"},
    "add_rn": {"fp32": "__nv_fadd_rn", "fp64": "__nv_dadd_rn"},
    "sub_rn": {"fp32": "__nv_fsub_rn", "fp64": "__nv_dsub_rn"},
    "mul_rn": {"fp32": "__nv_fmul_rn", "fp64": "__nv_dmul_rn"},
    "rsqrt_rn": {"fp32": "__nv_frsqrt_rn"},
    **{name: {"fp32": f"__nv_{name}"} for name in (
        "fast_expf", "fast_logf", "fast_sinf", "fast_cosf", "fast_tanf", "fast_exp10f",
        "fast_log2f", "fast_log10f", "fast_powf")},
    "fast_dividef": {"fp32": "__nv_fast_fdividef"},
    "isnan": {"fp32": "__nv_isnanf", "fp64": "__nv_isnand"},
    "isinf": {"fp32": "__nv_isinff", "fp64": "__nv_isinfd"},
    "signbit": {"fp32": "__nv_signbitf", "fp64": "__nv_signbitd"},
    "finitef": {"fp32": "__nv_finitef"}, "isfinited": {"fp64": "__nv_isfinited"},
    "umulhi": {"i32": "__nv_umulhi", "u32": "__nv_umulhi", "i64": "__nv_umul64hi",
               "u64": "__nv_umul64hi"},
    "mulhi": {"i32": "__nv_mulhi", "u32": "__nv_umulhi", "i64": "__nv_mul64hi",
              "u64": "__nv_umul64hi"},
    "clz": {"i32": "__nv_clz", "i64": "__nv_clzll"},
    "popc": {"i32": "__nv_popc", "i64": "__nv_popcll"},
    "ffs": {"i32": "__nv_ffs", "i64": "__nv_ffsll"},
    "brev": {"i32": "__nv_brev", "i64": "__nv_brevll"},
}


def _rounded_arithmetic_symbols(name: str, mode: str) -> dict:
    """libdevice's ``name`` (add ... fma) rounded in ``mode``: __nv_f<name>_<mode> (fp32),
    __nv_d<name>_<mode> (fp64); fma is __nv_fmaf_<mode> / __nv_fma_<mode>."""
    if name == "fma":
        return {"fp32": f"__nv_fmaf_{mode}", "fp64": f"__nv_fma_{mode}"}
    return {"fp32": f"__nv_f{name}_{mode}", "fp64": f"__nv_d{name}_{mode}"}


# aotk.semantic's LIBDEVICE_FUNCTIONS, keyed like LIBDEVICE.
LIBDEVICE.update({
    **{f"{name}_{mode}": _rounded_arithmetic_symbols(name, mode)
       for name in ROUNDED_ARITHMETIC for mode in DIRECTED_ROUNDINGS},
    "fma_rn": _rounded_arithmetic_symbols("fma", "rn"),
    **{f"{name}_{mode}": {operand: f"__nv_{name}_{mode}"}
       for name, (operand, _) in LIBDEVICE_CONVERSIONS.items()
       for mode in LIBDEVICE_ROUNDINGS},
    "int2double_rn": {"i32": "__nv_int2double_rn"},
    "uint2double_rn": {"u32": "__nv_uint2double_rn"},
    **{name: {operand: f"__nv_{name}"} for name, (operand, _) in LIBDEVICE_BIT_CASTS.items()},
    "hiloint2double": {"i32": "__nv_hiloint2double"},
    **{name: _float_symbols(name) for name in (
        "llrint", "llround", "ilogb", "logb", "j0", "j1", "y0", "y1", "cyl_bessel_i0",
        "cyl_bessel_i1", "erfcx", "erfcinv", "normcdfinv", "rhypot", "norm3d", "rnorm3d",
        "norm4d", "rnorm4d")},
    "ldexp": {("fp32", "i32"): "__nv_ldexpf", ("fp64", "i32"): "__nv_ldexp"},
    "scalbn": {("fp32", "i32"): "__nv_scalbnf", ("fp64", "i32"): "__nv_scalbn"},
    "jn": {("i32", "fp32"): "__nv_jnf", ("i32", "fp64"): "__nv_jn"},
    "yn": {("i32", "fp32"): "__nv_ynf", ("i32", "fp64"): "__nv_yn"},
    "saturatef": {"fp32": "__nv_saturatef"},
    "rcp64h": {"fp64": "__nv_rcp64h"},
    "mul24": {"i32": "__nv_mul24", "u32": "__nv_umul24"},
    "hadd": {"i32": "__nv_hadd", "u32": "__nv_uhadd"},
    "rhadd": {"i32": "__nv_rhadd", "u32": "__nv_urhadd"},
    "sad": {("i32", "i32", "u32"): "__nv_sad", "u32": "__nv_usad"},
    "byte_perm": {"i32": "__nv_byte_perm"},
})
_INTRINSIC_MATH = {"floor": "llvm.floor", "ceil": "llvm.ceil",
                   "abs": "llvm.fabs", "min": "llvm.minnum", "max": "llvm.maxnum",
                   "fma": "llvm.fma"}
_INT_COMPARE = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
_FLOAT_COMPARE = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}


def _is_16bit_float(element) -> bool:
    return element.is_floating() and element.bits == 16


def _float_call(ctx, op, args, intrinsic=None):
    """Math on floats through libdevice or an intrinsic (``intrinsic``, else the opcode's),
    widening 16-bit floats to fp32."""
    b = ctx.builder
    element = op.result.element
    native = llvm_type(element)
    compute = ir.FloatType() if _is_16bit_float(element) else native
    widened = [b.fpext(a, compute) if compute is not native else a for a in args]
    if op.opcode == "exp" and element.is_fp32():
        # Triton's tl.exp on fp32: ex2.approx of x * log2(e), denormals kept (not
        # libdevice's __nv_expf, which tl.extra.libdevice.exp is).
        scaled = b.fmul(widened[0], ir.Constant(compute, LOG2_E), flags=ctx.float_flags)
        ex2 = declare_function(ctx.module, "llvm.nvvm.ex2.approx.f", compute, [compute])
        return b.call(ex2, [scaled])
    if op.opcode in _FLOAT_MATH:
        name = _FLOAT_MATH[op.opcode][1 if element.is_fp64() else 0]
    else:
        name = f"{intrinsic or _INTRINSIC_MATH[op.opcode]}.{compute.intrinsic_name}"
    fn = declare_function(ctx.module, name, compute, [compute] * len(widened))
    result = b.call(fn, widened)
    return b.fptrunc(result, native) if compute is not native else result


# Triton's core tl.sqrt_rn / tl.div_rn (precise_sqrt / precise_divf): the IEEE instruction,
# which keeps fp32 denormals (libdevice's functions of those names flush them).
_IEEE_INTRINSICS = {("sqrt_rn", "fp32"): "llvm.nvvm.sqrt.rn.f",
                    ("sqrt_rn", "fp64"): "llvm.nvvm.sqrt.rn.d",
                    ("div_rn", "fp32"): "llvm.nvvm.div.rn.f",
                    ("div_rn", "fp64"): "llvm.nvvm.div.rn.d"}


def _math(ctx, op, args):
    """A math function through libdevice, for the operand types aotk.semantic allows; the
    core IEEE ones (``ieee``) as their instruction."""
    signature = operand_signature(operand.element for operand in op.operands)
    if op.attrs.get("ieee"):
        name = _IEEE_INTRINSICS[(op.attrs["function"], op.operands[0].element.short)]
        function = declare_function(ctx.module, name, args[0].type, [a.type for a in args])
        return ctx.builder.call(function, args)
    name = LIBDEVICE[op.attrs["function"]][signature]
    result_type = llvm_type(op.result.element)
    function = declare_function(ctx.module, name, result_type, [a.type for a in args])
    return ctx.builder.call(function, args)


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
            return _float_call(ctx, op, args, f"llvm.{'minimum' if op.opcode == 'min' else 'maximum'}")
        return _float_call(ctx, op, args)
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
        return _float_call(ctx, op, args)
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
    pointer = b.inttoptr(address, ir.PointerType(addrspace=1))
    moved = b.gep(pointer, [offset], inbounds=False, source_etype=ir.IntType(8 * size))
    return b.ptrtoint(moved, address.type)


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
    "frem": _float_call,
    "and": _int_binary("and_"), "or": _int_binary("or_"), "xor": _int_binary("xor"),
    "shl": _shift, "shr": _shift,
    "min": _min_max, "max": _min_max,
    "cmp": _compare,
    "neg": _neg, "not": _not, "abs": _abs,
    "exp": _float_call, "exp2": _float_call, "log": _float_call, "log2": _float_call,
    "sin": _float_call, "cos": _float_call, "rsqrt": _float_call, "sqrt": _float_call,
    "floor": _float_call, "ceil": _float_call, "fma": _float_call, "math": _math,
    "select": _select, "cast": _cast, "addptr": _addptr,
}


@value_lowering(*RULES)
def lower_elementwise(ctx, op, layout):
    """Each register by the op's rule; where axis info proves the result constant over runs
    of a thread's registers (``offs < n`` over aligned vectors of offsets), only the first
    of each run is computed and the others reuse it, as Triton does."""
    rule = RULES[op.opcode]
    operand_registers = [ctx.regs(v, layout) for v in op.operands]
    count = len(operand_registers[0])
    runs = _constant_runs(ctx, op.result, layout, count)
    if _narrows_in_pairs(ctx, op):
        return _narrow_in_pairs(ctx, op, operand_registers[0], runs)
    results = []
    for i in range(count):
        if runs[i] < i:
            results.append(results[runs[i]])
        else:
            results.append(rule(ctx, op, [registers[i] for registers in operand_registers]))
    return results


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


def _constant_runs(ctx, value, layout, count: int) -> list:
    """For each of a thread's ``count`` registers of ``value`` in ``layout``, the first
    register holding the same value by axis info's constancy. A thread's elements along an
    axis start at a multiple of min(size per thread, extent) (its base) and sit at fixed
    offsets from it, so registers whose offsets share a block of gcd(constancy, that) are
    in one run of equal values."""
    unchanged = list(range(count))
    info = ctx.infos.get(value)
    shape = value.type.shape
    if info is None or not shape or len(info.constancy) != len(shape) \
            or all(c == 1 for c in info.constancy) or not isinstance(layout, Layout) \
            or layout.sliced or not isinstance(layout.blocked, Blocked):
        return unchanged
    distribution = ctx.threads.distribution(layout, shape)
    slots = distribution.slots()
    if len(slots) != count:
        return unchanged
    widths = [math.gcd(info.constancy[d], min(layout.blocked.size_per_thread[d], shape[d]))
              for d in range(len(shape))]
    first = {}
    return [first.setdefault(tuple(distribution.slot_offsets[d][slot[d]] // widths[d]
                                   for d in range(len(shape))), index)
            for index, slot in enumerate(slots)]
