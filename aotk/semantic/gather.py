"""Typing rules of ``tl.gather``, with Triton 3.6's checks and messages.

In: a source block, an integer index block of the same rank and an axis. Out: one
``gather`` op whose result has the index's shape and the source's element type:
``out[..., i, ...] = src[..., index[..., i, ...], ...]`` along ``axis``, the other
dimensions of the index equal to the source's. The GPU runs it through shared memory
(``backend.gather``), the interpreter with numpy (``interpreter.gather``). An index outside
``[0, src.shape[axis])`` reads an unspecified element of the source (as in Triton), never
memory outside it.
"""
from __future__ import annotations

from ..ir.types import BlockType
from ..language.core import tensor, unwrap
from .building import emit
from .promotion import describe_value, to_tensor


def gather(src, index, axis) -> tensor:
    """The elements of ``src`` that ``index`` names along ``axis``."""
    src, index = to_tensor(src), to_tensor(index)
    if not index.dtype.is_int() or index.dtype.is_bool():
        raise TypeError(f"index must be an integer tensor, got {describe_value(index)}")
    if not src.type.shape:
        raise ValueError("tl.gather takes a block as its source, got a scalar")
    rank = len(src.type.shape)
    if len(index.type.shape) != rank:
        raise ValueError(f"source and index tensors must have the same rank (source "
                         f"{list(src.type.shape)}, index {list(index.type.shape)})")
    axis = unwrap(axis)
    if not isinstance(axis, int) or not -rank <= axis < rank:
        raise ValueError(f"gather axis {axis} must be < source rank ({rank})")
    axis %= rank
    for d in range(rank):
        if d != axis and index.type.shape[d] != src.type.shape[d]:
            raise ValueError(f"index dim {d} must match the corresponding source dim (index "
                             f"{list(index.type.shape)}, source {list(src.type.shape)}, "
                             f"axis {axis})")
    return emit("gather", [src, index], BlockType(src.dtype, index.type.shape), axis=axis)


__all__ = ["gather"]
