"""Typing rules of block pointers: ``tl.make_block_ptr``, ``tl.advance`` and ``tl.load`` /
``tl.store`` through a block pointer, with Triton 3.6's checks and messages.

In: a base pointer, the shape and strides of the tensor it points into, the offsets of a
block, the block shape and order (then offsets to advance by, or the value to store).
Out: a ``block_pointer`` (a frontend aggregate: it emits no op of its own), and for each
access the ops of an ordinary masked load or store: the addresses
``base + sum_d (offsets[d] + arange(block_shape[d])) * strides[d]`` in 64-bit arithmetic,
and, for the dimensions named in ``boundary_check``, the mask ``0 <= index < shape[d]``.
This is what Triton's RewriteTensorPointer pass does for targets without TMA; aotk does it
for every target, so the interpreter and the backend see only pointer loads and stores.

Index types: shapes and strides are int64 and offsets int32, as in Triton.
"""
from __future__ import annotations

from ..ir import types as T
from ..ir.types import PointerType
from ..language.core import block_pointer, tensor, unwrap
from .creation import arange
from .elementwise import add, cast, compare, mul
from .memory import load, store
from .promotion import (constant, describe_value, integer_scalar, per_dimension_list,
                        validate_block_shape)
from .views import broadcast_to_shape, reshape

PADDING_OPTIONS = ("", "zero", "nan")


def _int64(x, what: str) -> tensor:
    value = unwrap(x)
    if isinstance(value, int) and not isinstance(value, bool):
        if not -2**63 <= value < 2**63:
            raise ValueError(f"{what} is {value}: List elements must be in int64 range")
        return constant(value, T.int64)
    return cast(integer_scalar(x, what), T.int64)


def _int32_offset(x, what: str) -> tensor:
    value = unwrap(x)
    if isinstance(value, int) and not isinstance(value, bool):
        if not -2**31 <= value < 2**31:
            raise ValueError(f"{what} is {value}, which does not fit in 32 bits: block "
                             "pointer offsets are 32-bit, as in Triton")
        return constant(value, T.int32)
    return cast(integer_scalar(x, what), T.int32)


def make_block_ptr(base, shape, strides, offsets, block_shape, order) -> block_pointer:
    """A pointer to the block of ``block_shape`` at ``offsets`` of the tensor at ``base``."""
    if not isinstance(base, tensor) or not base.dtype.is_ptr() or base.type.shape:
        raise ValueError(f"Expected `base` to be a pointer type (but not a block pointer type "
                         f"or others), got {describe_value(base)}")
    if base.dtype.element_ty == T.int1:   # booleans are stored as bytes, as in Triton
        base = cast(base, PointerType(T.int8))
    block_shape = [unwrap(b) for b in (unwrap(block_shape) if isinstance(
        unwrap(block_shape), (list, tuple)) else [block_shape])]
    if not all(isinstance(b, int) and not isinstance(b, bool) and -2**31 <= b < 2**31
               for b in block_shape):
        raise ValueError("Expected a list of constant integers (`int32_t` range) in "
                         f"`block_shape`, got {block_shape}")
    block_shape = list(validate_block_shape(block_shape))
    order = [unwrap(o) for o in (unwrap(order) if isinstance(unwrap(order), (list, tuple))
                                 else [order])]
    if sorted(order) != list(range(len(order))):
        raise ValueError(f"Expected a permutation of (0, 1, ..., len(order)-1) in order, "
                         f"got {order}")
    shape = per_dimension_list(shape, "the block pointer's shape")
    strides = per_dimension_list(strides, "the block pointer's strides")
    offsets = per_dimension_list(offsets, "the block pointer's offsets")
    if not all(len(block_shape) == len(x) for x in (shape, strides, offsets, order)):
        raise ValueError("Expected shape/strides/offsets/block_shape to have the same length")
    return block_pointer(
        base,
        [_int64(s, f"shape[{d}]") for d, s in enumerate(shape)],
        [_int64(s, f"strides[{d}]") for d, s in enumerate(strides)],
        [_int32_offset(o, f"offsets[{d}]") for d, o in enumerate(offsets)],
        block_shape, order)


def advance(pointer, offsets) -> block_pointer:
    """``pointer`` moved by ``offsets`` (one per dimension)."""
    if not isinstance(pointer, block_pointer):
        raise ValueError(f"tl.advance takes a block pointer (tl.make_block_ptr), got "
                         f"{describe_value(pointer)}")
    offsets = per_dimension_list(offsets, "the offsets to advance by")
    if len(offsets) != len(pointer.block_shape):
        raise ValueError(f"tl.advance: {len(offsets)} offsets for a block pointer of rank "
                         f"{len(pointer.block_shape)}")
    moved = [add(current, _int32_offset(delta, f"offsets[{d}]"))
             for d, (current, delta) in enumerate(zip(pointer.offsets, offsets))]
    return block_pointer(pointer.base, pointer.shape, pointer.strides, moved,
                         pointer.block_shape, pointer.order)


def _boundary_check(boundary_check, rank: int) -> list:
    dims = unwrap(boundary_check)
    if dims is None or dims == () or dims == []:
        return []
    dims = [unwrap(d) for d in (dims if isinstance(dims, (list, tuple)) else [dims])]
    for d in dims:
        if not isinstance(d, int) or not 0 <= d < rank:
            raise ValueError(f"boundary_check names dimension {d!r}, but the block pointer "
                             f"has dimensions 0..{rank - 1}")
    if len(dims) != len(set(dims)):
        raise ValueError("Duplicate dimension in `boundary_check`")
    return sorted(dims)


def _addresses(pointer: block_pointer, checked: list) -> tuple:
    """(pointers, mask or None): the block of element addresses, and which of them lie
    inside the tensor along the ``checked`` dimensions."""
    rank = len(pointer.block_shape)
    shape = tuple(pointer.block_shape)
    total, mask = None, None
    for d, size in enumerate(shape):
        index = add(cast(arange(0, size), T.int64), cast(pointer.offsets[d], T.int64))
        index = reshape(index, *[size if k == d else 1 for k in range(rank)])
        term = mul(index, pointer.strides[d])
        total = term if total is None else add(total, term)
        if d in checked:
            inside = compare("ge", index, 0) & compare("lt", index, pointer.shape[d])
            mask = inside if mask is None else mask & inside
    pointers = broadcast_to_shape(add(pointer.base, total), shape)
    return pointers, None if mask is None else broadcast_to_shape(mask, shape)


def _padding(padding_option, element: T.DType) -> str:
    padding = unwrap(padding_option) or ""
    if padding not in PADDING_OPTIONS:
        raise ValueError(f"Padding option {padding} not supported; expected 'zero' or 'nan'")
    if padding == "nan" and not element.is_floating():
        raise ValueError("Padding option `nan` is not supported for integer block pointers")
    return padding


def block_pointer_load(pointer: block_pointer, mask, other, boundary_check, padding_option,
                       cache_modifier="", eviction_policy="", volatile=False) -> tensor:
    """The block at ``pointer``; elements outside the tensor along ``boundary_check``'s
    dimensions read 0 (NaN with ``padding_option="nan"``), others are not checked."""
    if mask is not None or other is not None:
        raise ValueError("`mask` and `other` arguments cannot be specified for loading block "
                         "pointers")
    element = pointer.base.dtype.element_ty
    padding = _padding(padding_option, element)
    checked = _boundary_check(boundary_check, len(pointer.block_shape))
    pointers, inside = _addresses(pointer, checked)
    if inside is None:
        return load(pointers, None, None, cache_modifier, eviction_policy, volatile)
    fill = float("nan") if padding == "nan" else 0
    return load(pointers, inside, constant(fill, element), cache_modifier, eviction_policy,
                volatile)


def block_pointer_store(pointer: block_pointer, value, mask, boundary_check,
                        cache_modifier="", eviction_policy="") -> None:
    """Stores ``value`` (a block of the pointer's block shape and element type, or a scalar)
    at ``pointer``, dropping elements outside the tensor along ``boundary_check``."""
    if mask is not None:
        raise ValueError("`mask` and `other` arguments cannot be specified for storing block "
                         "pointers")
    element = pointer.base.dtype.element_ty
    shape = tuple(pointer.block_shape)
    value = value if isinstance(value, tensor) else constant(unwrap(value), element)
    if not value.type.shape:
        value = broadcast_to_shape(value, shape)
    if tuple(value.type.shape) != shape:
        raise ValueError(f"Block shape({list(shape)}) and value shape"
                         f"({list(value.type.shape)}) mismatch")
    if value.dtype != element:
        raise ValueError(f"Block element type({element}) and value element type({value.dtype}) "
                         "mismatch; convert the value with .to(...)")
    checked = _boundary_check(boundary_check, len(shape))
    pointers, inside = _addresses(pointer, checked)
    store(pointers, value, inside, cache_modifier, eviction_policy)


__all__ = ["make_block_ptr", "advance", "block_pointer_load", "block_pointer_store"]
