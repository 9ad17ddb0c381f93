"""Interpreter rules of ``descriptor_load`` / ``descriptor_store``, straight from their
definition (the reference the pointer fallback and TMA are compared with).

In: the op's operand arrays (base, shapes, strides, offsets [, value]). Out: the tile, with 0
wherever an index falls outside ``0 <= offset_d + i_d < shape_d`` (negative offsets
included); a store writes only the elements inside. Indices are computed in exact 64-bit
arithmetic, whatever the operands' widths.
"""
from __future__ import annotations

import numpy as np

from .executor import register_op_rules
from .memory import load, store


def _tile(op, base, parts):
    """(addresses, inside) of the tile: one byte address per element, and whether the
    element lies inside the tensor (only those lanes touch memory)."""
    rank, block_shape = op.attrs["rank"], op.attrs["block_shape"]
    shapes, strides, offsets = (parts[i * rank:(i + 1) * rank] for i in range(3))
    linear = np.zeros(block_shape, np.int64)
    inside = np.ones(block_shape, np.bool_)
    for dim, (size, stride, offset) in enumerate(zip(shapes, strides, offsets)):
        index = int(offset) + np.arange(block_shape[dim], dtype=np.int64)
        index = index.reshape([-1 if d == dim else 1 for d in range(rank)])
        inside = inside & (index >= 0) & (index < int(size))
        linear = linear + index * int(stride)
    itemsize = np.uint64(op.operands[0].element.element_ty.itemsize)
    # Negative offsets wrap as two's complement, as addptr's do.
    return np.uint64(base) + linear.astype(np.uint64) * itemsize, inside


def _descriptor_load(ctx, op, base, *parts):
    addresses, inside = _tile(op, base, parts)
    return load(ctx, op, addresses, inside)


def _descriptor_store(ctx, op, base, *parts):
    *parts, value = parts
    addresses, inside = _tile(op, base, parts)
    store(ctx, op, addresses, value, inside)


register_op_rules({"descriptor_load": _descriptor_load, "descriptor_store": _descriptor_store})
