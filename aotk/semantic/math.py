"""Typing rules of the math functions: ``tl.abs``, ``tl.exp`` ... ``tl.ceil`` and ``tl.fma``
(kir ops of their own), ``tl.sigmoid``, ``tl.fdiv``, and every function of ``tl.math`` /
``tl.extra.libdevice`` that is no core kir op (kir op ``math``, ``function`` = its name),
with the tables that type them.

In: ``tensor`` / ``constexpr`` / Python values. Out: typed ``tensor``s of the operands'
broadcast shape, in the types Triton gives them (libdevice has no 16-bit versions).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..ir import types as T
from ..language.core import tensor
from .building import emit
from .elementwise import (arithmetic, binary, binary_operands, broadcast_together,
                          common_operands, in_fp32_if_16_bit, neg, with_sign_bits)
from .promotion import constant, literal_type, to_tensor


FLOAT_ONLY_MATH = frozenset("exp exp2 log log2 sqrt rsqrt sin cos floor ceil".split())


def unary_math(opcode, x) -> tensor:
    x = to_tensor(x)
    if opcode in FLOAT_ONLY_MATH and not x.dtype.is_floating():
        raise TypeError(f"tl.{opcode} needs a floating-point operand, got {x.dtype}; "
                        f"cast it with .to(tl.float32)")
    if x.dtype.is_ptr():
        raise TypeError(f"tl.{opcode} is not defined on pointers")
    if opcode == "abs" and (x.dtype.is_int_unsigned() or x.dtype.is_bool()):
        return x
    if opcode == "abs" and x.dtype.is_fp8():   # clears the sign bit: exact, NaN kept
        return with_sign_bits(x, "and", 0x7F)
    return arithmetic(opcode, [x], x.type)


@dataclass(frozen=True)
class MathFunction:
    """A row of MATH_FUNCTIONS / LIBDEVICE_FUNCTIONS.

    ``arity``: how many operands. ``operands``: the signatures it takes, by short type names:
    ``"fp32"`` for operands promoted together to that one type, ``("fp32", "i32")`` for
    operands that each keep their own type (one name per operand). ``result``: the result
    type: None for the operands' one type, a short name for every signature, or a dict from
    signature to short name."""
    arity: int
    operands: tuple = ("fp32", "fp64")
    result: str | dict | None = None

    def __post_init__(self):
        for signature in self.operands:
            names = signature if isinstance(signature, tuple) else (signature,)
            if len(names) not in (1, self.arity) or \
                    (len(names) > 1 and not isinstance(self.result, dict)):
                raise ValueError(f"bad math-function signature {signature!r} for {self}")

    def result_type(self, signature: str) -> str:
        """The short name of the result type for operands of ``signature``."""
        if isinstance(self.result, dict):
            return self.result[signature]
        return self.result or signature


def operand_signature(elements):
    """The signature (a key of MathFunction.operands) of operands of these element types: one
    short name when they are all of one type, else a tuple of one per operand."""
    names = tuple(element.short for element in elements)
    return names[0] if len(set(names)) == 1 else names


_F32 = ("fp32",)
_F64 = ("fp64",)
_INTS = ("i32", "u32", "i64", "u64")
_INTS_SIGNED_OR_NOT = ("i32", "i64")
_INT32_SIGNED_OR_NOT = ("i32", "u32")


# Math functions evaluated elementwise (kir op ``math``, ``function`` = the row's name): the
# functions of Triton's tl.math and libdevice that are no core kir op. Their operand types
# are Triton's (libdevice has no 16-bit versions: cast with .to(tl.float32)). A new function
# is one row here or in LIBDEVICE_FUNCTIONS below, one in aotk.interpreter.math.MATH
# and one in aotk.backend.math.LIBDEVICE; the builtins of aotk.language, tl.math and
# tl.extra.libdevice come from these tables (ALL_MATH_FUNCTIONS). This one holds tl.math's
# functions and libdevice's classic math library (one or two operands of one type, a result
# of that type or i32), each run by tests/kernels/libdevice.py as a shared interpreter /
# ptxas / GPU case; LIBDEVICE_FUNCTIONS holds libdevice's own (tests/test_libdevice.py).
MATH_FUNCTIONS = {
    # fp32 / fp64 -> the same type
    **{name: MathFunction(1) for name in (
        "erf", "erfc", "erfinv", "tanh", "exp10", "log10", "log1p", "expm1", "sinh", "cosh",
        "tan", "asin", "acos", "atan", "asinh", "acosh", "atanh", "cbrt", "rcbrt", "lgamma",
        "tgamma", "round", "trunc", "rint", "nearbyint", "sinpi", "cospi", "normcdf",
        "sqrt_rn",      # the square root rounded to nearest (tl.sqrt may be approximate)
        "rcp_rn")},
    **{name: MathFunction(2) for name in (
        "pow", "atan2", "hypot", "copysign", "fmod", "fdim", "remainder", "nextafter",
        "div_rn", "add_rn", "sub_rn", "mul_rn")},
    # fp32 only: the fast approximations and rsqrt rounded to nearest
    **{name: MathFunction(1, _F32) for name in (
        "rsqrt_rn", "fast_expf", "fast_logf", "fast_sinf", "fast_cosf", "fast_tanf",
        "fast_exp10f", "fast_log2f", "fast_log10f")},
    **{name: MathFunction(2, _F32) for name in ("fast_powf", "fast_dividef")},
    # classification -> int32, as libdevice returns it
    "isnan": MathFunction(1, result="i32"), "isinf": MathFunction(1, result="i32"),
    "signbit": MathFunction(1, result="i32"), "finitef": MathFunction(1, _F32, "i32"),
    "isfinited": MathFunction(1, _F64, "i32"),
    # integers: the high half of the product (umulhi always unsigned, as Triton's), bits
    "umulhi": MathFunction(2, _INTS), "mulhi": MathFunction(2, _INTS),
    "clz": MathFunction(1, _INTS_SIGNED_OR_NOT, "i32"),
    "popc": MathFunction(1, _INTS_SIGNED_OR_NOT, "i32"),
    "ffs": MathFunction(1, _INTS_SIGNED_OR_NOT, "i32"),
    "brev": MathFunction(1, _INTS_SIGNED_OR_NOT),
}

# libdevice's directed roundings: towards zero, down (towards -inf) and up (towards +inf);
# its conversions also come rounded to nearest even (rn).
DIRECTED_ROUNDINGS = ("rz", "rd", "ru")
LIBDEVICE_ROUNDINGS = ("rn",) + DIRECTED_ROUNDINGS

# libdevice's conversions, each in every rounding: name -> (operand, result). The unsigned
# results are declared as signed integers of their width, as Triton declares them (the bits
# are the unsigned value's).
LIBDEVICE_CONVERSIONS = {
    "double2float": ("fp64", "fp32"), "double2int": ("fp64", "i32"),
    "double2uint": ("fp64", "i32"), "float2int": ("fp32", "i32"),
    "float2uint": ("fp32", "i32"), "int2float": ("i32", "fp32"), "uint2float": ("u32", "fp32"),
    "float2ll": ("fp32", "i64"), "float2ull": ("fp32", "i64"), "double2ll": ("fp64", "i64"),
    "double2ull": ("fp64", "i64"), "ll2float": ("i64", "fp32"), "ull2float": ("u64", "fp32"),
    "ll2double": ("i64", "fp64"), "ull2double": ("u64", "fp64"),
}

# The same bits read as another type (the "uint" results as Triton declares them).
LIBDEVICE_BIT_CASTS = {
    "int_as_float": ("i32", "fp32"), "float_as_int": ("fp32", "i32"),
    "uint_as_float": ("u32", "fp32"), "float_as_uint": ("fp32", "i32"),
    "longlong_as_double": ("i64", "fp64"), "double_as_longlong": ("fp64", "i64"),
    "double2loint": ("fp64", "i32"), "double2hiint": ("fp64", "i32"),   # low / high word
}

# The arithmetic libdevice rounds in a chosen direction, by operand count.
ROUNDED_ARITHMETIC = {"add": 2, "sub": 2, "mul": 2, "div": 2, "rcp": 1, "sqrt": 1, "fma": 3}

# The rest of tl.extra.libdevice (no tl.math name), with the typing of Triton's libdevice
# module: directed rounding, conversions, bit casts, integer helpers and special functions.
# Rows whose operands keep their own types (ldexp's exponent, jn's order, sad's third
# operand) list one type per operand.
LIBDEVICE_FUNCTIONS = {
    **{f"{name}_{mode}": MathFunction(arity) for name, arity in ROUNDED_ARITHMETIC.items()
       for mode in DIRECTED_ROUNDINGS},
    "fma_rn": MathFunction(3),
    **{f"{name}_{mode}": MathFunction(1, (operand,), result)
       for name, (operand, result) in LIBDEVICE_CONVERSIONS.items()
       for mode in LIBDEVICE_ROUNDINGS},
    "int2double_rn": MathFunction(1, ("i32",), "fp64"),      # exact: the other modes agree
    "uint2double_rn": MathFunction(1, ("u32",), "fp64"),
    **{name: MathFunction(1, (operand,), result)
       for name, (operand, result) in LIBDEVICE_BIT_CASTS.items()},
    "hiloint2double": MathFunction(2, ("i32",), "fp64"),     # (high word, low word)
    # to integers: rounded to nearest even / half away from zero; the binary exponent
    "llrint": MathFunction(1, result="i64"), "llround": MathFunction(1, result="i64"),
    "ilogb": MathFunction(1, result="i32"), "logb": MathFunction(1),
    # x * 2**n
    **{name: MathFunction(2, (("fp32", "i32"), ("fp64", "i32")),
                          {("fp32", "i32"): "fp32", ("fp64", "i32"): "fp64"})
       for name in ("ldexp", "scalbn")},
    "saturatef": MathFunction(1, _F32),      # clamped to [0, 1], NaN to 0
    "rcp64h": MathFunction(1, _F64),         # a coarse reciprocal from the high word
    # integers of 32 bits: the product of the low 24 bits, the halved sum (rounded down /
    # up), |x - y| + z, and bytes picked from two words
    **{name: MathFunction(2, _INT32_SIGNED_OR_NOT) for name in ("mul24", "hadd", "rhadd")},
    "sad": MathFunction(3, (("i32", "i32", "u32"), "u32"),
                        {("i32", "i32", "u32"): "i32", "u32": "u32"}),
    "byte_perm": MathFunction(3, ("i32",)),
    # special functions, fp32 / fp64 -> the same type
    **{name: MathFunction(1) for name in (
        "j0", "j1", "y0", "y1", "cyl_bessel_i0", "cyl_bessel_i1", "erfcx", "erfcinv",
        "normcdfinv")},
    **{name: MathFunction(2, (("i32", "fp32"), ("i32", "fp64")),
                          {("i32", "fp32"): "fp32", ("i32", "fp64"): "fp64"})
       for name in ("jn", "yn")},   # (order, x)
    "rhypot": MathFunction(2),
    "norm3d": MathFunction(3), "rnorm3d": MathFunction(3),
    "norm4d": MathFunction(4), "rnorm4d": MathFunction(4),
    # libdevice's own exp (__nv_expf, within 2 ulp): tl.exp on fp32 is Triton's ex2.approx
    # of x * log2(e), which tl.extra.libdevice.exp is not.
    "exp": MathFunction(1),
}

# Every function of the kir op ``math``.
ALL_MATH_FUNCTIONS = {**MATH_FUNCTIONS, **LIBDEVICE_FUNCTIONS}


# Of ALL_MATH_FUNCTIONS, those Triton also has as core ops rather than libdevice calls:
# tl.sqrt_rn and tl.div_rn (and tl.fdiv with ieee_rounding) are tt.precise_sqrt /
# tt.precise_divf, one IEEE instruction that keeps fp32 denormals, where libdevice's
# sqrt_rn / div_rn (linked with __CUDA_FTZ = 1) flush them.
IEEE_FUNCTIONS = frozenset(("sqrt_rn", "div_rn"))


def math_function(name, *operands, ieee=False) -> tensor:
    """``tl.<name>(*operands)`` of ALL_MATH_FUNCTIONS: the operands typed by the row's
    signatures (each in its own type where a signature lists one type per operand, else
    promoted together) and broadcast; out: the kir ``math`` op's result. ``ieee`` (only for
    IEEE_FUNCTIONS): Triton's core op, not libdevice's function of that name."""
    if ieee and name not in IEEE_FUNCTIONS:
        raise AssertionError(f"{name} has no IEEE core form")
    row = ALL_MATH_FUNCTIONS[name]
    if len(operands) != row.arity:
        raise TypeError(f"tl.{name} takes {row.arity} operand{'s' if row.arity > 1 else ''}, "
                        f"got {len(operands)}")
    values = _signature_operands(name, row, operands)
    signature = operand_signature(v.dtype for v in values)
    result = T.DTYPE_BY_SHORT[row.result_type(signature)]
    attributes = {"ieee": True} if ieee else {}
    return emit("math", values, values[0].type.with_element(result), function=name,
                **attributes)


def _signature_operands(name, row: MathFunction, operands) -> list:
    """The operands as one of ``row``'s signatures takes them, broadcast to one shape."""
    own_types = [v.dtype if isinstance(v, tensor) else literal_type(v) for v in operands]
    if operand_signature(own_types) in row.operands and \
            any(isinstance(signature, tuple) for signature in row.operands):
        return broadcast_together([to_tensor(v) for v in operands])
    values = common_operands(*operands) if row.arity > 1 else [to_tensor(operands[0])]
    dtype = values[0].dtype
    if dtype.short in row.operands:
        return values
    if not any(isinstance(signature, tuple) for signature in row.operands):
        kinds = " or ".join(row.operands)
        fix = f"cast with .to(tl.{T.DTYPE_BY_SHORT[row.operands[0]].name})"
        raise TypeError(f"tl.{name} needs {kinds} operands, got {dtype}; {fix}")
    accepted = " or ".join(
        "(" + ", ".join(signature if isinstance(signature, tuple) else [signature] * row.arity)
        + ")" for signature in row.operands)
    given = ", ".join(map(str, own_types))
    raise TypeError(f"tl.{name} takes operands of types {accepted}, got ({given}); cast them "
                    "with .to()")


def sigmoid(x) -> tensor:
    x = to_tensor(x)
    if not x.dtype.is_floating():
        raise TypeError(f"tl.sigmoid needs a floating-point operand, got {x.dtype}")
    one = constant(1.0, x.dtype, x.type.shape)
    return binary("fdiv", one, binary("add", one, unary_math("exp", neg(x))))


def fdiv(lhs, rhs, ieee_rounding: bool) -> tensor:
    """``tl.math.fdiv``: floats only (16-bit ones in fp32, as ``/``); rounded to nearest
    (Triton's precise_divf) with ``ieee_rounding``, else the fast division of ``/``."""
    a, b = binary_operands(lhs, rhs, allow_int=False, op_name="fdiv")
    if ieee_rounding:
        return math_function("div_rn", *in_fp32_if_16_bit(a, b), ieee=True)
    return binary("fdiv", *in_fp32_if_16_bit(a, b))


def fma(x, y, z) -> tensor:
    a, b, c = common_operands(x, y, z)
    if not a.dtype.is_floating():
        raise TypeError(f"tl.fma needs floating-point operands, got {a.dtype}")
    return arithmetic("fma", [a, b, c], a.type)
