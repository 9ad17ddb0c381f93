"""Typing rules of memory access through pointers: ``tl.load``, ``tl.store`` and the
hints on pointer arithmetic (``tl.multiple_of``, ``max_contiguous``, ``max_constancy``).

In: a pointer or block of pointers, an optional mask and ``other``, the value to store,
cache and eviction options. Out: the loaded ``tensor`` (None for stores; a hint returns its
operand, annotated).
"""
from __future__ import annotations

from ..ir.types import BlockType
from ..language.core import tensor, unwrap
from .building import emit
from .elementwise import cast
from .promotion import broadcast_shapes, constant, is_pointer, to_tensor
from .views import broadcast_to_shape

LOAD_CACHE_MODIFIERS = ("", ".ca", ".cg", ".cs", ".lu", ".cv")
STORE_CACHE_MODIFIERS = ("", ".wb", ".cg", ".cs", ".wt")
EVICTION_POLICIES = ("", "evict_normal", "evict_first", "evict_last")


def _memory_operands(pointer, mask):
    if not is_pointer(pointer):
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
    value = unwrap(value) or ""
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
    return emit("load", operands, BlockType(element, pointer.type.shape),
                cache=_check_modifier(cache_modifier, LOAD_CACHE_MODIFIERS, "cache modifier"),
                eviction=_check_modifier(eviction_policy, EVICTION_POLICIES, "eviction policy"),
                volatile=bool(unwrap(volatile)), has_mask=mask is not None,
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
    emit("store", operands, None,
         cache=_check_modifier(cache_modifier, STORE_CACHE_MODIFIERS, "cache modifier"),
         eviction=_check_modifier(eviction_policy, EVICTION_POLICIES, "eviction policy"),
         has_mask=mask is not None)


def hint(x, kind, values) -> tensor:
    x = to_tensor(x)
    values = unwrap(values)
    values = tuple(int(unwrap(v)) for v in (values if isinstance(values, (list, tuple)) else [values]))
    if len(values) != max(1, len(x.type.shape)):
        raise ValueError(f"{kind} takes one value per dimension of the {len(x.type.shape)}-d block")
    return emit("hint", [x], x.type, kind=kind, values=values)
