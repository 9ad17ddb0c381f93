"""``map_elementwise`` -> LLVM IR: the region lowered once per run of ``pack`` elements.

In: the op (its arguments and results in one layout, the results' natural one). Out: the
registers of every result there. Each thread takes its registers in runs of ``pack`` (a
short last run is padded with copies of its last element, whose results are dropped) and
lowers the region on those scalars; branches in the function become branches in the code,
per element, as Triton's ``map_elementwise`` does.
"""
from __future__ import annotations

from ..passes.layouts import SCALAR
from .registry import lowering


@lowering("map_elementwise")
def lower_map_elementwise(ctx, op) -> list:
    layout = ctx.plan.homes[op.results[0]]
    pack = op.attrs["pack"]
    region = op.regions[0]
    arguments = [ctx.regs(v, layout) for v in op.operands]
    count = ctx.threads.count(op.results[0], layout)
    results = [[] for _ in op.results]
    for start in range(0, count, pack):
        run = [min(start + k, count - 1) for k in range(pack)]
        scalars = [[registers[i]] for registers in arguments for i in run]
        yielded = ctx.lower_region(region, scalars,
                                   [SCALAR] * len(region.terminator.operands))
        for r in range(len(op.results)):
            for k in range(min(pack, count - start)):
                results[r].append(yielded[r * pack + k][0])
    return results
