"""Typing rules of atomics (``tl.atomic_*``), as Triton's.

In: a pointer (scalar or block), the operand values, an optional mask, ``sem`` and ``scope``.
Out: the old values, typed as the pointer's element, one per pointer (after broadcasting).
Values are cast to the element type and broadcast with the pointer (NumPy rules, as stores).
Float ``atomic_max`` / ``atomic_min`` become integer atomics here, so the interpreter and the
GPU run one definition: a non-negative float orders like its bits as a signed integer, a
negative one in reverse of its bits as an unsigned integer.
"""
from __future__ import annotations

from ..ir import types as T
from ..ir.types import BlockType, PointerType
from ..language.core import tensor, unwrap
from .building import emit
from .elementwise import bitwise, cast, compare, invert, where
from .promotion import broadcast_shapes, constant, is_pointer, to_tensor
from .views import broadcast_to_shape

SEMANTICS = ("relaxed", "acquire", "release", "acq_rel")
SCOPES = ("gpu", "cta", "sys")

_INTEGERS = (T.int32, T.uint32, T.int64, T.uint64)
# Element types each read-modify-write accepts (Triton's rules).
RMW_ELEMENTS = {
    "add": _INTEGERS + (T.float16, T.bfloat16, T.float32, T.float64),
    "max": _INTEGERS + (T.float32, T.float64),
    "min": _INTEGERS + (T.float32, T.float64),
    "and": _INTEGERS,
    "or": _INTEGERS,
    "xor": _INTEGERS,
    "xchg": _INTEGERS + (T.float32, T.float64),
}
CAS_BITS = (16, 32, 64)


def _names(values) -> str:
    return ", ".join(str(v) for v in values)


def memory_order(sem, scope) -> tuple:
    """(sem, scope) with Triton's defaults; unknown values are errors naming the allowed."""
    sem, scope = unwrap(sem), unwrap(scope)
    sem = "acq_rel" if sem is None else sem
    scope = "gpu" if scope is None else scope
    if sem not in SEMANTICS:
        raise ValueError(f"unknown memory semantic sem={sem!r}; expected one of "
                         f"{', '.join(map(repr, SEMANTICS))} (default 'acq_rel')")
    if scope not in SCOPES:
        raise ValueError(f"unknown memory scope scope={scope!r}; expected one of "
                         f"{', '.join(map(repr, SCOPES))} (default 'gpu')")
    return sem, scope


def _pointer(pointer, name: str) -> tensor:
    if not is_pointer(pointer):
        got = pointer.dtype if isinstance(pointer, tensor) else type(pointer).__name__
        raise TypeError(f"{name} needs a pointer or a block of pointers, got {got}")
    return pointer


def _operand(x, element) -> tensor:
    """A value cast to the pointer's element type (literals become constants of it)."""
    if isinstance(x, tensor):
        if x.dtype.is_ptr():
            raise TypeError(f"an atomic operand cannot be a pointer ({x.dtype})")
        return cast(x, element)
    return constant(x, element)


def _broadcast_all(values: list) -> list:
    shape = ()
    for v in values:
        shape = broadcast_shapes(shape, v.type.shape)
    return [broadcast_to_shape(v, shape) for v in values]


def atomic_rmw(kind: str, pointer, val, mask=None, sem=None, scope=None) -> tensor:
    name = f"atomic_{kind}"
    pointer = _pointer(pointer, name)
    element = pointer.dtype.element_ty
    if element not in RMW_ELEMENTS[kind]:
        raise TypeError(f"{name} does not support {element} elements; supported: "
                        f"{_names(RMW_ELEMENTS[kind])}")
    sem, scope = memory_order(sem, scope)
    operands = [pointer, _operand(val, element)]
    if mask is not None:
        mask = to_tensor(mask)
        if not mask.dtype.is_bool():
            raise TypeError(f"a mask must be a boolean block (int1), got {mask.dtype}; "
                            "compare against a bound, e.g. offs < n")
        operands.append(mask)
    operands = _broadcast_all(operands)
    pointer, val = operands[:2]
    mask = operands[2] if mask is not None else None
    if kind in ("max", "min") and element.is_floating():
        return _float_max_min(kind, pointer, val, mask, sem, scope)
    return _emit_rmw(kind, pointer, val, mask, sem, scope)


def _emit_rmw(kind, pointer, val, mask, sem, scope) -> tensor:
    operands = [pointer, val] + ([mask] if mask is not None else [])
    return emit("atomic_rmw", operands, BlockType(pointer.dtype.element_ty, pointer.type.shape),
                kind=kind, sem=sem, scope=scope, has_mask=mask is not None)


def _float_max_min(kind, pointer, val, mask, sem, scope) -> tensor:
    """Triton's float atomic max/min: for a non-negative value, the signed-integer max (min)
    of the bits; for a negative value, the unsigned-integer min (max). Each lane takes part
    in exactly one of the two atomics; the other leaves it masked off."""
    element = pointer.dtype.element_ty
    signed = T.int32 if element.bits == 32 else T.int64
    unsigned = T.uint32 if element.bits == 32 else T.uint64
    signed_val = cast(val, signed, bitcast=True)
    negative = compare("lt", signed_val, 0)
    non_negative = invert(negative)
    if mask is not None:
        negative = bitwise("and", negative, mask)
        non_negative = bitwise("and", non_negative, mask)
    reverse = "min" if kind == "max" else "max"
    by_signed = _emit_rmw(kind, cast(pointer, PointerType(signed)), signed_val,
                          non_negative, sem, scope)
    by_unsigned = _emit_rmw(reverse, cast(pointer, PointerType(unsigned)),
                            cast(val, unsigned, bitcast=True), negative, sem, scope)
    return where(negative, cast(by_unsigned, element, bitcast=True),
                 cast(by_signed, element, bitcast=True))


def atomic_cas(pointer, cmp, val, sem=None, scope=None) -> tensor:
    pointer = _pointer(pointer, "atomic_cas")
    element = pointer.dtype.element_ty
    if element.bits not in CAS_BITS:
        raise TypeError(f"atomic_cas needs 16-, 32- or 64-bit elements, got {element}")
    sem, scope = memory_order(sem, scope)
    pointer, cmp, val = _broadcast_all([pointer, _operand(cmp, element), _operand(val, element)])
    return emit("atomic_cas", [pointer, cmp, val], BlockType(element, pointer.type.shape),
                sem=sem, scope=scope)
