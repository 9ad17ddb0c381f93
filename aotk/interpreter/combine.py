"""Interpreter rules of ``reduce`` / ``scan`` with a combine region (``tl.reduce``,
``tl.associative_scan``).

In: the op and the environment holding its operand arrays. Out: one array per result.
Order (the reference the GPU is compared with): a reduction folds the elements along the
axis one after another, ``acc = combine(acc, x[i])`` from i = 0; a scan is the inclusive
sequential scan ``out[i] = combine(out[i-1], x[i])``, and a reverse scan is the scan of the
reversed axis, reversed back. The GPU combines in a tree order: float results may differ in
rounding, and a reduction's combine is assumed commutative as well as associative.

The region runs once per position along the axis on whole slices (arrays of the other
dimensions' shape) when its ops are all elementwise, else once per element.
"""
from __future__ import annotations

import numpy as np

from ..ir.kir import ELEMENTWISE_OPS, walk
from .executor import finish, register_region_rules, run_region

# Region ops whose rules broadcast, so a whole slice goes through the region at once.
_SLICE_SAFE = ELEMENTWISE_OPS | frozenset(("constant", "hint"))


def _combiner(ctx, op, env):
    """combine(first, second) on lists of arrays of one shape, one per operand."""
    region = op.regions[0]
    elements = [r.element for r in op.results]
    by_slice = all(o.opcode in _SLICE_SAFE for o in walk(region.body[:-1]))

    def finish_all(values, shape):
        return [finish(np.array(np.broadcast_to(v, shape)), e) for v, e in zip(values, elements)]

    def combine(first, second):
        shape = np.shape(first[0])
        if by_slice:
            return finish_all(run_region(ctx, region, env, list(first) + list(second)), shape)
        out = [np.empty(shape, v.dtype) for v in first]
        for index in np.ndindex(*shape):
            args = [np.asarray(v[index]) for v in list(first) + list(second)]
            for target, value in zip(out, run_region(ctx, region, env, args)):
                target[index] = value
        return finish_all(out, shape)
    return combine


def _position(array, axis, i):
    return np.asarray(np.take(array, i, axis=axis))


def _reduce(ctx, op, env) -> list:
    arrays = [env[v] for v in op.operands]
    axis = op.attrs["axis"]
    combine = _combiner(ctx, op, env)
    accumulated = [_position(a, axis, 0) for a in arrays]
    for i in range(1, arrays[0].shape[axis]):
        accumulated = combine(accumulated, [_position(a, axis, i) for a in arrays])
    return [finish(a, r.element) for a, r in zip(accumulated, op.results)]


def _scan(ctx, op, env) -> list:
    axis, reverse = op.attrs["axis"], op.attrs["reverse"]
    arrays = [env[v] for v in op.operands]
    if reverse:
        arrays = [np.flip(a, axis) for a in arrays]
    combine = _combiner(ctx, op, env)
    outputs = [np.empty_like(a) for a in arrays]
    accumulated = None
    for i in range(arrays[0].shape[axis]):
        current = [_position(a, axis, i) for a in arrays]
        accumulated = current if accumulated is None else combine(accumulated, current)
        index = (slice(None),) * axis + (i,)
        for out, value in zip(outputs, accumulated):
            out[index] = value
    if reverse:
        outputs = [np.flip(out, axis) for out in outputs]
    return [finish(out, r.element) for out, r in zip(outputs, op.results)]


register_region_rules({"reduce": _reduce, "scan": _scan})
