"""``TensorDescriptor``: a tensor descriptor built on the host and passed as a kernel argument
(Triton's ``triton.tools.tensor_descriptor.TensorDescriptor``).

In: a tensor (torch, CUDA array or numpy), its shape and strides in elements (every stride
but the last a multiple of 16 bytes, as Triton requires), the block shape a kernel loads
and the padding. Out: the launch argument; ``aotk.jit`` passes its base
pointer, shape and strides (but the last, which must be 1) as runtime parameters named
``NAME_base``, ``NAME_shape0``.., ``NAME_stride0``.. and specializes the kernel on the block
shape and padding (``HostDescriptorLayout``), so inside the kernel the parameter is the
descriptor ``tl.make_tensor_descriptor`` would make of them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..ir.signature import HostDescriptorLayout


@dataclass
class TensorDescriptor:
    base: Any
    shape: list
    strides: list
    block_shape: list
    padding: str = "zero"

    def __post_init__(self):
        rank = len(self.shape)
        if len(self.strides) != rank or len(self.block_shape) != rank:
            raise ValueError(f"a TensorDescriptor takes one stride and one block dimension per "
                             f"dimension of its shape: shape {list(self.shape)}, strides "
                             f"{list(self.strides)}, block_shape {list(self.block_shape)}")
        if int(self.strides[-1]) != 1:
            raise ValueError(f"Last dimension must be contiguous: the last stride is "
                             f"{self.strides[-1]}, not 1")
        if self.padding not in ("zero", "nan"):
            raise ValueError(f"padding must be 'zero' or 'nan', got {self.padding!r}")
        # Triton's rule (TMA's): every stride but the last a multiple of 16 bytes. A base
        # given as an address has no element size to check it with.
        itemsize = getattr(getattr(self.base, "dtype", None), "itemsize", None)
        if isinstance(itemsize, int):
            for stride in self.strides[:-1]:
                if int(stride) * itemsize % 16:
                    raise ValueError(f"strides must be 16-byte aligned: a stride of {stride} "
                                     f"elements of {itemsize} bytes is {int(stride) * itemsize} "
                                     f"bytes (strides {list(self.strides)})")

    @staticmethod
    def from_tensor(tensor, block_shape, padding="zero") -> "TensorDescriptor":
        """A descriptor of all of ``tensor`` (strides in elements, as torch gives them)."""
        strides = tensor.stride() if callable(getattr(tensor, "stride", None)) else \
            tuple(s // tensor.itemsize for s in tensor.strides)
        return TensorDescriptor(tensor, list(tensor.shape), list(strides), list(block_shape),
                                padding)

    def layout(self) -> HostDescriptorLayout:
        return HostDescriptorLayout(tuple(int(b) for b in self.block_shape), self.padding)

    def runtime_arguments(self, name: str) -> dict:
        """{expanded parameter name: value} in the order the kernel's parameters take them.
        Where the base's element size is known, the strides are ``RowStride``s: the launch
        specializes them on 16 bytes, not only on 16 elements."""
        arguments = {f"{name}_base": self.base}
        arguments.update({f"{name}_shape{d}": int(s) for d, s in enumerate(self.shape)})
        itemsize = getattr(getattr(self.base, "dtype", None), "itemsize", None)
        stride = RowStride.of(itemsize) if isinstance(itemsize, int) and itemsize else int
        arguments.update({f"{name}_stride{d}": stride(s)
                          for d, s in enumerate(self.strides[:-1])})
        return arguments


class RowStride(int):
    """A host descriptor's stride (elements), which knows how many elements make 16 bytes.

    TMA needs a descriptor's strides to be multiples of 16 bytes (``TensorDescriptor``
    refuses others, as Triton's does). The launch gives an int the hint 16 when it divides by
    16; a stride of 40 fp32 elements (160 bytes) would get none and keep its kernel off
    TMA. ``aotk.launch.arguments.specialize_values`` hints a RowStride with
    ``elements_per_16_bytes`` where that divides it."""
    elements_per_16_bytes = 16
    _classes: dict = {}

    @classmethod
    def of(cls, itemsize: int):
        """The RowStride class for elements of ``itemsize`` bytes."""
        found = cls._classes.get(itemsize)
        if found is None:
            found = cls._classes[itemsize] = type(
                f"RowStride{itemsize}", (cls,),
                {"elements_per_16_bytes": max(1, 16 // itemsize)})
        return found
