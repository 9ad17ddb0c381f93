"""Interpreter rules of ``load``, ``store`` and ``hint``; ``descriptors`` reuses ``load`` and
``store`` for its tiles.

In: the op's operand arrays (pointers as uint64 byte addresses, optional mask and other) and
the launch's ``AddressSpace``. Out: ``load`` gives the loaded block, ``other`` (else 0) on
masked-off lanes; ``store`` writes the active lanes and gives nothing; ``hint`` gives its
operand unchanged. Only active lanes touch memory. In memory a bool is a byte and a bfloat16
its 16 bits (rounded from the float32 it is held in).
"""
from __future__ import annotations

import numpy as np

from .executor import numpy_dtype, register_op_rules, round_bf16


def load(ctx, op, pointer, mask=None, other=None):
    """The ``load`` rule (``descriptor_load`` reuses it with the tile's addresses)."""
    element = op.result.element
    memory_dtype = np.uint8 if element.is_bool() else (
        np.uint16 if element.is_bf16() else numpy_dtype(element))
    active = np.broadcast_to(mask if mask is not None else True, pointer.shape)
    loaded = np.zeros(pointer.shape, memory_dtype)
    loaded[active] = ctx.address_space.load(pointer[active], memory_dtype)
    if element.is_bf16():
        loaded = (loaded.astype(np.uint32) << 16).view(np.float32)
    result = loaded.astype(numpy_dtype(element))
    if other is not None:
        result = np.where(active, result, other)
    elif not active.all():
        result = np.where(active, result, np.zeros((), numpy_dtype(element)))
    return result


def store(ctx, op, pointer, value, mask=None):
    """The ``store`` rule (``descriptor_store`` reuses it with the tile's addresses)."""
    element = op.operands[0].element.element_ty
    active = np.broadcast_to(mask if mask is not None else True, pointer.shape)
    value = np.broadcast_to(value, pointer.shape)[active]
    if element.is_bool():
        value = value.astype(np.uint8)
    elif element.is_bf16():
        value = (round_bf16(value).view(np.uint32) >> 16).astype(np.uint16)
    ctx.address_space.store(pointer[active], value.astype(value.dtype, copy=False))


register_op_rules({
    "load": load,
    "store": store,
    "hint": lambda ctx, op, x: x,
})
