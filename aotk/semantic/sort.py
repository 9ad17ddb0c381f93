"""Typing rules of ``tl.sort``, ``tl.flip``, ``tl.topk`` and ``tl.bitonic_merge``.

In: a block and an axis (``sort``: the last one, as in Triton). Out: a block of the same
type and shape. ``sort`` is one ``sort`` op (a bitonic network, run in shared memory on the
GPU: ``backend.sort``, ``interpreter.sort``). ``flip`` is composed of view ops: at each
distance d it views the axis as (groups, 2, d), moves the pair axis last, splits it and joins
the halves the other way round. ``topk`` sorts, then reduces across runs of k.
``bitonic_merge`` is Triton's last merge stage, composed of the same views and selects.
"""
from __future__ import annotations

from ..ir import types as T
from ..language.core import tensor, unwrap
from .building import emit
from .elementwise import cast, compare, invert, where
from .promotion import to_tensor
from .reduce import reduce
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


def topk(x, k, dim=None, descending=True) -> tensor:
    """The ``k`` largest elements along the last axis, largest first (the ``k`` smallest,
    smallest first, when not ``descending``): the sorted block seen as ``n / k`` runs of
    ``k``, reduced across the runs with max (min), which keeps the first run, since each
    of its elements is at least (at most) the one at the same place in every later run."""
    x = to_tensor(x)
    axis, size = _axis_and_size(x, dim, "tl.topk")
    if axis != len(x.type.shape) - 1:
        raise ValueError("tl.topk: only the last axis is supported (as in Triton)")
    k = unwrap(k)
    if not isinstance(k, int) or isinstance(k, bool) or k < 1 or k & (k - 1) or k > size:
        raise ValueError(f"tl.topk: k must be a power of two no larger than the axis "
                         f"({size}), got {k!r}")
    if x.dtype.is_bf16() or x.dtype.is_fp8():   # compared as the fp32 values they widen to
        return cast(topk(cast(x, T.float32), k, dim, descending), x.dtype)
    ordered = sort(x, dim, descending)
    if k == size:
        return ordered
    shape = x.type.shape
    runs = reshape(ordered, *shape[:-1], size // k, k)
    return reduce(runs, len(shape) - 1, "max" if unwrap(descending) else "min")


def bitonic_merge(x, dim=None, descending=False) -> tensor:
    """The last merge of a bitonic sort along the last axis, Triton's network: at each
    distance n/2, n/4, .., 1 the pair (i, i + d) is ordered, the first taking the smaller
    (the larger when ``descending``) where ``first > second`` says so (false on NaN). A
    bitonic row (rising then falling, or the reverse) comes out sorted."""
    x = to_tensor(x)
    axis, size = _axis_and_size(x, dim, "tl.bitonic_merge")
    if axis != len(x.type.shape) - 1:
        raise ValueError("tl.bitonic_merge: only the last axis is supported (as in Triton)")
    flipped = bool(unwrap(descending))
    distance = size // 2
    while distance >= 1:
        first, second = _pairs(x, axis, distance)
        first_greater = compare("gt", first, second)
        second_greater = compare("gt", second, first)
        take_second = invert(first_greater) if flipped else first_greater
        take_first = second_greater if flipped else invert(second_greater)
        x = _unpairs(where(take_second, second, first), where(take_first, first, second),
                     axis, x.type.shape)
        distance //= 2
    return x


__all__ = ["flip", "sort", "topk", "bitonic_merge"]
