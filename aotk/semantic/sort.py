"""``tl.sort`` and ``tl.flip``: element orderings built from the view ops, as Triton builds
them (bitonic networks), so the interpreter and the GPU run the same composition.

In: a block and an axis (``sort``: the last one, as in Triton). Out: a
block of the same type and shape. A compare-exchange at distance ``d`` views the axis as
(groups, 2, d), moves the pair axis last and splits it, so each element meets its partner
with no data-dependent indexing; ``flip`` exchanges the halves at every distance.
"""
from __future__ import annotations

from ..language.core import tensor, unwrap
from .creation import arange
from .elementwise import bitwise, compare, where
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


def _in_odd_blocks(groups: int, per_block: int) -> tensor:
    """int1 of shape (groups, 1): whether each group lies in an odd block of ``per_block``
    groups (the bitonic network merges those in descending order)."""
    odd = compare("ne", bitwise("and", arange(0, groups), to_tensor(per_block)), to_tensor(0))
    return reshape(odd, groups, 1)


def sort(x, dim=None, descending=False) -> tensor:
    """``x`` sorted along its last axis (ascending, or descending), by a bitonic network of
    compare-exchanges; NaNs stay where the comparisons leave them, as in Triton."""
    x = to_tensor(x)
    axis, size = _axis_and_size(x, dim, "tl.sort")
    if axis != len(x.type.shape) - 1:
        raise ValueError("tl.sort: only the last axis can be sorted (as in Triton)")
    shape = x.type.shape
    descending = bool(unwrap(descending))
    block = 2
    while block <= size:                # merge bitonic runs of `block` elements
        distance = block // 2
        while distance >= 1:
            first, second = _pairs(x, axis, distance)
            flipped = to_tensor(descending) if block == size else \
                _in_odd_blocks(size // (2 * distance), block // (2 * distance))
            swap = compare("ne", compare("gt", first, second), flipped)
            x = _unpairs(where(swap, second, first), where(swap, first, second), axis, shape)
            distance //= 2
        block *= 2
    return x


__all__ = ["flip", "sort"]
