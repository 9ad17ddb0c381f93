"""Where a plain tile lives in shared memory: a block a pipelined loop copies ahead with
``cp.async`` and reads back into registers where it was loaded (``passes.pipeline``'s
``staged`` loads: gates, scales, tiles a dot takes through elementwise ops).

In: the block's shape, element type and dims fastest first (``pipeline_shape.plain_order``:
the dim its load reads memory in vectors along comes first). Out: the byte offset (i32) of
an element from its logical index. No swizzle and no padding: the copies and the reads
both move vectors along the fastest dim, a warp's lanes on consecutive vectors, which
keeps either side free of bank conflicts.
"""
from __future__ import annotations

import llvmlite.ir as ir

from .llvm_types import I32


class PlainTile:
    """The elements of a ``shape`` block of ``element``, dim ``order[0]`` fastest."""

    def __init__(self, shape: tuple, element, order: tuple):
        self.shape, self.element, self.order = tuple(shape), element, tuple(order)
        self.strides = [0] * len(shape)   # in bytes
        stride = element.itemsize
        for dim in self.order:
            self.strides[dim] = stride
            stride *= shape[dim]

    def element_offset(self, builder, indices: list):
        """Byte offset (i32) of the element at ``indices`` (i32 values, one per dim)."""
        offset = ir.Constant(I32, 0)
        for index, stride in zip(indices, self.strides):
            offset = builder.add(offset, builder.mul(index, ir.Constant(I32, stride)))
        return offset
