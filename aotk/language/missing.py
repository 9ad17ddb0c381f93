"""Names of Triton 3.6's language that aotk does not provide yet: using one is one clear
error that names it, not an AttributeError from inside aotk.

In: a module's ``__getattr__`` asking for a name. Out: for a name Triton has there, a tl
builtin that raises (at the point of the kernel that calls it, as a CompilationError), or
an object that raises when a kernel uses it; AttributeError for any other name.
"""
from __future__ import annotations

from .core import builtin

# By module, the names Triton 3.6 defines there that aotk lacks.
NOT_PROVIDED = {
    "aotk.language": (
        "advance", "assume", "flip", "float8e4b15", "float8e4b8",
        "float8e5b16", "gather", "histogram", "inline_asm_elementwise",
        "make_block_ptr", "map_elementwise", "pair_uniform_to_normal", "philox",
        "philox_impl", "pi32_t", "rand", "rand4x", "randint", "randint4x", "randn", "randn4x",
        "reduce_or", "slice", "softmax", "sort", "swizzle2d", "topk", "uint_to_uniform_float",
        "void", "block_type", "const", "constexpr_type", "tuple", "target_info", "bitonic_merge",
        "condition"),
    "aotk.language.standard": (
        "flip", "reduce_or", "softmax", "sort", "swizzle2d", "topk",
        "bitonic_merge"),
    "aotk.language.extra.cuda": (
        "globaltimer", "num_threads", "num_warps", "smid", "convert_custom_float8_sm70",
        "convert_custom_float8_sm80", "gdc_launch_dependents", "gdc_wait"),
    "aotk.language.extra.libdevice": (
        "byte_perm", "mul24", "sad", "rcp64h", "saturatef", "fma_rn", "fma_rz", "fma_rd",
        "fma_ru", "div_rz", "div_rd", "div_ru", "rcp_rz", "rcp_rd", "rcp_ru", "sqrt_rz",
        "sqrt_rd", "sqrt_ru", "add_rz", "add_rd", "add_ru", "mul_rz", "mul_rd", "mul_ru",
        "sub_rz", "sub_rd", "sub_ru", "double2float_rn", "double2float_rz", "double2float_rd",
        "double2float_ru", "double2int_rn", "double2int_rz", "double2int_rd", "double2int_ru",
        "double2uint_rn", "double2uint_rz", "double2uint_rd", "double2uint_ru",
        "int2double_rn", "uint2double_rn", "float2int_rn", "float2int_rz", "float2int_rd",
        "float2int_ru", "float2uint_rn", "float2uint_rz", "float2uint_rd", "float2uint_ru",
        "int2float_rn", "int2float_rz", "int2float_rd", "int2float_ru", "uint2float_rn",
        "uint2float_rz", "uint2float_rd", "uint2float_ru", "hiloint2double", "double2loint",
        "double2hiint", "float2ll_rn", "float2ll_rz", "float2ll_rd", "float2ll_ru",
        "float2ull_rn", "float2ull_rz", "float2ull_rd", "float2ull_ru", "double2ll_rn",
        "double2ll_rz", "double2ll_rd", "double2ll_ru", "double2ull_rn", "double2ull_rz",
        "double2ull_rd", "double2ull_ru", "ll2float_rn", "ll2float_rz", "ll2float_rd",
        "ll2float_ru", "ull2float_rn", "ull2float_rz", "ull2float_rd", "ull2float_ru",
        "ll2double_rn", "ll2double_rz", "ll2double_rd", "ll2double_ru", "ull2double_rn",
        "ull2double_rz", "ull2double_rd", "ull2double_ru", "int_as_float", "float_as_int",
        "uint_as_float", "float_as_uint", "longlong_as_double", "double_as_longlong", "hadd",
        "rhadd", "llrint", "llround", "norm3d", "rnorm3d", "norm4d", "rnorm4d",
        "rhypot", "j0", "j1", "y0", "y1", "yn", "jn", "cyl_bessel_i0", "cyl_bessel_i1",
        "erfcx", "erfcinv", "normcdfinv", "ldexp", "scalbn", "ilogb", "logb"),
}


def not_provided(qualified: str):
    """A tl builtin standing for Triton's ``qualified`` name: calling it is the error."""
    @builtin
    def missing(*args, **kwargs):
        raise NotImplementedError(f"{qualified} is not provided by aotk yet (Triton has it); "
                                  "see docs/architecture.md for adding a builtin")
    missing.__name__ = missing.__qualname__ = qualified.rsplit(".", 1)[1]
    return missing


def module_getattr(module: str, display: str):
    """A module ``__getattr__`` for ``module`` (shown to users as ``display``, e.g. tl)."""
    names = frozenset(NOT_PROVIDED[module])

    def lookup(name: str):
        if name in names:
            return not_provided(f"{display}.{name}")
        raise AttributeError(f"module {display!r} has no attribute {name!r}")
    return lookup
