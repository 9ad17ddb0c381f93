"""Typing rules of ``tl.histogram``, with Triton 3.6's checks and messages.

In: a 1-d integer block, a number of bins (a power of two) and an optional mask. Out: one
``histogram`` op whose result is an int32 block of ``num_bins``: how many of the (unmasked)
elements equal 0, 1, ... ``num_bins - 1``. Elements outside that range are not counted
(Triton leaves them undefined). The GPU counts with shared-memory atomics
(``backend.histogram``), the interpreter with numpy (``interpreter.histogram``).
"""
from __future__ import annotations

from ..ir import types as T
from ..ir.types import BlockType
from ..language.core import tensor, unwrap
from .building import emit
from .promotion import describe_value, to_tensor, validate_block_shape
from .views import broadcast_to_shape


def histogram(input, num_bins, mask=None) -> tensor:
    """Counts of the values 0 .. num_bins - 1 in ``input`` where ``mask`` holds."""
    input = to_tensor(input)
    if len(input.type.shape) != 1:
        raise ValueError(f"histogram only supports 1D input, got {describe_value(input)}")
    if not input.dtype.is_int() or input.dtype.is_bool():
        raise TypeError(f"histogram only supports integer input, got {input.dtype}")
    num_bins = unwrap(num_bins)
    if not isinstance(num_bins, int) or isinstance(num_bins, bool):
        raise TypeError(f"the number of bins must be a compile-time integer, got {num_bins!r}")
    (num_bins,) = validate_block_shape([num_bins])
    operands = [input]
    if mask is not None:
        mask = broadcast_to_shape(to_tensor(mask), input.type.shape)
        if not mask.dtype.is_bool():
            raise ValueError("Mask must have boolean scalar type")
        operands.append(mask)
    return emit("histogram", operands, BlockType(T.int32, (num_bins,)),
                has_mask=mask is not None)


__all__ = ["histogram"]
