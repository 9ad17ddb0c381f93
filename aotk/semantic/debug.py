"""Typing rules of the debugging builtins: ``debug_barrier``, ``device_print``,
``device_assert`` (and runtime ``assert`` statements, which the frontend routes here).

In: ``tensor`` / ``constexpr`` / Python values. Out: side-effect kir ops, no result.
``device_assert`` emits nothing unless the kernel is compiled with debug on
(``@aotk.jit(debug=True)`` or ``AOTK_DEBUG=1``), as in Triton.
"""
from __future__ import annotations

import math

from ..ir import types as T
from ..language.core import unwrap
from .building import current_builder, emit
from .elementwise import bitwise, cast, invert
from .promotion import to_tensor

_UNSIGNED = {16: T.uint16, 32: T.uint32, 64: T.uint64}


def debug_barrier() -> None:
    emit("debug_barrier", [], None)


def index_widths(shape) -> list:
    """Digits each printed index is padded to, as Triton pads them: ceil(log10(dim))."""
    return [int(math.ceil(math.log10(dim))) if dim > 0 else 0 for dim in shape]


def print_prefix(prefix: str, has_args: bool) -> str:
    """Triton's spelling: a prefix before values ends in ": ", a long one starts with " "."""
    if has_args and not prefix.endswith(" "):
        prefix += " "
    if has_args and not prefix.endswith(": "):
        prefix = prefix[:-1] + ": "
    if len(prefix) > 2 and not prefix.startswith(" "):
        prefix = " " + prefix
    return prefix


def device_print(prefix, args, hex=False) -> None:
    prefix = unwrap(prefix)
    if not isinstance(prefix, str):
        raise TypeError(f"device_print's prefix must be a string, got {type(prefix).__name__}")
    if not prefix.isascii():
        raise ValueError(f"device_print's prefix must be ASCII, got {prefix!r}")
    hex = bool(unwrap(hex))
    values = [to_tensor(unwrap(a)) for a in args]
    if hex:
        # hex shows a float's bits, as Triton: print the same-width unsigned integer
        values = [cast(v, _UNSIGNED[v.dtype.bits], bitcast=True) if v.dtype.is_floating()
                  else v for v in values]
    emit("device_print", values, None, prefix=print_prefix(prefix, bool(values)), hex=hex)


def device_assert(cond, msg="", mask=None) -> None:
    """Fails the kernel where ``cond`` is false (and ``mask``, if given, is true)."""
    builder = current_builder()
    if not builder.function.debug:
        return
    msg = unwrap(msg)
    if not isinstance(msg, str):
        raise TypeError(f"device_assert's message must be a string, got {type(msg).__name__}")
    cond = to_tensor(unwrap(cond))
    if cond.dtype.is_ptr():
        raise TypeError("device_assert's condition cannot be a pointer")
    if not cond.dtype.is_bool():
        cond = cast(cond, T.int1)
    if mask is not None:
        cond = bitwise("or", cond, invert(cast(to_tensor(unwrap(mask)), T.int1)))
    emit("device_assert", [cond], None, message=msg, function=builder.function.name)
