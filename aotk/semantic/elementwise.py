"""Typing rules of elementwise ops: the arithmetic, bitwise and comparison operators,
pointer arithmetic, ``tl.minimum`` / ``maximum`` / ``clamp`` / ``where``, the unary
operators, and casts (``tl.cast``, ``x.to()``). The math functions are ``semantic.math``.

In: ``tensor`` / ``constexpr`` / Python values. Out: typed ``tensor``s of the operands'
broadcast shape. Operands meet in one element type by ``promotion``'s rules.
"""
from __future__ import annotations

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

def binary_operands(lhs, rhs, allow_float=True, allow_int=True, op_name="op",
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


def binary(opcode, a: tensor, b: tensor, **attrs) -> tensor:
    return arithmetic(opcode, [a, b], a.type, **attrs)


def arithmetic(opcode, operands, result_type: BlockType, **attrs) -> tensor:
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
    return binary("add", *binary_operands(lhs, rhs, op_name="+"))


def sub(lhs, rhs) -> tensor:
    if is_pointer(lhs) and not is_pointer(rhs):
        return _pointer_offset(lhs, rhs, negate=True)
    if is_pointer(rhs):
        raise TypeError("cannot subtract a pointer; use integer offsets")
    return binary("sub", *binary_operands(lhs, rhs, op_name="-"))


def mul(lhs, rhs) -> tensor:
    return binary("mul", *binary_operands(lhs, rhs, op_name="*"))


def in_fp32_if_16_bit(a: tensor, b: tensor) -> tuple:
    """Triton's computation type of ``/`` and ``%``: 16-bit floats (which PTX cannot divide)
    are computed in fp32, and the result stays fp32."""
    if a.dtype.is_fp16() or a.dtype.is_bf16():
        return cast(a, T.float32), cast(b, T.float32)
    return a, b


def truediv(lhs, rhs) -> tensor:
    """``/``: integers divide as fp32, 16-bit floats too (Triton's rules); other floats keep
    the promoted type."""
    a, b = binary_operands(lhs, rhs, op_name="/", check_signedness=True)
    if not a.dtype.is_floating():
        a, b = cast(a, T.float32), cast(b, T.float32)
    return binary("fdiv", *in_fp32_if_16_bit(a, b))


def floordiv(lhs, rhs) -> tensor:
    """``//`` on tensors rounds toward zero, like C (constexpr-only expressions follow Python)."""
    a, b = binary_operands(lhs, rhs, allow_float=False, op_name="//", check_signedness=True)
    return binary("idiv", a, b)


def mod(lhs, rhs) -> tensor:
    """``%`` on tensors: C remainder (sign of the dividend); fmod for floats (16-bit ones in
    fp32, as ``/``)."""
    a, b = binary_operands(lhs, rhs, op_name="%", check_signedness=True)
    if a.dtype.is_floating():
        return binary("frem", *in_fp32_if_16_bit(a, b))
    return binary("irem", a, b)


def bitwise(opcode, lhs, rhs) -> tensor:
    symbol = {"and": "&", "or": "|", "xor": "^", "shl": "<<", "shr": ">>"}[opcode]
    a, b = binary_operands(lhs, rhs, allow_float=False, op_name=symbol)
    if opcode == "shr":
        # As in Triton, the tensor operand's own signedness (the left one's, when both are
        # tensors) decides between an arithmetic and a logical shift, whatever type the
        # operands are promoted to: int8 >> uint8 shifts the sign in, on uint8 bits.
        decider = lhs if isinstance(lhs, tensor) else rhs
        return _shift_right(a, b, arithmetic=decider.dtype.is_int_signed())
    return binary(opcode, a, b)


def _shift_right(a: tensor, b: tensor, arithmetic: bool) -> tensor:
    """kir ``shr`` is arithmetic on signed and logical on unsigned types: a shift of the
    other kind goes through the same bits in the type of the other signedness."""
    if a.dtype.is_bool() or a.dtype.is_int_signed() == arithmetic:
        return binary("shr", a, b)
    other = T.DTYPE_BY_NAME[f"{'' if arithmetic else 'u'}int{a.dtype.bits}"]
    shifted = binary("shr", cast(a, other, bitcast=True), cast(b, other, bitcast=True))
    return cast(shifted, a.dtype, bitcast=True)


def compare(predicate, lhs, rhs) -> tensor:
    if is_pointer(lhs) or is_pointer(rhs):
        if not (is_pointer(lhs) and is_pointer(rhs)) or predicate not in ("eq", "ne"):
            raise TypeError("pointers compare only with == and != against pointers")
        shape = broadcast_shapes(lhs.type.shape, rhs.type.shape)
        a, b = broadcast_to_shape(lhs, shape), broadcast_to_shape(rhs, shape)
    else:
        a, b = binary_operands(lhs, rhs, op_name="comparison")
    return arithmetic("cmp", [a, b], BlockType(T.int1, a.type.shape), predicate=predicate)


def _propagates_nan(propagate_nan) -> bool:
    """Whether ``propagate_nan`` (None, or a tl.PropagateNan) asks for NaN results."""
    mode = unwrap(propagate_nan)
    if mode is None or mode is PropagateNan.NONE:
        return False
    if mode is PropagateNan.ALL:
        return True
    raise TypeError(f"propagate_nan must be tl.PropagateNan.NONE or ALL, got {mode!r}")


def minimum(x, y, propagate_nan=None) -> tensor:
    a, b = binary_operands(x, y, op_name="minimum")
    if _propagates_nan(propagate_nan) and a.dtype.is_floating():
        return binary("min", a, b, propagate_nan=True)
    return binary("min", a, b)


def maximum(x, y, propagate_nan=None) -> tensor:
    a, b = binary_operands(x, y, op_name="maximum")
    if _propagates_nan(propagate_nan) and a.dtype.is_floating():
        return binary("max", a, b, propagate_nan=True)
    return binary("max", a, b)


# ---------------------------------------------------------------------------------------
# Unary operators and math
# ---------------------------------------------------------------------------------------

def neg(x) -> tensor:
    x = to_tensor(x)
    if x.dtype.is_ptr():
        raise TypeError("cannot negate a pointer")
    if x.dtype.is_fp8():   # flips the sign bit, as for any IEEE float
        return with_sign_bits(x, "xor", 0x80)
    return emit("neg", [x], x.type)


def with_sign_bits(x: tensor, opcode: str, mask: int) -> tensor:
    """An 8-bit float with its code combined with ``mask`` (and / xor on the sign bit)."""
    bits = cast(x, T.uint8, bitcast=True)
    return cast(emit(opcode, [bits, constant(mask, T.uint8, bits.type.shape)], bits.type),
                x.dtype, bitcast=True)


def invert(x) -> tensor:
    x = to_tensor(x)
    if not x.dtype.is_int():
        raise TypeError(f"~ needs an integer or boolean operand, got {x.dtype}")
    return emit("not", [x], x.type)


def broadcast_together(values: list) -> list:
    """The tensors ``values`` broadcast to their common shape."""
    shape = ()
    for v in values:
        shape = broadcast_shapes(shape, v.type.shape)
    return [broadcast_to_shape(v, shape) for v in values]


def common_operands(*values):
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
    return broadcast_together([cast(to_tensor(v) if isinstance(v, tensor) else constant(v, dtype),
                                     dtype) for v in values])


def where(condition, x, y) -> tensor:
    condition = cast(to_tensor(condition), T.int1)
    if any(isinstance(v, tensor) and v.dtype.is_ptr() for v in (x, y)):
        # Pointers are chosen between, not promoted: both must point to one type (Triton's)
        x, y = to_tensor(x), to_tensor(y)
        if x.dtype != y.dtype:
            raise TypeError(f"invalid operands of type {x.dtype} and {y.dtype} to tl.where: "
                            "pointers must have the same type")
        x, y = broadcast_together([x, y])
    elif isinstance(x, tensor) or isinstance(y, tensor):
        x, y = common_operands(x, y)
    else:
        dtype = promote_dtypes(literal_type(x), literal_type(y))
        x, y = constant(x, dtype), constant(y, dtype)
    shape = broadcast_shapes(broadcast_shapes(condition.type.shape, x.type.shape), y.type.shape)
    condition, x, y = (broadcast_to_shape(v, shape) for v in (condition, x, y))
    return emit("select", [condition, x, y], x.type)


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


