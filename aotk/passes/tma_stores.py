"""Which ``descriptor_store``s the GPU writes with TMA, and the 2-d tile each one stores.

In: a kir ``Function``. ``tma_store_candidates`` (before ``passes.descriptors`` lowers the
other descriptor ops to pointers): the ids of the stores to keep as ``descriptor_store``
for ``backend.descriptors``. ``tma_stores`` (after ``passes.pipeline``, edits in place):
each kept store gets its ``tensor_map`` (an index into ``function.tensor_maps``) and a
stored value of rank 2.

A TMA store writes a tile from shared memory (``cp.async.bulk.tensor``): the threads write
their registers there in whatever layout they hold them, the accumulator fragments of a
dot included, and the hardware drops what falls outside the tensor. The pointer fallback
instead needs every element in the layout of its masked pointer stores: liger's fused
SwiGLU MLP forward converted both fp32 accumulators (and their product) through shared
memory into that layout, and took 255 registers where Triton, which stores with TMA from
the fragments, takes 166 (aotk now 168).

A store qualifies where its descriptor has a tensor map (``tensor_maps.tensor_map_recipe``),
its innermost offset is proven a multiple of 16 bytes (``tensor_maps.column_aligned``:
the hardware faults on a store that starts elsewhere; ``desc.store([row, pid_n * BN], x)``
is, an offset shifted by a runtime amount is not) and its value is, or becomes, a 2-d
block: the value of a rank-3 to rank-5 descriptor's store (a [1, BM, BN] block) is most
often ``tl.reshape(x, [1, BM, BN])`` of a 2-d ``x``, possibly cast afterwards
(``.to(dtype)``); the store then takes ``x`` (cast first, on its 2-d shape), whose tile is
the box's. Any other value of a higher rank keeps the fallback. What the hardware still
does not do as the store is defined is checked at run time (``backend.descriptors``).
"""
from __future__ import annotations

from ..ir import kir
from ..ir.types import BlockType
from . import axis_info
from .rewrite import new_op, ops_with_blocks, remove_unused_pure_ops
from .tensor_maps import column_aligned, tensor_map_index, tensor_map_recipe

# Element-for-element ops of one block operand that commute with adding size-1 dimensions.
_PER_ELEMENT = frozenset(("cast",)) | kir.UNARY_OPS


def tma_store_candidates(function: kir.Function, infos: dict | None = None) -> set:
    """ids of the descriptor stores that qualify (see the module text); nothing changes.
    ``infos``: the function's axis info (computed here where not given)."""
    stores = [op for _, op in _stores(function.body)
              if tensor_map_recipe(op, function) is not None
              and _squeezed(op.operands[-1]) is not None]
    if not stores:
        return set()
    infos = infos or axis_info.analyze(function)
    return {id(op) for op in stores if column_aligned(op, infos)}


def tma_stores(function: kir.Function, kept: set) -> None:
    """Gives each store of ``kept`` its tensor map, numbered after those of the TMA loads
    (``passes.pipeline`` numbers theirs first), and its 2-d value."""
    for block, op in _stores(function.body):
        if id(op) not in kept:
            continue
        value = op.operands[-1]
        if len(value.type.shape) != 2:
            added = []
            value = _squeezed(value, added)
            position = block.index(op)
            for new in added:
                new.loc = op.loc
            block[position:position] = added
            op.operands[-1] = value
            remove_unused_pure_ops(block)   # the reshape (and casts) stored before
        op.attrs["tensor_map"] = tensor_map_index(function, tensor_map_recipe(op, function))


def _stores(ops) -> list:
    """(the list holding it, op) for every ``descriptor_store``, nested ones included."""
    return [(block, op) for block, op in ops_with_blocks(ops) if op.opcode == "descriptor_store"]


def _squeezed(value, added: list | None = None):
    """``value`` as a 2-d block: itself, or (leading dimensions of size 1) the 2-d operand
    of the size-1 reshape that made it, per-element ops on the way redone on the 2-d shape
    (into ``added``, in order; with ``added`` None nothing is made and the answer only
    says whether it exists). None where there is no such block."""
    shape = value.type.shape
    if len(shape) == 2:
        return value
    owner = value.owner
    if len(shape) < 2 or any(size != 1 for size in shape[:-2]) or owner is None:
        return None
    if owner.opcode == "reshape":
        source = owner.operands[0]
        return source if tuple(source.type.shape) == tuple(shape[-2:]) else None
    if owner.opcode in _PER_ELEMENT and len(owner.operands) == 1:
        source = _squeezed(owner.operands[0], added)
        if source is None or added is None:
            return source
        redone = new_op(owner.opcode, [source], BlockType(value.element, tuple(shape[-2:])),
                        **owner.attrs)
        added.append(redone)
        return redone.result
    return None
