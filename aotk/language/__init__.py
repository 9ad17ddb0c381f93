"""``import aotk.language as tl``: the kernel language, named and behaving like triton.language."""
from ..ir.types import BlockType as block_type, void  # noqa: F401  (Triton's names)
from ..ir.types import (DType as dtype, PointerType as pointer_type, bfloat16, float16, float32,
                        float64, float8e4nv, float8e5, float8e4b15, int1, int8, int16, int32, int64, uint8, uint16, uint32, uint64)
from .core import PropagateNan, condition, const, constexpr, constexpr_type, tensor, tensor_descriptor

pi32_t = pointer_type(int32)   # Triton's name for a pointer to int32
from .functions import (abs, arange, broadcast, broadcast_to, cast, cdiv, ceil, clamp, cos, exp,
                        exp2, expand_dims, floor, fma, full, log, log2, max_constancy,
                        max_contiguous, maximum, minimum, multiple_of, num_programs, program_id,
                        dot, item, permute, range, ravel, reshape, rsqrt, join, split, trans,
                        view, sigmoid, sin, sqrt, static_assert, static_print, static_range,
                        where, zeros, zeros_like)
from .memory import (advance, load, load_tensor_descriptor, make_block_ptr,
                     make_tensor_descriptor, store, store_tensor_descriptor)
from .reduce import argmax, argmin, max, min, reduce, sum, xor_sum
from .scan import associative_scan, cumprod, cumsum
from .atomics import (atomic_add, atomic_and, atomic_cas, atomic_max, atomic_min, atomic_or,
                      atomic_xchg, atomic_xor)
from .functions import debug_barrier, device_assert, device_print


__all__ = [
    "dtype", "pointer_type", "block_type", "void", "pi32_t", "condition", "const", "constexpr", "constexpr_type", "tensor", "PropagateNan",
    "int1", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "bfloat16", "float32", "float64", "float8e4nv", "float8e5", "float8e4b15",
    "abs", "arange", "broadcast", "broadcast_to", "cast", "cdiv", "ceil", "clamp", "cos", "exp",
    "exp2", "expand_dims", "floor", "fma", "full", "load", "log", "log2", "max_constancy",
    "max_contiguous", "maximum", "minimum", "multiple_of", "num_programs", "program_id", "range", "rsqrt",
    "cumprod", "cumsum", "dot", "item", "permute", "ravel", "reshape", "join", "split", "trans", "view",
    "sigmoid", "sin", "sqrt", "static_assert", "static_print", "static_range", "store", "where",
    "zeros", "zeros_like", "sum", "max", "min", "argmax", "argmin", "xor_sum",
]
__all__ += ["atomic_add", "atomic_and", "atomic_cas", "atomic_max", "atomic_min", "atomic_or",
            "atomic_xchg", "atomic_xor", "debug_barrier", "device_assert", "device_print"]
__all__ += ["associative_scan", "reduce"]
__all__ += ["tensor_descriptor", "make_tensor_descriptor", "load_tensor_descriptor",
            "store_tensor_descriptor", "advance", "make_block_ptr"]

from .functions import add, div_rn, erf, fdiv, mul, sqrt_rn, sub, umulhi  # noqa: E402
from .functions import cat, dot_scaled, flip, interleave, sort  # noqa: E402
from .functions import assume, gather, histogram, softmax, swizzle2d, topk  # noqa: E402
from .reduce import reduce_or  # noqa: E402
from .functions import bitonic_merge, inline_asm_elementwise, map_elementwise  # noqa: E402
from .functions import (pair_uniform_to_normal, philox, philox_impl, rand,  # noqa: E402
                        rand4x, randint, randint4x, randn, randn4x, uint_to_uniform_float)
from ..semantic.promotion import MAX_BLOCK_NUMEL as TRITON_MAX_TENSOR_NUMEL  # noqa: E402
# Triton's tuple and slice classes: in a kernel, tuples are Python tuples (carried leaf by
# leaf through loops and branches) and a subscript's slices are Python slices.
from builtins import slice, tuple  # noqa: E402
from . import extra, math, standard, target_info  # noqa: E402  (tl.math, tl.extra.libdevice, ...)

__all__ += ["assume", "gather", "histogram", "reduce_or", "softmax", "swizzle2d", "topk",
            "inline_asm_elementwise", "map_elementwise", "bitonic_merge"]
__all__ += ["cat", "dot_scaled", "flip", "interleave", "sort", "pair_uniform_to_normal", "philox",
            "philox_impl", "rand", "rand4x", "randint", "randint4x", "randn", "randn4x",
            "uint_to_uniform_float"]
__all__ += ["add", "div_rn", "erf", "fdiv", "mul", "sqrt_rn", "sub", "umulhi", "extra", "math",
            "standard", "target_info", "TRITON_MAX_TENSOR_NUMEL", "slice", "tuple"]

from .missing import module_getattr  # noqa: E402

# Triton's names aotk lacks are one clear error each (aotk.language.missing).
__getattr__ = module_getattr(__name__, "tl")
