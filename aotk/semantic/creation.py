"""Typing rules of values made from nothing: the program's position in the grid
(``tl.program_id``, ``tl.num_programs``), ``tl.arange``, filled blocks (``tl.full``,
``zeros``, ``zeros_like``) and hardware registers (``tl.extra.cuda.globaltimer``, ``smid``). A literal made a value (``constant``) is in ``promotion``, which
every family uses.

In: constexpr axes, bounds, shapes and dtypes; a fill value (literal or scalar tensor).
Out: typed ``tensor``s.
"""
from __future__ import annotations

from ..ir import types as T
from ..ir.types import BlockType
from ..language.core import tensor, unwrap
from .building import emit
from .elementwise import cast
from .promotion import COMPILE_TIME_HINT, constant, validate_block_shape
from .views import broadcast_to_shape


def program_id(axis) -> tensor:
    axis = int(unwrap(axis))
    if axis not in (0, 1, 2):
        raise ValueError(f"program_id axis must be 0, 1, or 2 but got {axis}")
    return emit("program_id", [], BlockType(T.int32), axis=axis)


def num_programs(axis) -> tensor:
    axis = int(unwrap(axis))
    if axis not in (0, 1, 2):
        raise ValueError(f"num_programs axis must be 0, 1, or 2 but got {axis}")
    return emit("num_programs", [], BlockType(T.int32), axis=axis)


def arange(start, end) -> tensor:
    start, end = unwrap(start), unwrap(end)
    if not isinstance(start, int) or not isinstance(end, int):
        raise TypeError(f"tl.arange bounds must be constexpr integers; {COMPILE_TIME_HINT}")
    if end <= start:
        raise ValueError(f"tl.arange({start}, {end}) is empty")
    (length,) = validate_block_shape([end - start])
    if start < 0 or end > 2**31:
        raise ValueError("tl.arange bounds must lie in [0, 2**31)")
    return emit("arange", [], BlockType(T.int32, (length,)), start=start, end=end)


def full(shape, value, dtype) -> tensor:
    shape = validate_block_shape(unwrap(shape) if not isinstance(shape, (list, tuple)) else shape)
    dtype = unwrap(dtype)
    if isinstance(value, tensor):
        if value.type.shape:
            raise TypeError("tl.full takes a scalar value")
        return broadcast_to_shape(cast(value, dtype), shape)
    return constant(value, dtype, shape)


# The hardware registers ``tl.extra.cuda`` reads, with their types.
REGISTER_TYPES = {"globaltimer": T.int64, "smid": T.int32}


def read_register(name: str) -> tensor:
    """The hardware register ``name`` (globaltimer: nanoseconds; smid: the multiprocessor
    running this program), read afresh at this point of the kernel."""
    return emit("read_register", [], BlockType(REGISTER_TYPES[name]), register=name)

