"""Typing rules of ``tl.sort`` and ``tl.flip``.

In: a block and an axis (``sort``: the last one, as in Triton). Out: a block of the same
type and shape. ``sort`` is one ``sort`` op (a bitonic network, run in shared memory on the
GPU: ``backend.sort``, ``interpreter.sort``). ``flip`` is composed of view ops: at each
distance d it views the axis as (groups, 2, d), moves the pair axis last, splits it and joins
the halves the other way round.
"""
from __future__ import annotations

from ..ir import types as T
from ..language.core import tensor, unwrap
from .building import emit
from .elementwise import cast
from .promotion import to_tensor
from .views import join, permute, reshape, split


def _axis_and_size(x: tensor, dim, what: str) -> tuple:
    shape = x.type.shape
    if not shape:
        raise ValueError(f"{what} takes a block, got a scalar")
    axis = len(shape) - 1 if unwrap(dim) is None else unwrap(dim)
    if not isinstance(axis, int) or not -len(shape) <= axis < len(shape):
        raise ValueError(f"{what}: invalid axis {axis} for a block of shape {list(shape)}")
    axis %= len(shape)
    return axis, shape[axis]   # a power of two, as every block dimension


def _pairs(x: tensor, axis: int, distance: int) -> tuple:
    """(first, second): the elements at positions p and p + distance of each pair along
    ``axis``, each of shape shape[:axis] + (groups, distance) + shape[axis+1:]."""
    shape = x.type.shape
    grouped = reshape(x, *shape[:axis], shape[axis] // (2 * distance), 2, distance,
                      *shape[axis + 1:])
    rank = len(grouped.type.shape)
    order = [d for d in range(rank) if d != axis + 1] + [axis + 1]
    return split(permute(grouped, *order))


def _unpairs(first: tensor, second: tensor, axis: int, shape: tuple) -> tensor:
    joined = join(first, second)
    rank = len(joined.type.shape)
    order = list(range(axis + 1)) + [rank - 1] + list(range(axis + 1, rank - 1))
    return reshape(permute(joined, *order), *shape)


def flip(x, dim=None) -> tensor:
    """``x`` reversed along ``dim`` (default: the last axis)."""
    x = to_tensor(x)
    axis, size = _axis_and_size(x, dim, "tl.flip")
    distance = 1
    while distance < size:
        first, second = _pairs(x, axis, distance)
        x = _unpairs(second, first, axis, x.type.shape)
        distance *= 2
    return x


def sort(x, dim=None, descending=False) -> tensor:
    """``x`` sorted along its last axis (ascending, or descending): one ``sort`` op, a
    bitonic network on both executors. 8-bit floats are sorted as the fp16 values they
    convert to exactly."""
    x = to_tensor(x)
    axis, _ = _axis_and_size(x, dim, "tl.sort")
    if axis != len(x.type.shape) - 1:
        raise ValueError("tl.sort: only the last axis can be sorted (as in Triton)")
    if x.dtype.is_fp8():
        return cast(sort(cast(x, T.float16), dim, descending), x.dtype)
    return emit("sort", [x], x.type, descending=bool(unwrap(descending)))


__all__ = ["flip", "sort"]
