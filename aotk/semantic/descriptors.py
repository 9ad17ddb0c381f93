"""Typing rules of tensor descriptors: ``tl.make_tensor_descriptor``, ``desc.load`` and
``desc.store``, with Triton 3.6's checks.

In: a base pointer, a shape and strides (Python ints, constexprs or integer scalar tensors)
and a block shape (constexpr ints); later the offsets of a tile and the value to store.
Out: a ``tensor_descriptor`` (a frontend object: its shape and strides become kir scalars,
the descriptor itself emits no op), then one ``descriptor_load`` / ``descriptor_store`` op
per access whose operands are (base, shapes.., strides.., offsets.. [, value]).

Index types: shapes and strides keep the user's width (i32, or i64 for 64-bit values and
u32); offsets are 32-bit as in Triton, whose TMA coordinates are. Narrower integers widen.
"""
from __future__ import annotations

from ..ir import types as T
from ..language.core import tensor, tensor_descriptor, unwrap
from .building import emit
from .elementwise import cast
from .promotion import (describe_value, integer_scalar, per_dimension_list,
                        validate_block_shape)

MAX_DESCRIPTOR_RANK = 5
# A TMA box row must span at least 16 bytes; Triton asks it of every descriptor.
MIN_LAST_DIM_BYTES = 16
PADDING_OPTIONS = ("zero", "nan")


def _shape_or_stride(x, what: str) -> tensor:
    """i32 or i64 holding the same value: 64-bit values and u32 widen to i64."""
    x = integer_scalar(x, what)
    wide = x.dtype.bits == 64 or x.dtype == T.uint32
    return cast(x, T.int64 if wide else T.int32)


def _offset(x, what: str) -> tensor:
    """i32: Triton's descriptor offsets are 32-bit, unsigned ones reinterpreted."""
    value = unwrap(x)
    if isinstance(value, int) and not isinstance(value, bool) and not -2**31 <= value < 2**31:
        raise ValueError(f"{what} is {value}, which does not fit in 32 bits: descriptor "
                         "offsets are 32-bit")
    x = integer_scalar(x, what)
    if x.dtype.bits == 64:
        raise TypeError(f"{what} is {x.dtype}, but descriptor offsets are 32-bit; add "
                        ".to(tl.int32) or use pointer loads for 64-bit offsets")
    return cast(x, T.int32)


def _is_constant_one(x) -> bool:
    """1 as a literal, or a scalar ``constant`` op of value 1 (a parameter the signature
    specialized with the hint :1)."""
    value = unwrap(x)
    if isinstance(value, int) and not isinstance(value, bool):
        return value == 1
    owner = x.handle.owner if isinstance(x, tensor) else None
    return owner is not None and owner.opcode == "constant" and not x.type.shape \
        and owner.attrs["value"] == 1


def make_tensor_descriptor(base, shape, strides, block_shape,
                           padding_option="zero") -> tensor_descriptor:
    shape = per_dimension_list(shape, "the descriptor's shape")
    strides = per_dimension_list(strides, "the descriptor's strides")
    block_shape = per_dimension_list(block_shape, "the descriptor's block_shape")
    rank = len(shape)
    if not 1 <= rank <= MAX_DESCRIPTOR_RANK:
        raise ValueError(f"Expected 1 <= ndim <= {MAX_DESCRIPTOR_RANK} but got {rank} "
                         "dimensions: a tensor descriptor has 1 to 5 dimensions")
    if len(strides) != rank:
        raise ValueError(f"Expected {rank} strides but got {len(strides)}: a tensor descriptor "
                         "takes one stride per dimension of its shape")
    if len(block_shape) != rank:
        raise ValueError(f"Expected block_shape to have {rank} dimensions but got "
                         f"{len(block_shape)}: one block dimension per dimension of the shape")
    if not isinstance(base, tensor) or not base.dtype.is_ptr() or base.type.shape:
        raise TypeError(f"the base of a tensor descriptor must be a scalar pointer, got "
                        f"{describe_value(base)}")
    for dim, size in enumerate(block_shape):
        if not isinstance(unwrap(size), int) or isinstance(unwrap(size), bool):
            raise TypeError(f"block_shape[{dim}] must be a compile-time integer (tl.constexpr), "
                            f"got {describe_value(size)}")
    block_shape = validate_block_shape(block_shape)
    padding_option = unwrap(padding_option)
    if padding_option not in PADDING_OPTIONS:
        raise ValueError(f"unknown padding_option {padding_option!r}; expected 'zero' or 'nan'")
    if padding_option == "nan":
        raise NotImplementedError("padding_option='nan' is not supported: elements outside "
                                  "the tensor read as zero")
    element = base.dtype.element_ty
    element_bytes = element.bits // 8   # Triton's count: a bool element counts 0 bytes
    row_bytes = block_shape[-1] * element_bytes
    if row_bytes < MIN_LAST_DIM_BYTES:
        raise ValueError(f"Descriptor block shape must have at least {MIN_LAST_DIM_BYTES} bytes "
                         f"in the last dimension, but got {block_shape[-1]} * {element_bytes} = "
                         f"{row_bytes} bytes; widen the last block dimension")
    if not _is_constant_one(strides[-1]):
        raise ValueError(f"Tensor descriptor last dim must be 1 but got {describe_value(strides[-1])}: "
                         "the last dimension must be contiguous, so pass the literal 1 as the "
                         "last stride")
    shape = [_shape_or_stride(s, f"shape[{d}]") for d, s in enumerate(shape)]
    strides = [_shape_or_stride(s, f"strides[{d}]") for d, s in enumerate(strides)]
    return tensor_descriptor(base, shape, strides, block_shape)


def _descriptor(desc, what: str) -> tensor_descriptor:
    desc = unwrap(desc)
    if not isinstance(desc, tensor_descriptor):
        raise TypeError(f"{what} needs a tensor descriptor (tl.make_tensor_descriptor), got "
                        f"{describe_value(desc)}")
    return desc


def _access_operands(desc: tensor_descriptor, offsets) -> list:
    """(base, shapes.., strides.., offsets..) of one access at ``offsets``."""
    offsets = per_dimension_list(offsets, "the offsets")
    rank = len(desc.shape)
    if len(offsets) != rank:
        raise ValueError(f"expected {rank} offsets, but got {len(offsets)}: one per dimension "
                         "of the descriptor")
    offsets = [_offset(o, f"offsets[{d}]") for d, o in enumerate(offsets)]
    return [desc.base, *desc.shape, *desc.strides, *offsets]


def descriptor_load(desc, offsets) -> tensor:
    desc = _descriptor(desc, "a descriptor load")
    operands = _access_operands(desc, offsets)
    return emit("descriptor_load", operands, desc.block_type, rank=len(desc.shape),
                block_shape=tuple(desc.block_type.shape))


def descriptor_store(desc, offsets, value) -> None:
    """Triton's rule: the value has exactly the block shape (no broadcast) and is cast
    implicitly to the descriptor's element type."""
    desc = _descriptor(desc, "a descriptor store")
    block_shape = desc.block_type.shape
    if not isinstance(value, tensor):
        raise TypeError(f"a descriptor store needs a block of shape {list(block_shape)}, got "
                        f"{describe_value(value)}; build one with tl.full({list(block_shape)}, "
                        "value, dtype)")
    if value.type.shape != block_shape:
        raise ValueError(f"the stored value has shape {list(value.type.shape)} but the "
                         f"descriptor's block shape is {list(block_shape)}; they must match "
                         "(descriptor stores do not broadcast)")
    operands = _access_operands(desc, offsets)
    value = cast(value, desc.dtype)
    emit("descriptor_store", operands + [value], None, rank=len(desc.shape),
         block_shape=tuple(block_shape))


__all__ = ["make_tensor_descriptor", "descriptor_load", "descriptor_store"]
