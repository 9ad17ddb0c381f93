"""Which descriptor ops can be TMA copies, and the host-side recipe of their tensor maps.

In: a ``descriptor_load`` or ``descriptor_store`` op (``tl.make_tensor_descriptor(...)``,
or a host ``TensorDescriptor`` argument) and the kernel's parameters. Out: a
``TensorMapRecipe``, or None where the descriptor cannot become a TMA tensor map, which
leaves it to the pointer fallback (``passes.descriptors``); ``tensor_map_index`` numbers
a kernel's maps (one parameter per distinct recipe). ``column_aligned``: whether an op's
innermost offset is proven to keep the box's start on 16 bytes, which the hardware needs at
run time (a copy that starts elsewhere stops the kernel with an illegal instruction), from
the axis info of its offsets.

A tensor map (``CUtensorMap``, 128 bytes) is encoded on the host by
``cuTensorMapEncodeTiled`` and passed to the kernel as a ``.param`` (a grid constant). So
everything the map holds must be known at launch: the descriptor's base must be a kernel
parameter, its shape and row stride kernel parameters or constants. The driver refuses a
base that is not 16-byte aligned or a row stride that is not a multiple of 16 bytes, so
both must be proven by the build's specialization (``:16`` on the pointer, a stride hint
times the element size a multiple of 16).

One copy fills one 128-byte panel of ``backend.swizzle``'s layout (box: all rows of the
block, 128 bytes of columns) with the hardware's 128B swizzle, which is exactly that
layout: a block of C panels takes C copies at column offsets 0, 128/size, ...

Descriptors of rank 3 to 5 qualify when their block is 1 in every dimension but the last
two (``desc.load([b, m, k])`` of a [1, BM, BK] block, reshaped to [BM, BK] for the dot): the
map then has the descriptor's rank, its box is 1 in the leading dimensions, and one copy
still fills one panel of the 2-D tile.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..ir.kir import descriptor_operands

SWIZZLE_BYTES = 128       # the box's inner extent: one swizzle panel
MAX_BOX_ROWS = 256        # cuTensorMapEncodeTiled: boxDim[i] <= 256
TMA_ALIGNMENT = 16        # global address and strides: multiples of 16 bytes
MAX_DIMENSION = 2 ** 32   # globalDim[i] from 1 to 2^32
MAX_STRIDE_BYTES = 2 ** 40   # globalStrides[i] below 2^40
MAX_RANK = 5              # cuTensorMapEncodeTiled: tensorRank from 1 to 5
TENSOR_MAP_BYTES = 128    # a CUtensorMap, 64-byte aligned wherever it is passed
TENSOR_MAP_ALIGNMENT = 64
# cuTensorMapDataType per element type (the driver's enum values).
DATA_TYPES = {"int8": 0, "uint8": 0, "uint16": 1, "int16": 1, "uint32": 2, "int32": 3,
              "uint64": 4, "int64": 5, "float16": 6, "float32": 7, "float64": 8,
              "bfloat16": 9}


@dataclass(frozen=True)
class TensorMapRecipe:
    """How the host encodes one tensor map of the descriptor's rank. Dimension entries are
    ("param", name) or ("value", int), outermost first: ``shape`` has one per dimension,
    ``strides`` (in elements) one per dimension but the last, whose stride is 1; ``box`` is
    (rows, columns) of one copy, 1 in the leading dimensions."""
    base: str
    element: str
    itemsize: int
    shape: tuple
    strides: tuple
    box: tuple

    @property
    def rank(self) -> int:
        return len(self.shape)

    def to_json(self) -> dict:
        return {"base": self.base, "element": self.element, "itemsize": self.itemsize,
                "data_type": DATA_TYPES[self.element], "shape": [list(s) for s in self.shape],
                "strides": [list(s) for s in self.strides], "box": list(self.box),
                "swizzle": SWIZZLE_BYTES}


def _entry(value, params: dict):
    """("param", name) for a kernel parameter, ("value", n) for a constant, else None."""
    if value.owner is None:
        param = params.get(value)
        return ("param", param.name) if param is not None else None
    if value.owner.opcode == "constant" and not value.type.shape:
        return ("value", int(value.owner.attrs["value"]))
    return None


def _multiple_of_16_bytes(entry, params_by_name: dict, itemsize: int) -> bool:
    kind, content = entry
    if kind == "value":
        return content > 0 and content * itemsize % TMA_ALIGNMENT == 0
    hint = params_by_name[content].hint or 1
    return hint > 1 and hint * itemsize % TMA_ALIGNMENT == 0


def tensor_map_recipe(op, function) -> TensorMapRecipe | None:
    """The recipe of a descriptor load or store that TMA can copy, else None."""
    if op.opcode not in ("descriptor_load", "descriptor_store") or \
            not 2 <= op.attrs["rank"] <= MAX_RANK:
        return None
    block = op.attrs["block_shape"]
    if any(size != 1 for size in block[:-2]):
        return None
    params = {p.value: p for p in function.params}
    by_name = {p.name: p for p in function.params}
    base, shapes, strides, _, value = descriptor_operands(op)
    element = (op.result if value is None else value).element
    itemsize = element.itemsize
    rows, columns = block[-2:]
    base_entry = _entry(base, params)
    shape_entries = [_entry(v, params) for v in shapes]
    stride_entries = [_entry(v, params) for v in strides]
    if base_entry is None or base_entry[0] != "param" or None in shape_entries + stride_entries:
        return None
    if (by_name[base_entry[1]].hint or 1) < TMA_ALIGNMENT:
        return None
    if stride_entries[-1] != ("value", 1) or not all(
            _multiple_of_16_bytes(e, by_name, itemsize) for e in stride_entries[:-1]):
        return None
    if any(kind == "value" and not 0 < n <= MAX_DIMENSION for kind, n in shape_entries):
        return None
    if columns * itemsize % SWIZZLE_BYTES or rows > MAX_BOX_ROWS or element.name not in DATA_TYPES:
        return None
    return TensorMapRecipe(base_entry[1], element.name, itemsize, tuple(shape_entries),
                           tuple(stride_entries[:-1]), (rows, SWIZZLE_BYTES // itemsize))


def tensor_map_index(function, recipe: TensorMapRecipe) -> int:
    """The index of ``recipe`` among the kernel's tensor-map parameters (added if new)."""
    if recipe not in function.tensor_maps:
        function.tensor_maps.append(recipe)
    return function.tensor_maps.index(recipe)


def column_aligned(op, infos: dict) -> bool:
    """Whether the first column the descriptor op ``op`` touches is proven to start 16
    bytes after a row's start (with the base and row strides a map needs, its global
    address is then 16-byte aligned): the innermost offset's divisibility (axis info of
    the unrewritten kir, ``infos``) times the element size."""
    _, _, _, offsets, value = descriptor_operands(op)
    element = (op.result if value is None else value).element
    info = infos.get(offsets[-1])
    return info is not None and info.divisibility[0] * element.itemsize % TMA_ALIGNMENT == 0
