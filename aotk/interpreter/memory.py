"""Interpreter rules of ``load``, ``store`` and ``hint``, and the element-level memory access
the other memory-touching families (``descriptors``, ``atomics``) share.

In: the op's operand arrays (pointers as uint64 byte addresses, optional mask and other) and
the launch's ``AddressSpace``. Out: ``load`` gives the loaded block, ``other`` (else 0) on
masked-off lanes; ``store`` writes the active lanes and gives nothing; ``hint`` gives its
operand unchanged. Only active lanes touch memory. In memory a bool is a byte and a bfloat16
its 16 bits (rounded from the float32 it is held in).
"""
from __future__ import annotations

import numpy as np

from .address_space import AddressSpace
from .executor import numpy_dtype, register_op_rules, round_bf16


def memory_dtype(element):
    """The numpy dtype an element of kir type ``element`` has in memory."""
    if element.is_bool():
        return np.uint8
    return np.uint16 if element.is_bf16() else numpy_dtype(element)


def read(address_space: AddressSpace, addresses: np.ndarray, element) -> np.ndarray:
    """The elements at ``addresses``, as values of ``element`` (``numpy_dtype``)."""
    raw = address_space.load(addresses, memory_dtype(element))
    if element.is_bf16():
        return (raw.astype(np.uint32) << 16).view(np.float32)
    return raw.astype(numpy_dtype(element), copy=False)


def write(address_space: AddressSpace, addresses: np.ndarray, values: np.ndarray, element):
    """Writes ``values`` (of ``element``) at ``addresses``, lanes in row-major order."""
    if element.is_bf16():
        values = (round_bf16(values).view(np.uint32) >> 16).astype(np.uint16)
    address_space.store(addresses, np.asarray(values, memory_dtype(element)))


def _active(pointer, mask):
    return np.broadcast_to(mask if mask is not None else True, pointer.shape)


def load(ctx, op, pointer, mask=None, other=None):
    """The ``load`` rule (``descriptor_load`` reuses it with the tile's addresses)."""
    element = op.result.element
    active = _active(pointer, mask)
    result = np.zeros(pointer.shape, numpy_dtype(element))
    result[active] = read(ctx.address_space, pointer[active], element)
    return result if other is None else np.where(active, result, other)


def store(ctx, op, pointer, value, mask=None):
    """The ``store`` rule (``descriptor_store`` reuses it with the tile's addresses)."""
    active = _active(pointer, mask)
    write(ctx.address_space, pointer[active], np.broadcast_to(value, pointer.shape)[active],
          op.operands[0].element.element_ty)


register_op_rules({
    "load": load,
    "store": store,
    "hint": lambda ctx, op, x: x,
    "prefetch": lambda ctx, op, pointer, mask: None,   # a hint to the cache
})
