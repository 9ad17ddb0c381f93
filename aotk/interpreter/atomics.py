"""Interpreter rules of ``atomic_rmw`` / ``atomic_cas``: read-modify-write through the
launch's ``AddressSpace``.

In: the op's operand arrays. Out: the old values (0 on masked-off lanes, as loads without
``other``). Programs run one after another, so an atomic is a plain read-modify-write; within
one block, lanes that share an address are applied one after another in row-major order, so
each lane's old value is what the lanes before it left (``np.add.at``-like). fp32 adds flush
subnormal inputs and results to zero, as PTX documents for ``atom.add.f32``.
"""
from __future__ import annotations

import numpy as np

from .executor import numpy_dtype, register_op_rules, round_bf16
from .memory import read, write

_SMALLEST_NORMAL_FP32 = np.float32(np.finfo(np.float32).tiny)


def _flush_subnormals(x: np.ndarray) -> np.ndarray:
    return np.where(np.abs(x) < _SMALLEST_NORMAL_FP32, np.copysign(np.float32(0), x), x)


def _add(element, old, val):
    if element.is_fp32():
        return _flush_subnormals(_flush_subnormals(old) + _flush_subnormals(val))
    if element.is_bf16():
        return round_bf16(old + val)
    return old + val   # integers wrap in their own dtype; fp16/fp64 round in theirs


_COMBINE = {
    "add": _add,
    "max": lambda element, old, val: np.maximum(old, val),
    "min": lambda element, old, val: np.minimum(old, val),
    "and": lambda element, old, val: old & val,
    "or": lambda element, old, val: old | val,
    "xor": lambda element, old, val: old ^ val,
    "xchg": lambda element, old, val: val,
}


def _bits(values: np.ndarray) -> np.ndarray:
    """The raw bits (cas compares bits, so -0.0 != 0.0 and a NaN may equal itself)."""
    return values.view(np.dtype(f"u{values.dtype.itemsize}"))


def _occurrence(addresses: np.ndarray) -> np.ndarray:
    """For each lane, how many earlier lanes (in order) share its address."""
    order = np.argsort(addresses, kind="stable")
    ordered = addresses[order]
    positions = np.arange(addresses.size)
    starts = np.ones(addresses.size, bool)
    starts[1:] = ordered[1:] != ordered[:-1]
    first = np.maximum.accumulate(np.where(starts, positions, 0))
    rank = np.empty(addresses.size, np.int64)
    rank[order] = positions - first
    return rank


def _read_modify_write(ctx, element, pointer, active, update):
    """Applies ``update(lanes, old) -> new`` over the active lanes, rounds of distinct
    addresses in row-major order; returns the old value of every lane."""
    old = np.zeros(pointer.shape, numpy_dtype(element))
    lanes = np.flatnonzero(active)
    if lanes.size == 0:
        return old
    addresses = pointer.reshape(-1)[lanes]
    rank = _occurrence(addresses)
    flat_old = old.reshape(-1)
    for round_index in range(int(rank.max()) + 1):
        chosen = rank == round_index
        these = lanes[chosen]
        current = read(ctx.address_space, addresses[chosen], element)
        flat_old[these] = current
        write(ctx.address_space, addresses[chosen], update(these, current), element)
    return old


def _lanes(array, shape):
    return np.broadcast_to(array, shape).reshape(-1)


def _atomic_rmw(ctx, op, pointer, value, mask=None):
    element = op.result.element
    pointer = np.asarray(pointer)
    active = np.broadcast_to(mask if mask is not None else True, pointer.shape)
    value = _lanes(np.asarray(value), pointer.shape)
    combine = _COMBINE[op.attrs["kind"]]
    return _read_modify_write(ctx, element, pointer, active,
                              lambda these, current: combine(element, current, value[these]))


def _atomic_cas(ctx, op, pointer, compare, value):
    element = op.result.element
    pointer = np.asarray(pointer)
    compare = _lanes(np.asarray(compare), pointer.shape)
    value = _lanes(np.asarray(value), pointer.shape)

    def update(these, current):
        equal = _bits(np.asarray(current)) == _bits(np.ascontiguousarray(compare[these]))
        return np.where(equal, value[these], current)
    return _read_modify_write(ctx, element, pointer, np.ones(pointer.shape, bool), update)


register_op_rules({"atomic_rmw": _atomic_rmw, "atomic_cas": _atomic_cas})
