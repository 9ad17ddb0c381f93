"""Typing rules of program geometry, block creation and memory access (loads, stores,
hints).

In: ``tensor`` / ``constexpr`` / Python values. Out: typed ``tensor``s (or None for stores).
"""
from __future__ import annotations

from ..ir import types as T
from ..ir.types import BlockType, DType
from ..language.core import tensor
from .base import (_emit, _is_ptr, _value, broadcast_shapes, broadcast_to_shape, cast, constant,
                   expand_dims, to_tensor, validate_block_shape)

# ---------------------------------------------------------------------------------------
# Creation
# ---------------------------------------------------------------------------------------

def program_id(axis) -> tensor:
    axis = int(_value(axis))
    if axis not in (0, 1, 2):
        raise ValueError(f"program_id axis must be 0, 1 or 2, got {axis}")
    return _emit("program_id", [], BlockType(T.int32), axis=axis)


def num_programs(axis) -> tensor:
    axis = int(_value(axis))
    if axis not in (0, 1, 2):
        raise ValueError(f"num_programs axis must be 0, 1 or 2, got {axis}")
    return _emit("num_programs", [], BlockType(T.int32), axis=axis)


def arange(start, end) -> tensor:
    start, end = _value(start), _value(end)
    if not isinstance(start, int) or not isinstance(end, int):
        raise TypeError("tl.arange bounds must be constexpr integers")
    if end <= start:
        raise ValueError(f"tl.arange({start}, {end}) is empty")
    (length,) = validate_block_shape([end - start])
    if start < 0 or end > 2**31:
        raise ValueError("tl.arange bounds must lie in [0, 2**31)")
    return _emit("arange", [], BlockType(T.int32, (length,)), start=start, end=end)


def full(shape, value, dtype) -> tensor:
    shape = validate_block_shape(_value(shape) if not isinstance(shape, (list, tuple)) else shape)
    dtype = _value(dtype)
    if isinstance(value, tensor):
        if value.type.shape:
            raise TypeError("tl.full takes a scalar value")
        return broadcast_to_shape(cast(value, dtype), shape)
    return constant(value, dtype, shape)


def broadcast_to(x, shape) -> tensor:
    shape = validate_block_shape(shape)
    return broadcast_to_shape(to_tensor(x), shape)


# ---------------------------------------------------------------------------------------
# Memory
# ---------------------------------------------------------------------------------------

LOAD_CACHE_MODIFIERS = ("", ".ca", ".cg", ".cs", ".lu", ".cv")
STORE_CACHE_MODIFIERS = ("", ".wb", ".cg", ".cs", ".wt")
EVICTION_POLICIES = ("", "evict_normal", "evict_first", "evict_last")


def _memory_operands(pointer, mask):
    if not _is_ptr(pointer):
        raise TypeError(f"expected a pointer or block of pointers, got "
                        f"{pointer.dtype if isinstance(pointer, tensor) else type(pointer).__name__}")
    if mask is None:
        return pointer, None
    mask = to_tensor(mask)
    if not mask.dtype.is_bool():
        raise TypeError(f"a mask must be a boolean block (int1), got {mask.dtype}; "
                        "compare against a bound, e.g. offs < n")
    shape = broadcast_shapes(pointer.type.shape, mask.type.shape)
    return broadcast_to_shape(pointer, shape), broadcast_to_shape(mask, shape)


def _check_modifier(value, allowed, what):
    value = _value(value) or ""
    if value and not value.startswith(".") and what == "cache modifier":
        value = "." + value
    if value not in allowed:
        raise ValueError(f"unknown {what} {value!r}; expected one of {', '.join(map(repr, allowed))}")
    return value


def load(pointer, mask=None, other=None, cache_modifier="", eviction_policy="",
         volatile=False) -> tensor:
    if other is not None and mask is None:
        raise ValueError("`other` needs a `mask`: without one every lane is loaded and `other` "
                         "is never used; pass mask=... or drop other=")
    pointer, mask = _memory_operands(pointer, mask)
    element = pointer.dtype.element_ty
    operands = [pointer] + ([mask] if mask is not None else [])
    if other is not None:
        other = broadcast_to_shape(cast(to_tensor(other) if isinstance(other, tensor)
                                        else constant(other, element), element), pointer.type.shape)
        operands.append(other)
    return _emit("load", operands, BlockType(element, pointer.type.shape),
                 cache=_check_modifier(cache_modifier, LOAD_CACHE_MODIFIERS, "cache modifier"),
                 eviction=_check_modifier(eviction_policy, EVICTION_POLICIES, "eviction policy"),
                 volatile=bool(_value(volatile)), has_mask=mask is not None,
                 has_other=other is not None)


def store(pointer, value, mask=None, cache_modifier="", eviction_policy="") -> None:
    pointer, mask = _memory_operands(pointer, mask)
    element = pointer.dtype.element_ty
    value = to_tensor(value) if isinstance(value, tensor) else constant(value, element)
    shape = broadcast_shapes(pointer.type.shape, value.type.shape)
    if shape != pointer.type.shape:
        pointer = broadcast_to_shape(pointer, shape)
        if mask is not None:
            mask = broadcast_to_shape(mask, shape)
    value = broadcast_to_shape(cast(value, element), shape)
    operands = [pointer, value] + ([mask] if mask is not None else [])
    _emit("store", operands, None,
          cache=_check_modifier(cache_modifier, STORE_CACHE_MODIFIERS, "cache modifier"),
          eviction=_check_modifier(eviction_policy, EVICTION_POLICIES, "eviction policy"),
          has_mask=mask is not None)



def hint(x, kind, values) -> tensor:
    x = to_tensor(x)
    values = _value(values)
    values = tuple(int(_value(v)) for v in (values if isinstance(values, (list, tuple)) else [values]))
    if len(values) != max(1, len(x.type.shape)):
        raise ValueError(f"{kind} takes one value per dimension of the {len(x.type.shape)}-d block")
    return _emit("hint", [x], x.type, kind=kind, values=values)
