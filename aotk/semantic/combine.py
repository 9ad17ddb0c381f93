"""Typing rules of reductions and scans with a combine function (``tl.reduce``,
``tl.associative_scan``).

In: a block or a tuple of blocks of one shape, an axis, an ``@aotk.jit`` combine function of
2N scalars returning N. Out: a kir ``reduce`` / ``scan`` op with ``combine="custom"``, one
result per input (a tensor, or a tuple when the input was a tuple). The combine function
becomes the op's region: its block arguments are 0-d values of the inputs' element types
(the N accumulated values, then the N new ones), its body is the function inlined by the
frontend (``building.inline_function``), and it ends in a ``yield`` of N values of exactly the
inputs' types. Numbers the function returns become constants of those types.
"""
from __future__ import annotations

from ..ir.kir import Region, Value
from ..ir.types import BlockType
from ..language.core import tensor, unwrap
from .building import current_builder, inline_function
from .promotion import constant, is_literal
from .reduce import keep_reduced_dims, normalize_axis

__all__ = ["combine_region", "reduce_with", "scan_axis", "associative_scan"]


def _function_name(fn) -> str:
    return getattr(fn, "name", None) or getattr(fn, "__name__", None) or repr(fn)


def _inputs(input, what: str) -> tuple[list, bool]:
    """The input blocks, and whether they came as a tuple."""
    value = unwrap(input)
    is_tuple = isinstance(value, (tuple, list))
    inputs = list(value) if is_tuple else [input]
    if not inputs:
        raise ValueError(f"{what} needs at least one input block")
    for x in inputs:
        if not isinstance(x, tensor):
            raise TypeError(f"{what} takes blocks, got {unwrap(x)!r}")
        if not x.type.shape:
            raise ValueError(f"{what} needs blocks, got a scalar")
        if x.dtype.is_ptr():
            raise TypeError(f"{what} cannot combine pointers")
    shapes = {tuple(x.type.shape) for x in inputs}
    if len(shapes) > 1:
        raise ValueError(f"the inputs of {what} must have one shape, got "
                         f"{', '.join(str(list(s)) for s in sorted(shapes))}")
    return inputs, is_tuple


def combine_region(combine_fn, elements: list, what: str) -> Region:
    """The region of a combine function over ``elements`` (one dtype per input)."""
    combine_fn = unwrap(combine_fn)
    count = len(elements)
    name = _function_name(combine_fn)
    args = [Value(BlockType(e)) for e in elements + elements]
    region = Region(args)
    builder = current_builder()
    with builder.insertion(region.body):
        returned = inline_function(combine_fn, [tensor(a) for a in args])
        returned = unwrap(returned)
        values = list(returned) if isinstance(returned, (tuple, list)) else \
            ([] if returned is None else [returned])
        if len(values) != count:
            raise ValueError(
                f"the combine function {name!r} of {what} returns {len(values)} value(s), but "
                f"{what} combines {count} input(s): it takes {2 * count} scalars (the "
                f"accumulated values, then the new ones) and must return {count}")
        yielded = []
        for index, (value, element) in enumerate(zip(values, elements)):
            if is_literal(value) and not isinstance(unwrap(value), str):
                value = constant(unwrap(value), element)
            if not isinstance(value, tensor) or value.type.shape:
                raise TypeError(f"the combine function {name!r} of {what} must return scalars; "
                                f"value {index} is {value!r}")
            if value.dtype != element:
                raise TypeError(
                    f"the combine function {name!r} of {what} returns {value.dtype} for input "
                    f"{index}, which is {element}; return the input's type (cast with "
                    f".to(tl.{element.name}))")
            yielded.append(value.handle)
        builder.create("yield", yielded, None)
    return region


def _custom_op(opcode, inputs, region, result_types, **attrs) -> list:
    op = current_builder().create_region_op(opcode, [x.handle for x in inputs], [region],
                                            result_types, combine="custom", **attrs)
    return [tensor(r) for r in op.results]


def _pack(values: list, is_tuple: bool):
    return tuple(values) if is_tuple else values[0]


def reduce_with(input, axis, combine_fn, keep_dims=False):
    """``tl.reduce``: the inputs reduced along ``axis`` (None: every axis) by ``combine_fn``."""
    inputs, is_tuple = _inputs(input, "tl.reduce")
    elements = [x.dtype for x in inputs]
    rank = len(inputs[0].type.shape)
    axis = unwrap(axis)
    axes = list(range(rank)) if axis is None else [normalize_axis(inputs[0], axis)]
    for a in reversed(axes):   # the last axis first, so the remaining axis numbers hold
        region = combine_region(combine_fn, elements, "tl.reduce")
        shape = inputs[0].type.shape[:a] + inputs[0].type.shape[a + 1:]
        inputs = _custom_op("reduce", inputs, region, [x.type.with_shape(shape) for x in inputs],
                            axis=a)
    return _pack([keep_reduced_dims(x, axes, keep_dims) for x in inputs], is_tuple)


def scan_axis(x: tensor, axis) -> int:
    """A scan's axis, normalized: one axis of the block (negative counts from the end)."""
    rank = len(x.type.shape)
    value = unwrap(axis)
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"a scan needs one integer axis, got {value!r}")
    value = int(value)
    if not -rank <= value < rank:
        raise ValueError(f"scan axis {value} is out of range for a {rank}-d block "
                         f"(axes 0..{rank - 1}, or -{rank}..-1 from the end)")
    return value + rank if value < 0 else value


def associative_scan(input, axis, combine_fn, reverse=False):
    """``tl.associative_scan``: inclusive scan of the inputs along ``axis`` by ``combine_fn``."""
    inputs, is_tuple = _inputs(input, "tl.associative_scan")
    axis = scan_axis(inputs[0], axis)
    region = combine_region(combine_fn, [x.dtype for x in inputs], "tl.associative_scan")
    results = _custom_op("scan", inputs, region, [x.type for x in inputs], axis=axis,
                         reverse=bool(unwrap(reverse)))
    return _pack(results, is_tuple)
