"""Element and block types shared by every stage.

A ``DType`` is a scalar element type (``int32``, ``float16``...); a ``PointerType`` is a
global-memory pointer to one; a ``BlockType`` is either of them with a shape (``()`` for a
scalar). The same objects are exposed to kernels as ``tl.float32`` and friends, so the
frontend never translates between a "language" type and an "IR" type.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from .float8 import FORMATS


@dataclass(frozen=True)
class DType:
    name: str    # Triton's spelling: "float32", "int1", "bfloat16"
    short: str = None   # signature spelling: "fp32", "i1", "bf16"
    kind: str = None    # "bool" | "int" | "uint" | "float"
    bits: int = None

    # Triton's lists of type names (``tl.dtype.SINT_TYPES``...), which ``tl.dtype(name)``
    # takes, as in Triton (fp8 formats aotk lacks are left out).
    SINT_TYPES: ClassVar[tuple] = ("int8", "int16", "int32", "int64")
    UINT_TYPES: ClassVar[tuple] = ("int1", "uint8", "uint16", "uint32", "uint64")
    FP_TYPES: ClassVar[tuple] = ("fp8e4nv", "fp8e5", "fp16", "bf16", "fp32", "fp64")
    STANDARD_FP_TYPES: ClassVar[tuple] = ("fp16", "bf16", "fp32", "fp64")

    def __post_init__(self):
        # ``tl.dtype("fp16")`` (Triton's constructor): the named type's fields.
        if self.short is None:
            known = _NAMED.get(self.name)
            if known is None:
                raise ValueError(f"unknown dtype {self.name!r}")
            for field_name in ("name", "short", "kind", "bits"):
                object.__setattr__(self, field_name, getattr(known, field_name))

    def __repr__(self) -> str:
        return self.name

    def __str__(self) -> str:
        return self.name

    @property
    def primitive_bitwidth(self) -> int:
        return self.bits

    @property
    def itemsize(self) -> int:
        return max(1, self.bits // 8)

    def is_floating(self) -> bool:
        return self.kind == "float"

    def is_int(self) -> bool:
        """True for bool and every integer type, as in Triton."""
        return self.kind in ("bool", "int", "uint")

    def is_bool(self) -> bool:
        return self.kind == "bool"

    def is_int_signed(self) -> bool:
        return self.kind == "int"

    def is_int_unsigned(self) -> bool:
        return self.kind == "uint"

    def is_ptr(self) -> bool:
        return False

    def is_fp16(self) -> bool:
        return self.name == "float16"

    def is_bf16(self) -> bool:
        return self.name == "bfloat16"

    def is_fp32(self) -> bool:
        return self.name == "float32"

    def is_fp64(self) -> bool:
        return self.name == "float64"

    def is_fp8(self) -> bool:
        return self.name in FLOAT8_FORMATS

    def is_fp8e4nv(self) -> bool:
        return self.name == "float8e4nv"

    def is_fp8e5(self) -> bool:
        return self.name == "float8e5"

    def is_fp8e4b15(self) -> bool:
        return self.name == "float8e4b15"

    @property
    def float8_format(self):
        """The ``aotk.ir.float8.Float8Format`` of an fp8 type (None for other types)."""
        return FLOAT8_FORMATS.get(self.name)

    def _float_fields(self) -> tuple:
        """(exponent bias, mantissa bits) of a floating-point type."""
        if not self.is_floating():
            raise TypeError(f"{self.name} is not a floating-point type")
        if self.is_fp8():
            return self.float8_format.bias, self.float8_format.mantissa_bits
        return {"float16": (15, 10), "bfloat16": (127, 7), "float32": (127, 23),
                "float64": (1023, 52)}[self.name]

    @property
    def exponent_bias(self) -> int:
        return self._float_fields()[0]

    @property
    def fp_mantissa_width(self) -> int:
        return self._float_fields()[1]

    def to(self, *_args, **_kwargs):  # pragma: no cover - guards a common user slip
        raise TypeError(f"{self.name} is a dtype; call .to() on a tensor instead")


@dataclass(frozen=True)
class PointerType:
    element_ty: DType
    address_space: int = 1

    name = "pointer"
    kind = "ptr"
    bits = 64
    itemsize = 8

    @property
    def short(self) -> str:
        return "*" + self.element_ty.short

    def __repr__(self) -> str:
        return f"pointer<{self.element_ty.name}>"

    __str__ = __repr__

    def is_ptr(self) -> bool:
        return True

    def is_floating(self) -> bool:
        return False

    def is_int(self) -> bool:
        return False

    def is_bool(self) -> bool:
        return False

    def is_int_signed(self) -> bool:
        return False

    def is_int_unsigned(self) -> bool:
        return False

    def is_bf16(self) -> bool:
        return False

    def is_fp64(self) -> bool:
        return False

    def is_fp8(self) -> bool:
        return False

    def is_fp8e4b15(self) -> bool:
        return False


_NAMED: dict = {}   # Triton's and aotk's names of each type, for DType(name)
int1 = DType("int1", "i1", "bool", 1)
int8 = DType("int8", "i8", "int", 8)
int16 = DType("int16", "i16", "int", 16)
int32 = DType("int32", "i32", "int", 32)
int64 = DType("int64", "i64", "int", 64)
uint8 = DType("uint8", "u8", "uint", 8)
uint16 = DType("uint16", "u16", "uint", 16)
uint32 = DType("uint32", "u32", "uint", 32)
uint64 = DType("uint64", "u64", "uint", 64)
float16 = DType("float16", "fp16", "float", 16)
bfloat16 = DType("bfloat16", "bf16", "float", 16)
float32 = DType("float32", "fp32", "float", 32)
float64 = DType("float64", "fp64", "float", 64)
# 8-bit floats (aotk.ir.float8 says what their codes mean): only loads, stores, casts and
# moves see them; arithmetic on them is done in float32 (see aotk.semantic.elementwise).
float8e4nv = DType("float8e4nv", "fp8e4nv", "float", 8)
float8e5 = DType("float8e5", "fp8e5", "float", 8)
float8e4b15 = DType("float8e4b15", "fp8e4b15", "float", 8)
FLOAT8_FORMATS = dict(FORMATS)

# The type of nothing (Triton's tl.void): no value has it; it is not among ALL_DTYPES.
void = DType("void", "void", "void", 0)

ALL_DTYPES = (int1, int8, int16, int32, int64, uint8, uint16, uint32, uint64,
              float16, bfloat16, float32, float64, float8e4nv, float8e5, float8e4b15)
DTYPE_BY_SHORT = {t.short: t for t in ALL_DTYPES}
DTYPE_BY_NAME = {t.name: t for t in ALL_DTYPES}
_NAMED.update(DTYPE_BY_SHORT)
_NAMED.update(DTYPE_BY_NAME)


# Hints after a signature type: ":1", an integer equal to 1; ":D", a pointer aligned to D
# bytes or an integer divisible by D (Triton's JIT only ever infers 16).
DIVISIBILITY_HINTS = (2, 4, 8, 16)
SIGNATURE_HINTS = (1,) + DIVISIBILITY_HINTS
HINTS_TEXT = "use :1, :2, :4, :8 or :16"


def parse_type(text: str):
    """'fp32' -> float32, '*fp16' -> PointerType(float16). Raises ValueError on junk."""
    text = text.strip()
    if text.startswith("*"):
        return PointerType(parse_type(text[1:]))
    if text in DTYPE_BY_SHORT:
        return DTYPE_BY_SHORT[text]
    if text in DTYPE_BY_NAME:
        return DTYPE_BY_NAME[text]
    known = " ".join(t.short for t in ALL_DTYPES)
    raise ValueError(f"unknown type {text!r} (expected one of: {known}, or *T for a pointer)")


@dataclass(frozen=True, eq=False)
class BlockType:
    """An element type with a static shape; shape () is a scalar."""
    element: object   # DType | PointerType
    shape: tuple = ()

    @property
    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    @property
    def rank(self) -> int:
        return len(self.shape)

    def is_block(self) -> bool:
        return self.shape != ()

    def __post_init__(self):
        object.__setattr__(self, "shape", tuple(int(s) for s in self.shape))

    @property
    def element_ty(self):
        """Triton's name of the element type (``tl.block_type(tl.float32, [16]).element_ty``)."""
        return self.element

    @property
    def scalar(self):
        return self.element

    def get_block_shapes(self) -> tuple:
        return self.shape

    def with_shape(self, shape) -> "BlockType":
        return BlockType(self.element, tuple(shape))

    def with_element(self, element) -> "BlockType":
        return BlockType(element, self.shape)

    def __eq__(self, other):
        # A scalar is its element type, as in Triton (``x.type == tl.int32`` for a 0-d x).
        if isinstance(other, BlockType):
            return self.element == other.element and self.shape == other.shape
        if not self.shape and isinstance(other, (DType, PointerType)):
            return self.element == other
        return NotImplemented

    def __hash__(self):
        return hash(self.element) if not self.shape else hash((self.element, self.shape))

    def __str__(self) -> str:
        if not self.shape:
            return self.element.short
        return f"{self.element.short}[{','.join(map(str, self.shape))}]"
