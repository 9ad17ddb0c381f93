"""Typing rules of elementwise ops: the arithmetic, bitwise and comparison operators,
pointer arithmetic, ``tl.minimum`` / ``maximum`` / ``clamp`` / ``where`` / ``fma`` /
``sigmoid``, the unary operators and math functions, and casts (``tl.cast``, ``x.to()``).

In: ``tensor`` / ``constexpr`` / Python values. Out: typed ``tensor``s of the operands'
broadcast shape. Operands meet in one element type by ``promotion``'s rules.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..ir import types as T
from ..ir.types import BlockType, DType, PointerType
from ..language.core import PropagateNan, constexpr, tensor, unwrap
from .building import emit
from .promotion import (broadcast_shapes, check_literal_fits, constant, is_literal, is_pointer,
                        literal_type, promote_dtypes, promote_with_literal, to_tensor)
from .views import broadcast_to_shape

# ---------------------------------------------------------------------------------------
# Binary operators
# ---------------------------------------------------------------------------------------

def _binary_operands(lhs, rhs, allow_float=True, allow_int=True, op_name="op",
                     check_signedness=False):
    """Promotes and broadcasts two operands; returns (a, b) of one type and shape."""
    lhs_literal, rhs_literal = is_literal(lhs), is_literal(rhs)
    if lhs_literal and rhs_literal:
        raise TypeError("internal: two literals reach the semantic layer")
    if lhs_literal:
        dtype = promote_with_literal(rhs.dtype, lhs)
        check_literal_fits(lhs, dtype)
        lhs = constant(lhs, dtype)
    elif rhs_literal:
        dtype = promote_with_literal(lhs.dtype, rhs)
        check_literal_fits(rhs, dtype)
        rhs = constant(rhs, dtype)
    else:
        for side in (lhs, rhs):
            if side.dtype.is_ptr():
                raise TypeError(f"{op_name} is not defined on pointers")
        if check_signedness and lhs.dtype.is_int() and rhs.dtype.is_int() and \
                lhs.dtype.is_int_signed() != rhs.dtype.is_int_signed():
            # Triton's rule and wording (bool counts as unsigned, as Triton's int1 does).
            raise TypeError(
                f"Cannot use {op_name} with {lhs.dtype} and {rhs.dtype} because they have "
                "different signedness; this is unlikely to give a useful answer: cast them to "
                "the same signedness")
        dtype = promote_dtypes(lhs.dtype, rhs.dtype)
    if dtype.is_ptr():
        raise TypeError(f"{op_name} is not defined on pointers")
    if dtype.is_floating() and not allow_float:
        # Triton's wording first ("invalid operands of type ..."), then what to do.
        raise TypeError(f"invalid operands of type {lhs.dtype} and {rhs.dtype}: {op_name} "
                        "needs integer operands; cast them with .to(tl.int32) or another "
                        "integer type")
    if dtype.is_int() and not allow_int:
        raise TypeError(f"{op_name} needs floating-point operands, got {dtype}")
    lhs, rhs = cast(lhs, dtype), cast(rhs, dtype)
    shape = broadcast_shapes(lhs.type.shape, rhs.type.shape)
    return broadcast_to_shape(lhs, shape), broadcast_to_shape(rhs, shape)


def _binary(opcode, a: tensor, b: tensor, **attrs) -> tensor:
    return _arithmetic(opcode, [a, b], a.type, **attrs)


def _arithmetic(opcode, operands, result_type: BlockType, **attrs) -> tensor:
    """``emit`` for an op that computes on values: 8-bit float operands are computed in fp32
    and an 8-bit float result is rounded back (no GPU has fp8 arithmetic, nor does kir)."""
    if not any(o.dtype.is_fp8() for o in operands):
        return emit(opcode, operands, result_type, **attrs)
    wide = [cast(o, T.float32) if o.dtype.is_fp8() else o for o in operands]
    if not result_type.element.is_fp8():
        return emit(opcode, wide, result_type, **attrs)
    return cast(emit(opcode, wide, result_type.with_element(T.float32), **attrs),
                result_type.element)


def _pointer_offset(ptr: tensor, offset, negate=False) -> tensor:
    offset = to_tensor(offset)
    if not offset.dtype.is_int() or offset.dtype.is_bool():
        raise TypeError(f"a pointer moves by an integer offset, not {offset.dtype}")
    if negate:
        offset = neg(offset)
    shape = broadcast_shapes(ptr.type.shape, offset.type.shape)
    ptr, offset = broadcast_to_shape(ptr, shape), broadcast_to_shape(offset, shape)
    return emit("addptr", [ptr, offset], ptr.type)


def add(lhs, rhs) -> tensor:
    if is_pointer(lhs) and is_pointer(rhs):
        raise TypeError("cannot add two pointers")
    if is_pointer(lhs):
        return _pointer_offset(lhs, rhs)
    if is_pointer(rhs):
        return _pointer_offset(rhs, lhs)
    return _binary("add", *_binary_operands(lhs, rhs, op_name="+"))


def sub(lhs, rhs) -> tensor:
    if is_pointer(lhs) and not is_pointer(rhs):
        return _pointer_offset(lhs, rhs, negate=True)
    if is_pointer(rhs):
        raise TypeError("cannot subtract a pointer; use integer offsets")
    return _binary("sub", *_binary_operands(lhs, rhs, op_name="-"))


def mul(lhs, rhs) -> tensor:
    return _binary("mul", *_binary_operands(lhs, rhs, op_name="*"))


def _in_fp32_if_16_bit(a: tensor, b: tensor) -> tuple:
    """Triton's computation type of ``/`` and ``%``: 16-bit floats (which PTX cannot divide)
    are computed in fp32, and the result stays fp32."""
    if a.dtype.is_fp16() or a.dtype.is_bf16():
        return cast(a, T.float32), cast(b, T.float32)
    return a, b


def truediv(lhs, rhs) -> tensor:
    """``/``: integers divide as fp32, 16-bit floats too (Triton's rules); other floats keep
    the promoted type."""
    a, b = _binary_operands(lhs, rhs, op_name="/", check_signedness=True)
    if not a.dtype.is_floating():
        a, b = cast(a, T.float32), cast(b, T.float32)
    return _binary("fdiv", *_in_fp32_if_16_bit(a, b))


def fdiv(lhs, rhs, ieee_rounding: bool) -> tensor:
    """``tl.math.fdiv``: floats only (16-bit ones in fp32, as ``/``); rounded to nearest
    (Triton's precise_divf) with ``ieee_rounding``, else the fast division of ``/``."""
    a, b = _binary_operands(lhs, rhs, allow_int=False, op_name="fdiv")
    if ieee_rounding:
        return math_function("div_rn", *_in_fp32_if_16_bit(a, b), ieee=True)
    return _binary("fdiv", *_in_fp32_if_16_bit(a, b))


def floordiv(lhs, rhs) -> tensor:
    """``//`` on tensors rounds toward zero, like C (constexpr-only expressions follow Python)."""
    a, b = _binary_operands(lhs, rhs, allow_float=False, op_name="//", check_signedness=True)
    return _binary("idiv", a, b)


def mod(lhs, rhs) -> tensor:
    """``%`` on tensors: C remainder (sign of the dividend); fmod for floats (16-bit ones in
    fp32, as ``/``)."""
    a, b = _binary_operands(lhs, rhs, op_name="%", check_signedness=True)
    if a.dtype.is_floating():
        return _binary("frem", *_in_fp32_if_16_bit(a, b))
    return _binary("irem", a, b)


def bitwise(opcode, lhs, rhs) -> tensor:
    symbol = {"and": "&", "or": "|", "xor": "^", "shl": "<<", "shr": ">>"}[opcode]
    a, b = _binary_operands(lhs, rhs, allow_float=False, op_name=symbol)
    if opcode == "shr":
        # As in Triton, the tensor operand's own signedness (the left one's, when both are
        # tensors) decides between an arithmetic and a logical shift, whatever type the
        # operands are promoted to: int8 >> uint8 shifts the sign in, on uint8 bits.
        decider = lhs if isinstance(lhs, tensor) else rhs
        return _shift_right(a, b, arithmetic=decider.dtype.is_int_signed())
    return _binary(opcode, a, b)


def _shift_right(a: tensor, b: tensor, arithmetic: bool) -> tensor:
    """kir ``shr`` is arithmetic on signed and logical on unsigned types: a shift of the
    other kind goes through the same bits in the type of the other signedness."""
    if a.dtype.is_bool() or a.dtype.is_int_signed() == arithmetic:
        return _binary("shr", a, b)
    other = T.DTYPE_BY_NAME[f"{'' if arithmetic else 'u'}int{a.dtype.bits}"]
    shifted = _binary("shr", cast(a, other, bitcast=True), cast(b, other, bitcast=True))
    return cast(shifted, a.dtype, bitcast=True)


def compare(predicate, lhs, rhs) -> tensor:
    if is_pointer(lhs) or is_pointer(rhs):
        if not (is_pointer(lhs) and is_pointer(rhs)) or predicate not in ("eq", "ne"):
            raise TypeError("pointers compare only with == and != against pointers")
        shape = broadcast_shapes(lhs.type.shape, rhs.type.shape)
        a, b = broadcast_to_shape(lhs, shape), broadcast_to_shape(rhs, shape)
    else:
        a, b = _binary_operands(lhs, rhs, op_name="comparison")
    return _arithmetic("cmp", [a, b], BlockType(T.int1, a.type.shape), predicate=predicate)


def _propagates_nan(propagate_nan) -> bool:
    """Whether ``propagate_nan`` (None, or a tl.PropagateNan) asks for NaN results."""
    mode = unwrap(propagate_nan)
    if mode is None or mode is PropagateNan.NONE:
        return False
    if mode is PropagateNan.ALL:
        return True
    raise TypeError(f"propagate_nan must be tl.PropagateNan.NONE or ALL, got {mode!r}")


def minimum(x, y, propagate_nan=None) -> tensor:
    a, b = _binary_operands(x, y, op_name="minimum")
    if _propagates_nan(propagate_nan) and a.dtype.is_floating():
        return _binary("min", a, b, propagate_nan=True)
    return _binary("min", a, b)


def maximum(x, y, propagate_nan=None) -> tensor:
    a, b = _binary_operands(x, y, op_name="maximum")
    if _propagates_nan(propagate_nan) and a.dtype.is_floating():
        return _binary("max", a, b, propagate_nan=True)
    return _binary("max", a, b)


# ---------------------------------------------------------------------------------------
# Unary operators and math
# ---------------------------------------------------------------------------------------

def neg(x) -> tensor:
    x = to_tensor(x)
    if x.dtype.is_ptr():
        raise TypeError("cannot negate a pointer")
    if x.dtype.is_fp8():   # flips the sign bit, as for any IEEE float
        return _with_sign_bits(x, "xor", 0x80)
    return emit("neg", [x], x.type)


def _with_sign_bits(x: tensor, opcode: str, mask: int) -> tensor:
    """An 8-bit float with its code combined with ``mask`` (and / xor on the sign bit)."""
    bits = cast(x, T.uint8, bitcast=True)
    return cast(emit(opcode, [bits, constant(mask, T.uint8, bits.type.shape)], bits.type),
                x.dtype, bitcast=True)


def invert(x) -> tensor:
    x = to_tensor(x)
    if not x.dtype.is_int():
        raise TypeError(f"~ needs an integer or boolean operand, got {x.dtype}")
    return emit("not", [x], x.type)


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
        return _with_sign_bits(x, "and", 0x7F)
    return _arithmetic(opcode, [x], x.type)


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
# is one row here or in LIBDEVICE_FUNCTIONS below, one in aotk.interpreter.elementwise.MATH
# and one in aotk.backend.elementwise.LIBDEVICE; the builtins of aotk.language, tl.math and
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
        return _broadcast_together([to_tensor(v) for v in operands])
    values = _common_operands(*operands) if row.arity > 1 else [to_tensor(operands[0])]
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


def _broadcast_together(values: list) -> list:
    """The tensors ``values`` broadcast to their common shape."""
    shape = ()
    for v in values:
        shape = broadcast_shapes(shape, v.type.shape)
    return [broadcast_to_shape(v, shape) for v in values]


def _common_operands(*values):
    """Promotes several operands together (literals joining by the kind rule) and broadcasts."""
    tensors = [v for v in values if isinstance(v, tensor)]
    if not tensors:
        raise TypeError("at least one operand must be a tensor")
    dtype = tensors[0].dtype
    for t in tensors[1:]:
        dtype = promote_dtypes(dtype, t.dtype)
    for v in values:
        if not isinstance(v, tensor):
            dtype = promote_with_literal(dtype, v)
    return _broadcast_together([cast(to_tensor(v) if isinstance(v, tensor) else constant(v, dtype),
                                     dtype) for v in values])


def fma(x, y, z) -> tensor:
    a, b, c = _common_operands(x, y, z)
    if not a.dtype.is_floating():
        raise TypeError(f"tl.fma needs floating-point operands, got {a.dtype}")
    return _arithmetic("fma", [a, b, c], a.type)


def where(condition, x, y) -> tensor:
    condition = cast(to_tensor(condition), T.int1)
    if any(isinstance(v, tensor) and v.dtype.is_ptr() for v in (x, y)):
        # Pointers are chosen between, not promoted: both must point to one type (Triton's)
        x, y = to_tensor(x), to_tensor(y)
        if x.dtype != y.dtype:
            raise TypeError(f"invalid operands of type {x.dtype} and {y.dtype} to tl.where: "
                            "pointers must have the same type")
        x, y = _broadcast_together([x, y])
    elif isinstance(x, tensor) or isinstance(y, tensor):
        x, y = _common_operands(x, y)
    else:
        dtype = promote_dtypes(literal_type(x), literal_type(y))
        x, y = constant(x, dtype), constant(y, dtype)
    shape = broadcast_shapes(broadcast_shapes(condition.type.shape, x.type.shape), y.type.shape)
    condition, x, y = (broadcast_to_shape(v, shape) for v in (condition, x, y))
    return emit("select", [condition, x, y], x.type)


def sigmoid(x) -> tensor:
    x = to_tensor(x)
    if not x.dtype.is_floating():
        raise TypeError(f"tl.sigmoid needs a floating-point operand, got {x.dtype}")
    one = constant(1.0, x.dtype, x.type.shape)
    return _binary("fdiv", one, _binary("add", one, unary_math("exp", neg(x))))


def clamp(x, lo, hi, propagate_nan=None) -> tensor:
    return minimum(maximum(x, lo, propagate_nan), hi, propagate_nan)


# ---------------------------------------------------------------------------------------
# Casts
# ---------------------------------------------------------------------------------------

ROUNDING_MODES = ("rtne", "rtz")


def _pointer_integer_cast(x: tensor, dtype) -> tensor:
    """Triton's casts between addresses and integers: an integer becomes the address it holds
    (zero-extended to 64 bits, as LLVM's inttoptr); an address becomes an int64 / uint64
    (its value) or an int1 (whether it is not null)."""
    if dtype.is_ptr():
        if not x.dtype.is_int():
            raise TypeError(f"cannot cast {x.dtype} to {dtype}: only integers become addresses")
        if x.dtype.bits < 64:
            unsigned = T.DTYPE_BY_NAME[f"uint{max(8, x.dtype.bits)}"]
            x = cast(cast(x, unsigned, bitcast=x.dtype.bits >= 8), T.uint64)
        return emit("cast", [x], x.type.with_element(dtype), bitcast=True)
    if dtype.is_bool():
        return compare("ne", _pointer_integer_cast(x, T.int64), 0)
    if not dtype.is_int() or dtype.bits != 64:
        raise TypeError(f"cannot cast {x.dtype} to {dtype}: an address becomes a 64-bit "
                        "integer (or int1)")
    return emit("cast", [x], x.type.with_element(dtype), bitcast=True)


def _cast_e4b15(x: tensor, dtype) -> tensor:
    """A value cast to or from float8e4b15, as Triton's ``convert_custom_float8``: to it
    from float16 or float32 (a bfloat16 is widened to float32 first, exactly), with the one
    rounding ``aotk.ir.float8`` describes (``fp_downcast_rounding`` changes nothing, as in
    Triton); from it to float16 or float32 (exact), and to bfloat16 or float64 through
    float32 (exact too)."""
    if dtype.is_fp8e4b15():
        if x.dtype.is_bf16():
            x = cast(x, T.float32)
        if not (x.dtype.is_fp16() or x.dtype.is_fp32()):
            raise TypeError(f"cannot cast {x.dtype} to float8e4b15: it is converted to from "
                            "float16 and float32 only (as in Triton); cast to one of them first")
        return emit("cast", [x], x.type.with_element(dtype))
    if not dtype.is_floating() or dtype.is_fp8():
        raise TypeError(f"cannot cast float8e4b15 to {dtype}: it converts to float16 and "
                        "float32 (as in Triton), and to bfloat16 and float64; cast to float32 "
                        "first")
    if dtype.is_fp16() or dtype.is_fp32():
        return emit("cast", [x], x.type.with_element(dtype))
    return cast(emit("cast", [x], x.type.with_element(T.float32)), dtype)


def convert_custom_float8(x, dtype) -> tensor:
    """``tl.extra.cuda.convert_custom_float8_sm80/sm70(x, dtype)``: Triton's float8e4b15
    conversions by name, float16 or float32 to float8e4b15 and back (what ``x.to(dtype)``
    does for these types too; the sm70 and sm80 forms give the same bits)."""
    x = to_tensor(x)
    dtype = unwrap(dtype)
    if x.dtype.is_fp8e4b15() and isinstance(dtype, DType) and (dtype.is_fp16()
                                                                or dtype.is_fp32()):
        return cast(x, dtype)
    if (x.dtype.is_fp16() or x.dtype.is_fp32()) and dtype == T.float8e4b15:
        return cast(x, dtype)
    raise TypeError(f"convert_custom_float8 converts float16 or float32 to float8e4b15 and "
                    f"float8e4b15 to float16 or float32, not {x.dtype} to {dtype}")


def cast(x, dtype, bitcast: bool = False, fp_downcast_rounding=None) -> tensor:
    """``x.to(dtype)``: a value conversion, or with ``bitcast`` the same bits read as
    ``dtype``. A float narrowed to a smaller float rounds to nearest even, or towards zero
    with ``fp_downcast_rounding="rtz"`` (Triton's only two modes; only for such a cast)."""
    x = to_tensor(x)
    if isinstance(dtype, constexpr):
        dtype = dtype.value
    if not isinstance(dtype, (DType, PointerType)):
        raise TypeError(f"cast target must be a tl dtype, got {dtype!r}")
    rounding = unwrap(fp_downcast_rounding)
    if rounding is not None:
        narrows = (x.dtype.is_floating() and dtype.is_floating()
                   and dtype.primitive_bitwidth < x.dtype.primitive_bitwidth)
        if not narrows or bitcast:
            raise ValueError("fp_downcast_rounding should be set only for truncating fp "
                             f"conversions. Source scalar type is {x.dtype} and destination "
                             f"type is {dtype}")
        if rounding not in ROUNDING_MODES:
            raise ValueError(f"fp_downcast_rounding must be one of {', '.join(ROUNDING_MODES)}, "
                             f"got {rounding!r}")
    if x.dtype == dtype:
        return x
    if bitcast:
        if x.dtype.bits != dtype.bits:
            raise TypeError(f"cannot bitcast {x.dtype} ({x.dtype.bits} bits) to {dtype} "
                            f"({dtype.bits} bits): widths differ")
        return emit("cast", [x], x.type.with_element(dtype), bitcast=True)
    if x.dtype.is_ptr() != dtype.is_ptr():
        return _pointer_integer_cast(x, dtype)
    if not dtype.is_ptr() and (dtype.is_fp8e4b15() or x.dtype.is_fp8e4b15()):
        return _cast_e4b15(x, dtype)
    if rounding == "rtz":   # the default, rtne, is what every narrowing cast does unmarked
        return emit("cast", [x], x.type.with_element(dtype), rounding="rtz")
    # Pointer to pointer keeps the address: only what a load reads through it changes.
    return emit("cast", [x], x.type.with_element(dtype), bitcast=x.dtype.is_ptr())


