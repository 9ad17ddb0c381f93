"""Typing rules of structured control flow: conditions, loop bounds, values that cross a
region boundary (loop-carried values, the results of ``if`` and of ternaries).

In: the frontend's ``tensor`` / ``constexpr`` values. Out: typed ``tensor``s, or a
``TypeError`` / ``ValueError`` whose message names the variable at fault.
"""
from __future__ import annotations

import warnings

from ..ir import types as T
from ..ir.types import BlockType
from ..language.core import constexpr, tensor, unwrap
from .elementwise import cast, compare
from .promotion import constant, literal_type, to_tensor
from .views import item


def condition(x, what: str) -> tensor:
    """The int1 scalar an ``if`` / ``while`` / ternary branches on (nonzero is true)."""
    x = to_tensor(x)
    if x.type.shape and x.type.numel == 1:
        # A one-element block stands for its element, as in Triton (which warns too).
        warnings.warn(f"the condition of {what} is a block of shape {list(x.type.shape)} "
                      "instead of a scalar; write (...).item()", stacklevel=2)
        x = item(x)
    if x.type.shape:
        raise TypeError(f"the condition of {what} must be a scalar, got a block of shape "
                        f"{list(x.type.shape)}; Boolean value of Tensor with more than one "
                        "value is ambiguous: reduce it first (e.g. tl.max(...) > 0)")
    if x.dtype.is_ptr():
        raise TypeError(f"the condition of {what} cannot be a pointer")
    if x.dtype.is_bool():
        return x
    return compare("ne", x, 0)


def loop_bounds(start, end, step) -> tuple:
    """Runtime ``range`` bounds as three integer scalars of one type: int32 unless a bound
    needs 64 bits (as Triton)."""
    values = []
    for name, bound in (("start", start), ("end", end), ("step", step)):
        if isinstance(bound, tensor):
            if bound.type.shape:
                raise TypeError(f"range {name} must be a scalar, got a block")
            if not bound.dtype.is_int() or bound.dtype.is_bool():
                raise TypeError(f"range {name} must be an integer, got {bound.dtype}")
        elif not isinstance(unwrap(bound), int) or isinstance(unwrap(bound), bool):
            raise TypeError(f"range {name} must be an integer, got {unwrap(bound)!r}")
        values.append(bound)
    if not isinstance(step, tensor) and unwrap(step) == 0:
        raise ValueError("range step must not be zero")
    wide = any((isinstance(v, tensor) and v.dtype.bits == 64) or
               (not isinstance(v, tensor) and literal_type(v).bits == 64) for v in values)
    dtype = T.int64 if wide else T.int32
    return tuple(cast(v, dtype) if isinstance(v, tensor) else constant(unwrap(v), dtype)
                 for v in values)


def step_direction(step) -> str:
    """'up' / 'down' for a compile-time step; 'runtime' when its sign is only known then."""
    if isinstance(step, tensor):
        return "runtime"
    return "up" if unwrap(step) > 0 else "down"


def crossing_value(name: str, value) -> tensor:
    """A value that crosses a region boundary must be a tensor (numbers become constants of
    their literal type, as Triton)."""
    if isinstance(value, tensor):
        return value
    if isinstance(value, constexpr):
        value = value.value
    if isinstance(value, (bool, int, float)):
        return constant(value, literal_type(value))
    raise TypeError(f"{name!r} changes inside a runtime loop or branch, so it must be a tensor "
                    f"or a number, got {type(value).__name__}")


def check_carried_type(name: str, initial: BlockType, updated: BlockType, where: str):
    if initial != updated:
        raise TypeError(f"{where} variable {name!r} has initial type {initial} but is "
                        f"re-assigned to {updated}; keep its type the same (e.g. start from "
                        f"tl.zeros(..., dtype) or cast with .to())")
