"""Math kir ops -> LLVM IR, one register at a time: ``exp`` ... ``ceil``, ``fma`` and the
``math`` op (every ``tl.math`` / libdevice function that is no core op).

In: the op and the layout its result is wanted in (its operands are wanted in the same one).
Out: one call per register (``per_register``). Transcendental functions call
libdevice (``__nv_expf`` ...), linked in later by ``backend.ptx``, or an LLVM/NVVM intrinsic;
16-bit floats are computed in fp32 and rounded back, as Triton does. ``LIBDEVICE`` names the
libdevice function of each row of ``semantic.math``'s tables, by operand signature.
"""
from __future__ import annotations

import llvmlite.ir as ir

from ..semantic.math import (DIRECTED_ROUNDINGS, LIBDEVICE_BIT_CASTS, LIBDEVICE_CONVERSIONS,
                             LIBDEVICE_ROUNDINGS, ROUNDED_ARITHMETIC, operand_signature)
from .llvm_types import declare_function, llvm_type
from .per_register import apply_per_register
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


def is_16bit_float(element) -> bool:
    return element.is_floating() and element.bits == 16


def float_call(ctx, op, args, intrinsic=None):
    """Math on floats through libdevice or an intrinsic (``intrinsic``, else the opcode's),
    widening 16-bit floats to fp32."""
    b = ctx.builder
    element = op.result.element
    native = llvm_type(element)
    compute = ir.FloatType() if is_16bit_float(element) else native
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


def lower_math(ctx, op, args):
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


# Each math op's rule, applied to every register (``per_register``).
MATH_RULES = {
    "exp": float_call, "exp2": float_call, "log": float_call, "log2": float_call,
    "sin": float_call, "cos": float_call, "rsqrt": float_call, "sqrt": float_call,
    "floor": float_call, "ceil": float_call, "fma": float_call, "math": lower_math,
}


@value_lowering(*MATH_RULES)
def lower_math_op(ctx, op, layout):
    return apply_per_register(ctx, op, layout, MATH_RULES[op.opcode])
