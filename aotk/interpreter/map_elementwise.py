"""Interpreter rule of ``map_elementwise``: the region run on each run of ``pack`` elements.

In: the op and the environment holding its operand arrays. Out: one array per result.
The elements are taken in row-major order, ``pack`` consecutive ones per call (a short
last run is padded with copies of its last element, whose results are dropped); each call
runs the region on 0-d arrays, so its branches see one element at a time.
"""
from __future__ import annotations

import numpy as np

from .executor import finish, register_region_rules, run_region


def _map_elementwise(ctx, op, env) -> list:
    pack = op.attrs["pack"]
    region = op.regions[0]
    flat = [np.asarray(env[v]).reshape(-1) for v in op.operands]
    count = flat[0].size if flat else 1
    outputs = [np.empty(count, dtype=finish(0, r.element).dtype) for r in op.results]
    for start in range(0, count, pack):
        run = [min(start + k, count - 1) for k in range(pack)]
        args = [np.asarray(values[i]) for values in flat for i in run]
        returned = run_region(ctx, region, env, args)
        for r, out in enumerate(outputs):
            for k in range(min(pack, count - start)):
                out[start + k] = finish(returned[r * pack + k], op.results[r].element)
    shape = op.results[0].type.shape
    return [finish(out.reshape(shape), r.element) for out, r in zip(outputs, op.results)]


register_region_rules({"map_elementwise": _map_elementwise})
