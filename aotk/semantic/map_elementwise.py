"""Typing rules of ``tl.map_elementwise``: a scalar ``@aotk.jit`` function mapped over the
elements of blocks, with Triton 3.6's semantics.

In: the function, the arguments (broadcast to one shape, without promotion, as Triton
does) and ``pack``. Out: one ``map_elementwise`` op with one result per value the function
returns (per ``pack`` of them), all of the arguments' shape; a tuple of tensors when the
function returns several values. The op's region is the function inlined on scalars: its
block arguments are ``pack`` 0-d values of each argument's element type (argument by
argument: a0, a1, b0, b1 for pack=2), and it yields the returned values (result by result:
c0, c1, d0, d1). The function may branch on its scalars (``if x < y: return -1``), which
``tl.where`` cannot do without computing both sides. Numbers it returns become constants
of their literal type; every return path must give the same types.
"""
from __future__ import annotations

from ..ir.kir import Region, Value
from ..ir.types import BlockType
from ..language.core import tensor, unwrap
from .building import current_builder, inline_function
from .control import crossing_value
from .promotion import broadcast_shapes, to_tensor
from .views import broadcast_to_shape


def map_elementwise(scalar_fn, args, pack=1):
    """The results of ``scalar_fn`` on each element (``pack`` elements per call)."""
    pack = unwrap(pack)
    if not isinstance(pack, int) or isinstance(pack, bool) or pack < 1:
        raise ValueError(f"pack must be >= 1, got {pack!r}")
    args = [to_tensor(a) for a in args]
    if not args:
        raise ValueError("tl.map_elementwise needs at least one argument")
    shape = ()
    for a in args:
        shape = broadcast_shapes(shape, a.type.shape)
    args = [broadcast_to_shape(a, shape) for a in args]
    name = getattr(scalar_fn, "name", None) or getattr(scalar_fn, "__name__", repr(scalar_fn))
    region = Region([Value(BlockType(a.dtype)) for a in args for _ in range(pack)])
    builder = current_builder()
    with builder.insertion(region.body):
        returned = unwrap(inline_function(unwrap(scalar_fn), [tensor(v) for v in region.args]))
        values = list(returned) if isinstance(returned, (tuple, list)) else [returned]
        if returned is None or len(values) % pack:
            raise ValueError(f"{name!r} returns {0 if returned is None else len(values)} "
                             f"value(s); with pack={pack} it must return a multiple of {pack} "
                             "(each result for each of the packed elements)")
        values = [crossing_value(f"the value returned by {name!r}", v) for v in values]
        for index, value in enumerate(values):
            if value.type.shape:
                raise TypeError(f"{name!r} must return scalars; value {index} is a block of "
                                f"shape {list(value.type.shape)}")
        elements = [values[r * pack].dtype for r in range(len(values) // pack)]
        for index, value in enumerate(values):
            if value.dtype != elements[index // pack]:
                raise TypeError(f"{name!r} returns {value.dtype} and "
                                f"{elements[index // pack]} for the same result of the "
                                "packed elements; return one type")
        builder.create("yield", [v.handle for v in values], None)
    op = builder.create_region_op("map_elementwise", [a.handle for a in args], [region],
                                  [BlockType(e, shape) for e in elements], pack=pack)
    results = tuple(tensor(v) for v in op.results)
    return results if len(results) > 1 else results[0]


__all__ = ["map_elementwise"]
