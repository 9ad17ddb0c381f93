"""The ``tl`` builtins that read and write memory: loads and stores through pointers or
block pointers, block pointers, tensor descriptors. Each one only unpacks its arguments
and calls ``aotk.semantic`` (``semantic.memory``, ``block_pointers``, ``descriptors``)."""
from __future__ import annotations

from .. import semantic
from .core import block_pointer, builtin, tensor_member, unwrap


_NO_BOUNDARY = ("`padding_option` or `boundary_check` argument is not supported for loading a "
                "tensor of pointers or loading a scalar. Because the compiler does not know the "
                "boundary; please use block pointers (defined by `make_block_ptr`) instead")


@builtin
def load(pointer, mask=None, other=None, boundary_check=(), padding_option="",
         cache_modifier="", eviction_policy="", volatile=False):
    if isinstance(pointer, block_pointer):
        return semantic.block_pointer_load(pointer, unwrap(mask), unwrap(other),
                                           unwrap(boundary_check), unwrap(padding_option),
                                           cache_modifier, eviction_policy, volatile)
    if unwrap(boundary_check) or unwrap(padding_option):
        raise ValueError(_NO_BOUNDARY)
    return semantic.load(pointer, unwrap(mask), unwrap(other), cache_modifier, eviction_policy,
                         volatile)


@builtin
def store(pointer, value, mask=None, boundary_check=(), cache_modifier="", eviction_policy=""):
    if isinstance(pointer, block_pointer):
        semantic.block_pointer_store(pointer, value, unwrap(mask), unwrap(boundary_check),
                                     cache_modifier, eviction_policy)
        return
    if unwrap(boundary_check):
        raise ValueError(_NO_BOUNDARY.replace("loading", "storing"))
    semantic.store(pointer, value, unwrap(mask), cache_modifier, eviction_policy)


@builtin
def make_block_ptr(base, shape, strides, offsets, block_shape, order):
    """A pointer to the ``block_shape`` block at ``offsets`` of the tensor at ``base`` (its
    ``shape`` and ``strides`` given), for loads and stores with ``boundary_check``."""
    return semantic.make_block_ptr(base, shape, strides, offsets, block_shape, order)


@builtin
def advance(base, offsets):
    """The block pointer ``base`` moved by ``offsets``."""
    return semantic.advance(base, offsets)


@builtin
def make_tensor_descriptor(base, shape, strides, block_shape, padding_option="zero"):
    """A ``tensor_descriptor`` of the tensor at ``base`` (a scalar pointer) with ``shape`` and
    ``strides`` (integers, the last stride 1) read and written in tiles of ``block_shape``."""
    return semantic.make_tensor_descriptor(base, shape, strides, block_shape, padding_option)


@builtin
def load_tensor_descriptor(desc, offsets):
    """``desc.load(offsets)``."""
    return semantic.descriptor_load(desc, offsets)


@builtin
def store_tensor_descriptor(desc, offsets, value):
    """``desc.store(offsets, value)``."""
    semantic.descriptor_store(desc, offsets, value)


# Triton's tensor methods: x.store(v)
for _member in (store,):
    tensor_member(_member)
