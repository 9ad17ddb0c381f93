"""Typing rules of ops that change a block's shape or move its elements: splats and
broadcasts (explicit, ``tl.broadcast_to``, and the implicit ones of every binary rule),
``expand_dims`` and ``x[:, None]`` subscripts, ``permute`` / ``trans``, ``reshape`` /
``ravel``, ``join``, ``interleave``, ``cat`` and ``split``.

In: blocks and shapes, axes or axis orders. Out: typed ``tensor``s. Each op keeps the
element type; only the shape and the element order change.
"""
from __future__ import annotations

from ..ir.types import BlockType
from ..language.core import tensor, unwrap
from .building import emit
from .promotion import broadcast_shapes, to_tensor, validate_block_shape


# ---------------------------------------------------------------------------------------
# Broadcasts and new axes
# ---------------------------------------------------------------------------------------

def broadcast_to_shape(x: tensor, shape: tuple) -> tensor:
    """``x`` grown to ``shape`` by NumPy's rules: a scalar splats; a block gains leading
    axes of size 1, then its 1-dims grow."""
    shape = tuple(shape)
    if x.type.shape == shape:
        return x
    if not x.type.shape:
        return emit("splat", [x], x.type.with_shape(shape))
    while len(x.type.shape) < len(shape):
        x = expand_dims(x, 0)
    if broadcast_shapes(x.type.shape, shape) != shape:
        raise ValueError(f"cannot broadcast shape {list(x.type.shape)} to {list(shape)}")
    return emit("broadcast", [x], x.type.with_shape(shape))


def broadcast_to(x, shape) -> tensor:
    shape = validate_block_shape(shape)
    return broadcast_to_shape(to_tensor(x), shape)


def expand_dims(x: tensor, axis) -> tensor:
    x = to_tensor(x)
    axes = [int(unwrap(a)) for a in (axis if isinstance(axis, (tuple, list)) else [axis])]
    rank_out = len(x.type.shape) + len(axes)
    for a in axes:   # Triton's wording
        if not -rank_out <= a < rank_out:
            raise ValueError(f"invalid axis {a}. Expected {-rank_out} <= axis < {rank_out}")
    axes = [a + rank_out if a < 0 else a for a in axes]
    if len(set(axes)) != len(axes):
        raise ValueError(f"expand_dims received duplicate axes, normalized axes = {axes}")
    for a in sorted(axes):
        shape = list(x.type.shape)
        shape.insert(a, 1)
        x = emit("expand_dims", [x], x.type.with_shape(shape), axis=a)
    return x


def subscript(x: tensor, index) -> tensor:
    """``x[:, None]`` style indexing: only full slices and None are meaningful on blocks."""
    index = unwrap(index)
    if not isinstance(index, tuple):
        index = (index,)
    dim = 0
    for item in index:
        item = unwrap(item)
        if item is None:
            x = expand_dims(x, dim)
            dim += 1
        elif isinstance(item, slice) and item == slice(None, None, None):
            dim += 1
        else:
            raise TypeError(f"unsupported tensor index: {item!r}; blocks take only ':' and "
                            "None, e.g. x[:, None]")
    return x


# ---------------------------------------------------------------------------------------
# Element order
# ---------------------------------------------------------------------------------------

def _dims(dims) -> tuple:
    """Axis lists arrive as `permute(x, 1, 0)` or `permute(x, (1, 0))`."""
    dims = tuple(unwrap(d) for d in dims)
    if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
        dims = tuple(unwrap(d) for d in dims[0])
    return tuple(int(d) for d in dims)


def permute(x, *dims) -> tensor:
    x = to_tensor(x)
    order = _dims(dims)
    rank = len(x.type.shape)
    if sorted(order) != list(range(rank)):
        raise ValueError(f"permute of a {rank}-d block needs a permutation of "
                         f"{list(range(rank))}, got {list(order)}")
    if order == tuple(range(rank)):
        return x
    shape = tuple(x.type.shape[d] for d in order)
    return emit("permute", [x], x.type.with_shape(shape), order=order)


def trans(x, *dims) -> tensor:
    """Swaps the last two axes (Triton's default); with ``dims``, the same as ``permute``."""
    x = to_tensor(x)
    if not _dims(dims):
        rank = len(x.type.shape)
        if rank < 2:
            raise ValueError("tl.trans invoked with a 0- or 1-dimensional tensor")
        dims = (tuple(range(rank - 2)) + (rank - 1, rank - 2),)
    return permute(x, *dims)


def reshape(x, *shape, can_reorder=False) -> tensor:
    """Row-major reshape (``can_reorder`` is accepted; the order is always kept)."""
    x = to_tensor(x)
    shape = validate_block_shape(_dims(shape))
    numel = 1
    for s in shape:
        numel *= s
    if numel != x.type.numel:
        raise ValueError(f"cannot reshape a block of {x.type.numel} elements "
                         f"{list(x.type.shape)} into {list(shape)} ({numel} elements)")
    if shape == x.type.shape:
        return x
    return emit("reshape", [x], x.type.with_shape(shape))


def item(x) -> tensor:
    """``x.item()``: the one element of a one-element block, as a 0-d value."""
    x = to_tensor(x)
    if x.type.numel != 1:
        raise ValueError(f"item() needs a block of one element, got shape {list(x.type.shape)}")
    if not x.type.shape:
        return x
    return emit("reshape", [x], x.type.with_shape(()))


def ravel(x, can_reorder=False) -> tensor:
    x = to_tensor(x)
    return reshape(x, (x.type.numel,))


def join(a, b) -> tensor:
    """Stacks two blocks of one type along a new minor axis of size 2."""
    a, b = to_tensor(a), to_tensor(b)
    if a.dtype != b.dtype:
        raise TypeError(f"join needs two blocks of one element type, got {a.dtype} and "
                        f"{b.dtype}; cast one with .to()")
    shape = broadcast_shapes(a.type.shape, b.type.shape)
    a, b = broadcast_to_shape(a, shape), broadcast_to_shape(b, shape)
    return emit("join", [a, b], BlockType(a.dtype, shape + (2,)))


def interleave(a, b) -> tensor:
    """``[a0, b0, a1, b1, ...]`` along the last axis (Triton's: join, then reshape)."""
    joined = join(a, b)
    shape = joined.type.shape
    if len(shape) == 1:   # two scalars: [a, b] already
        return joined
    return reshape(joined, shape[:-2] + (2 * shape[-2],))


def cat(a, b, can_reorder=False) -> tensor:
    """``a`` then ``b`` along the first axis. Triton asks for ``can_reorder=True`` (it may
    mix the elements); aotk keeps them in order, which that allows."""
    if not unwrap(can_reorder):
        raise ValueError("current implementation of `cat` always may reorder elements: "
                         "pass can_reorder=True")
    joined = join(a, b)
    rank = len(joined.type.shape) - 1
    if rank == 0:
        return joined
    stacked = permute(joined, (rank,) + tuple(range(rank)))
    shape = stacked.type.shape
    return reshape(stacked, (2 * shape[1],) + shape[2:])


def split(x) -> tuple:
    """The two halves of a block whose last axis has size 2 (the inverse of ``join``)."""
    x = to_tensor(x)
    if not x.type.shape or x.type.shape[-1] != 2:
        raise ValueError(f"split needs a block whose last axis has size 2, got shape "
                         f"{list(x.type.shape)}")
    result = x.type.with_shape(x.type.shape[:-1])
    return tuple(emit("split", [x], result, index=index) for index in (0, 1))
