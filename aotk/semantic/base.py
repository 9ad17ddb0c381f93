"""Typing rules shared by every construct: the active builder, literals and promotion,
block shapes and broadcasting, binary and unary operators, casts.

In: ``tensor`` / ``constexpr`` / Python values. Out: typed ``tensor``s whose kir ops were
appended through the active builder.
"""
from __future__ import annotations

import contextlib
import threading

from ..ir import types as T
from ..ir.kir import Builder
from ..ir.types import BlockType, DType, PointerType
from ..language.core import constexpr, tensor

MAX_BLOCK_NUMEL = 1 << 20

_state = threading.local()


@contextlib.contextmanager
def building(builder: Builder, inline=None):
    """Makes ``builder`` the target of every rule while a kernel body is generated.

    ``inline(fn, args)`` is the frontend's hook for rules that take an ``@aotk.jit`` function
    (a reduce/scan combine): it inlines ``fn`` on ``args`` at the builder's insertion point
    and returns what ``fn`` returns."""
    previous = getattr(_state, "builder", None), getattr(_state, "inline", None)
    _state.builder, _state.inline = builder, inline
    try:
        yield builder
    finally:
        _state.builder, _state.inline = previous


def inline_function(fn, args: list):
    """Generates the body of the ``@aotk.jit`` function ``fn`` on ``args`` (tensors) at the
    insertion point; returns its return value."""
    inline = getattr(_state, "inline", None)
    if inline is None:
        raise RuntimeError("no frontend is generating a kernel: cannot inline a function")
    return inline(fn, args)


def _builder() -> Builder:
    b = getattr(_state, "builder", None)
    if b is None:
        raise RuntimeError("aotk.language functions can only be called inside an @aotk.jit kernel")
    return b


def _emit(opcode, operands, result_type, **attrs) -> tensor | None:
    value = _builder().create(opcode, [o.handle for o in operands], result_type, **attrs)
    return tensor(value) if value is not None else None


# ---------------------------------------------------------------------------------------
# Literals and promotion
# ---------------------------------------------------------------------------------------

def is_literal(x) -> bool:
    return isinstance(x, (constexpr, bool, int, float))


def _value(x):
    return x.value if isinstance(x, constexpr) else x


def _kind_rank(dtype) -> int:
    return {"bool": 0, "int": 1, "uint": 1, "float": 2}[dtype.kind]


def literal_type(value) -> DType:
    """The dtype a Python literal takes when it has to become a value on its own."""
    value = _value(value)
    if isinstance(value, bool):
        return T.int1
    if isinstance(value, int):
        for candidate, lo, hi in ((T.int32, -2**31, 2**31), (T.uint32, 0, 2**32),
                                  (T.int64, -2**63, 2**63), (T.uint64, 0, 2**64)):
            if lo <= value < hi:
                return candidate
        raise TypeError(f"integer literal {value} does not fit in 64 bits")
    if isinstance(value, float):
        if value != value or abs(value) <= 3.4028234663852886e38 or value in (float("inf"), float("-inf")):
            return T.float32
        return T.float64
    raise TypeError(f"{value!r} of type {type(value).__name__} cannot be used as a kernel value")


def promote_dtypes(a: DType, b: DType) -> DType:
    """The seed's promotion between two tensor element types."""
    # 1. The higher kind wins: bool < int/uint < float.
    if _kind_rank(a) != _kind_rank(b):
        return a if _kind_rank(a) > _kind_rank(b) else b
    if a == b:
        return a
    # 2. Within floats: the wider wins; at 16 bits fp16 beats bf16.
    if a.is_floating():
        if a.bits != b.bits:
            return a if a.bits > b.bits else b
        return T.float16
    # 3. Within integers: the wider wins; at equal width unsigned beats signed.
    if a.bits != b.bits:
        return a if a.bits > b.bits else b
    return a if a.is_int_unsigned() else b


def _literal_dtype_against(tensor_dtype: DType, literal) -> DType:
    """Result element type of (tensor, literal): the literal joins only with a higher kind."""
    lit_ty = literal_type(literal)
    if _kind_rank(lit_ty) <= _kind_rank(tensor_dtype):
        return tensor_dtype
    return promote_dtypes(tensor_dtype, lit_ty)


def _check_literal_fits(value, dtype: DType):
    value = _value(value)
    if dtype.is_floating() or isinstance(value, float) or dtype.is_bool():
        return
    if not (-(2 ** (dtype.bits - 1)) <= int(value) < 2 ** dtype.bits):
        raise TypeError(f"literal {value} does not fit in {dtype.name}; "
                        f"cast the tensor to a wider type first")


def constant(value, dtype: DType, shape=()) -> tensor:
    """A literal as a typed value: ints wrap into dtype's range, floats round."""
    value = _value(value)
    if dtype.is_bool():
        value = bool(value)
    elif dtype.is_floating():
        value = float(value)
    else:
        value = int(value) & ((1 << dtype.bits) - 1)
        if dtype.is_int_signed() and value >= 1 << (dtype.bits - 1):
            value -= 1 << dtype.bits
    return _emit("constant", [], BlockType(dtype, tuple(shape)), value=value)


def to_tensor(x) -> tensor:
    if isinstance(x, tensor):
        return x
    return constant(x, literal_type(x))


# ---------------------------------------------------------------------------------------
# Shapes
# ---------------------------------------------------------------------------------------

def validate_block_shape(shape) -> tuple:
    shape = tuple(int(_value(s)) for s in shape)
    numel = 1
    for dim in shape:
        if dim <= 0 or dim & (dim - 1):
            raise ValueError(f"block dimensions must be powers of two, got shape {list(shape)}")
        numel *= dim
    if numel > MAX_BLOCK_NUMEL:
        raise ValueError(f"a block holds at most {MAX_BLOCK_NUMEL} elements, got {numel}")
    return shape


def broadcast_shapes(a: tuple, b: tuple) -> tuple:
    """NumPy broadcasting: align right, dimensions equal or 1."""
    rank = max(len(a), len(b))
    a = (1,) * (rank - len(a)) + tuple(a)
    b = (1,) * (rank - len(b)) + tuple(b)
    out = []
    for x, y in zip(a, b):
        if x != y and 1 not in (x, y):
            raise ValueError(f"cannot broadcast shapes {list(a)} and {list(b)}")
        out.append(max(x, y))
    return tuple(out)


def broadcast_to_shape(x: tensor, shape: tuple) -> tensor:
    shape = tuple(shape)
    if x.type.shape == shape:
        return x
    if not x.type.shape:
        return _emit("splat", [x], x.type.with_shape(shape))
    while len(x.type.shape) < len(shape):
        x = expand_dims(x, 0)
    if broadcast_shapes(x.type.shape, shape) != shape:
        raise ValueError(f"cannot broadcast shape {list(x.type.shape)} to {list(shape)}")
    return _emit("broadcast", [x], x.type.with_shape(shape))


def expand_dims(x: tensor, axis) -> tensor:
    x = to_tensor(x)
    axes = [int(_value(a)) for a in (axis if isinstance(axis, (tuple, list)) else [axis])]
    rank_out = len(x.type.shape) + len(axes)
    axes = sorted(a + rank_out if a < 0 else a for a in axes)
    for a in axes:
        if not 0 <= a < rank_out:
            raise ValueError(f"expand_dims axis {a} out of range for a result of rank {rank_out}")
    for a in axes:
        shape = list(x.type.shape)
        shape.insert(a, 1)
        x = _emit("expand_dims", [x], x.type.with_shape(shape), axis=a)
    return x


def subscript(x: tensor, index) -> tensor:
    """``x[:, None]`` style indexing: only full slices and None are meaningful on blocks."""
    index = _value(index)
    if not isinstance(index, tuple):
        index = (index,)
    dim = 0
    for item in index:
        item = _value(item)
        if item is None:
            x = expand_dims(x, dim)
            dim += 1
        elif isinstance(item, slice) and item == slice(None, None, None):
            dim += 1
        else:
            raise TypeError(f"unsupported index {item!r}: blocks take only ':' and None, "
                            "e.g. x[:, None]")
    return x


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
        dtype = _literal_dtype_against(rhs.dtype, lhs)
        _check_literal_fits(lhs, dtype)
        lhs = constant(lhs, dtype)
    elif rhs_literal:
        dtype = _literal_dtype_against(lhs.dtype, rhs)
        _check_literal_fits(rhs, dtype)
        rhs = constant(rhs, dtype)
    else:
        for side in (lhs, rhs):
            if side.dtype.is_ptr():
                raise TypeError(f"{op_name} is not defined on pointers")
        if check_signedness and lhs.dtype.kind in ("int", "uint") and \
                rhs.dtype.kind in ("int", "uint") and lhs.dtype.kind != rhs.dtype.kind:
            raise TypeError(
                f"cannot use {op_name} with {lhs.dtype} and {rhs.dtype}: they have different "
                "signedness, which is unlikely to give a useful answer; cast them to the same "
                "signedness")
        dtype = promote_dtypes(lhs.dtype, rhs.dtype)
    if dtype.is_ptr():
        raise TypeError(f"{op_name} is not defined on pointers")
    if dtype.is_floating() and not allow_float:
        raise TypeError(f"{op_name} needs integer operands, got {dtype}")
    if dtype.is_int() and not allow_int:
        raise TypeError(f"{op_name} needs floating-point operands, got {dtype}")
    lhs, rhs = cast(lhs, dtype), cast(rhs, dtype)
    shape = broadcast_shapes(lhs.type.shape, rhs.type.shape)
    return broadcast_to_shape(lhs, shape), broadcast_to_shape(rhs, shape)


def _binary(opcode, a: tensor, b: tensor) -> tensor:
    return _emit(opcode, [a, b], a.type)


def _pointer_offset(ptr: tensor, offset, negate=False) -> tensor:
    offset = to_tensor(offset)
    if not offset.dtype.is_int() or offset.dtype.is_bool():
        raise TypeError(f"a pointer moves by an integer offset, not {offset.dtype}")
    if negate:
        offset = neg(offset)
    shape = broadcast_shapes(ptr.type.shape, offset.type.shape)
    ptr, offset = broadcast_to_shape(ptr, shape), broadcast_to_shape(offset, shape)
    return _emit("addptr", [ptr, offset], ptr.type)


def _is_ptr(x) -> bool:
    return isinstance(x, tensor) and x.dtype.is_ptr()


def add(lhs, rhs) -> tensor:
    if _is_ptr(lhs) and _is_ptr(rhs):
        raise TypeError("cannot add two pointers")
    if _is_ptr(lhs):
        return _pointer_offset(lhs, rhs)
    if _is_ptr(rhs):
        return _pointer_offset(rhs, lhs)
    return _binary("add", *_binary_operands(lhs, rhs, op_name="+"))


def sub(lhs, rhs) -> tensor:
    if _is_ptr(lhs) and not _is_ptr(rhs):
        return _pointer_offset(lhs, rhs, negate=True)
    if _is_ptr(rhs):
        raise TypeError("cannot subtract a pointer; use integer offsets")
    return _binary("sub", *_binary_operands(lhs, rhs, op_name="-"))


def mul(lhs, rhs) -> tensor:
    return _binary("mul", *_binary_operands(lhs, rhs, op_name="*"))


def truediv(lhs, rhs) -> tensor:
    """``/``: integers divide as float32 (Triton's rule); floats keep the promoted type."""
    a, b = _binary_operands(lhs, rhs, op_name="/")
    if not a.dtype.is_floating():
        a, b = cast(a, T.float32), cast(b, T.float32)
    return _binary("fdiv", a, b)


def floordiv(lhs, rhs) -> tensor:
    """``//`` on tensors rounds toward zero, like C (constexpr-only expressions follow Python)."""
    a, b = _binary_operands(lhs, rhs, allow_float=False, op_name="//", check_signedness=True)
    return _binary("idiv", a, b)


def mod(lhs, rhs) -> tensor:
    """``%`` on tensors: C remainder (sign of the dividend); fmod for floats."""
    a, b = _binary_operands(lhs, rhs, op_name="%", check_signedness=True)
    return _binary("frem" if a.dtype.is_floating() else "irem", a, b)


def bitwise(opcode, lhs, rhs) -> tensor:
    symbol = {"and": "&", "or": "|", "xor": "^", "shl": "<<", "shr": ">>"}[opcode]
    return _binary(opcode, *_binary_operands(lhs, rhs, allow_float=False, op_name=symbol))


def compare(predicate, lhs, rhs) -> tensor:
    if _is_ptr(lhs) or _is_ptr(rhs):
        if not (_is_ptr(lhs) and _is_ptr(rhs)) or predicate not in ("eq", "ne"):
            raise TypeError("pointers compare only with == and != against pointers")
        shape = broadcast_shapes(lhs.type.shape, rhs.type.shape)
        a, b = broadcast_to_shape(lhs, shape), broadcast_to_shape(rhs, shape)
    else:
        a, b = _binary_operands(lhs, rhs, op_name="comparison")
    return _emit("cmp", [a, b], BlockType(T.int1, a.type.shape), predicate=predicate)


def minimum(x, y, propagate_nan=None) -> tensor:
    return _binary("min", *_binary_operands(x, y, op_name="minimum"))


def maximum(x, y, propagate_nan=None) -> tensor:
    return _binary("max", *_binary_operands(x, y, op_name="maximum"))


# ---------------------------------------------------------------------------------------
# Unary operators and math
# ---------------------------------------------------------------------------------------

def neg(x) -> tensor:
    x = to_tensor(x)
    if x.dtype.is_ptr():
        raise TypeError("cannot negate a pointer")
    return _emit("neg", [x], x.type)


def invert(x) -> tensor:
    x = to_tensor(x)
    if not x.dtype.is_int():
        raise TypeError(f"~ needs an integer or boolean operand, got {x.dtype}")
    return _emit("not", [x], x.type)


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
    return _emit(opcode, [x], x.type)


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
            dtype = _literal_dtype_against(dtype, v)
    out = [cast(to_tensor(v) if isinstance(v, tensor) else constant(v, dtype), dtype) for v in values]
    shape = ()
    for v in out:
        shape = broadcast_shapes(shape, v.type.shape)
    return [broadcast_to_shape(v, shape) for v in out]


def fma(x, y, z) -> tensor:
    a, b, c = _common_operands(x, y, z)
    if not a.dtype.is_floating():
        raise TypeError(f"tl.fma needs floating-point operands, got {a.dtype}")
    return _emit("fma", [a, b, c], a.type)


def where(condition, x, y) -> tensor:
    condition = cast(to_tensor(condition), T.int1)
    if isinstance(x, tensor) or isinstance(y, tensor):
        x, y = _common_operands(x, y)
    else:
        dtype = promote_dtypes(literal_type(x), literal_type(y))
        x, y = constant(x, dtype), constant(y, dtype)
    shape = broadcast_shapes(broadcast_shapes(condition.type.shape, x.type.shape), y.type.shape)
    condition, x, y = (broadcast_to_shape(v, shape) for v in (condition, x, y))
    return _emit("select", [condition, x, y], x.type)


def sigmoid(x) -> tensor:
    x = to_tensor(x)
    if not x.dtype.is_floating():
        raise TypeError(f"tl.sigmoid needs a floating-point operand, got {x.dtype}")
    one = constant(1.0, x.dtype, x.type.shape)
    return _binary("fdiv", one, _binary("add", one, unary_math("exp", neg(x))))


def clamp(x, lo, hi, propagate_nan=None) -> tensor:
    return minimum(maximum(x, lo), hi)


# ---------------------------------------------------------------------------------------
# Casts
# ---------------------------------------------------------------------------------------

def cast(x, dtype, bitcast: bool = False) -> tensor:
    x = to_tensor(x)
    if isinstance(dtype, constexpr):
        dtype = dtype.value
    if not isinstance(dtype, (DType, PointerType)):
        raise TypeError(f"cast target must be a tl dtype, got {dtype!r}")
    if x.dtype == dtype:
        return x
    if bitcast:
        if x.dtype.bits != dtype.bits:
            raise TypeError(f"cannot bitcast {x.dtype} ({x.dtype.bits} bits) to {dtype} "
                            f"({dtype.bits} bits): widths differ")
        return _emit("cast", [x], x.type.with_element(dtype), bitcast=True)
    if x.dtype.is_ptr() != dtype.is_ptr():
        raise TypeError(f"cannot cast {x.dtype} to {dtype}")
    # Pointer to pointer keeps the address: only what a load reads through it changes.
    return _emit("cast", [x], x.type.with_element(dtype), bitcast=x.dtype.is_ptr())


