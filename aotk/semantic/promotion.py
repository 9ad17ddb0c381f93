"""The typing rules every family applies to its operands: literal typing, promotion,
literals made values, block shapes and the broadcasting of shapes.

In: ``tensor`` / ``constexpr`` / Python values, dtypes and shapes. Out: dtypes and shapes
(pure rules), or typed ``tensor``s for literals (``constant`` / ``to_tensor``, which append
a ``constant`` op). Every family builds on these; none of them is a ``tl`` builtin.
"""
from __future__ import annotations

from ..ir import types as T
from ..ir.types import BlockType, DType
from ..language.core import constexpr, tensor, unwrap
from .building import emit

MAX_BLOCK_NUMEL = 1 << 20


# ---------------------------------------------------------------------------------------
# Literals and promotion
# ---------------------------------------------------------------------------------------

def is_literal(x) -> bool:
    return isinstance(x, (constexpr, bool, int, float))


def is_pointer(x) -> bool:
    """A tensor (scalar or block) of pointers."""
    return isinstance(x, tensor) and x.dtype.is_ptr()


def _kind_rank(dtype) -> int:
    return {"bool": 0, "int": 1, "uint": 1, "float": 2}[dtype.kind]


def literal_type(value) -> DType:
    """The dtype a Python literal takes when it has to become a value on its own."""
    value = unwrap(value)
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
    # 2. Within floats: the wider wins; at 16 bits fp16 beats bf16; two different 8-bit
    #    floats meet in fp16, bf16 and an 8-bit float in fp32 (Triton's computation types).
    if a.is_floating():
        if {a.bits, b.bits} == {8, 16} and (a.is_bf16() or b.is_bf16()):
            return T.float32
        if a.bits != b.bits:
            return a if a.bits > b.bits else b
        return T.float16
    # 3. Within integers: the wider wins; at equal width unsigned beats signed.
    if a.bits != b.bits:
        return a if a.bits > b.bits else b
    return a if a.is_int_unsigned() else b


def promote_with_literal(tensor_dtype: DType, literal) -> DType:
    """Result element type of (tensor, literal): the literal joins only with a higher kind."""
    lit_ty = literal_type(literal)
    if _kind_rank(lit_ty) <= _kind_rank(tensor_dtype):
        return tensor_dtype
    return promote_dtypes(tensor_dtype, lit_ty)


def check_literal_fits(value, dtype: DType):
    """An integer literal taking ``dtype`` must be representable in it (signed or not)."""
    value = unwrap(value)
    if dtype.is_floating() or isinstance(value, float) or dtype.is_bool():
        return
    if not (-(2 ** (dtype.bits - 1)) <= int(value) < 2 ** dtype.bits):
        raise TypeError(f"literal {value} is out of range for type {dtype.name}; "
                        f"cast the tensor to a wider type first")


def constant(value, dtype: DType, shape=()) -> tensor:
    """A literal as a typed value: ints wrap into dtype's range, floats round."""
    value = unwrap(value)
    if dtype.is_bool():
        value = bool(value)
    elif dtype.is_floating():
        value = float(value)
    else:
        value = int(value) & ((1 << dtype.bits) - 1)
        if dtype.is_int_signed() and value >= 1 << (dtype.bits - 1):
            value -= 1 << dtype.bits
    return emit("constant", [], BlockType(dtype, tuple(shape)), value=value)


def to_tensor(x) -> tensor:
    """A tensor as given; a literal as a constant of its literal type."""
    if isinstance(x, tensor):
        return x
    return constant(x, literal_type(x))


# ---------------------------------------------------------------------------------------
# Integer operands of structured values (descriptors, block pointers)
# ---------------------------------------------------------------------------------------

def describe_value(x) -> str:
    """A value as an error message shows it."""
    if isinstance(x, tensor):
        return f"a block of {x.dtype} of shape {list(x.type.shape)}" if x.type.shape else \
            f"a runtime {x.dtype} scalar"
    return repr(unwrap(x))


def per_dimension_list(x, what: str) -> list:
    """A list or tuple (one entry per dimension) as a list; anything else is an error."""
    x = unwrap(x)
    if not isinstance(x, (list, tuple)):
        raise TypeError(f"{what} must be a list with one entry per dimension, got {describe_value(x)}")
    return list(x)


def integer_scalar(x, what: str) -> tensor:
    """An int / constexpr int (a constant of its literal type) or an integer scalar tensor,
    as given; anything else is an error naming ``what``."""
    value = unwrap(x)
    if isinstance(value, int) and not isinstance(value, bool):
        dtype = literal_type(value)
        return constant(value, T.int64 if dtype == T.uint32 else dtype)
    if not isinstance(x, tensor):
        raise TypeError(f"{what} must be an integer (a Python int, a tl.constexpr or an integer "
                        f"scalar), got {type(value).__name__} {value!r}")
    if x.type.shape:
        raise TypeError(f"{what} must be a scalar, got {describe_value(x)}")
    if not x.dtype.is_int() or x.dtype.is_bool():
        raise TypeError(f"{what} must be an integer, got {x.dtype}; cast it with .to(tl.int32)")
    return x



# ---------------------------------------------------------------------------------------
# Shapes
# ---------------------------------------------------------------------------------------

# A runtime value where a compile-time one is needed: usually a name bound by a plain
# assignment, which makes a tensor of a number, as in Triton.
COMPILE_TIME_HINT = ("a number assigned to a name is a runtime value, as in Triton; keep it "
                     "compile-time with `NAME: tl.constexpr = ...`")


def validate_block_shape(shape) -> tuple:
    if any(isinstance(s, tensor) for s in shape):
        raise TypeError(f"block shapes must be compile-time integers; {COMPILE_TIME_HINT}")
    shape = tuple(int(unwrap(s)) for s in shape)
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
