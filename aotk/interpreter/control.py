"""Interpreter rules of the structured control flow ops ``for``, ``if`` and ``while``.

In: the op, whose operands are in the environment, and its regions (ending in ``yield`` /
``condition``). Out: the values the last region run yields (the loop-carried values; a
``for`` that runs no iteration gives its initial values). ``for`` runs ``range(start, end,
step)`` with the induction variable in the type of ``start``; ``if`` runs its then or else
region; ``while`` runs its before region, and while the condition holds its after region on
the forwarded values.
"""
from __future__ import annotations

from .executor import numpy_dtype, register_region_rules, run_region


def _for(ctx, op, env) -> list:
    operands = [env[v] for v in op.operands]
    start, end, step = (int(x) for x in operands[:3])
    induction_type = numpy_dtype(op.operands[0].element)
    carried = operands[3:]
    for index in range(start, end, step):
        carried = run_region(ctx, op.regions[0], env, [induction_type(index)] + carried)
    return carried


def _if(ctx, op, env) -> list:
    return run_region(ctx, op.regions[0 if bool(env[op.operands[0]]) else 1], env, [])


def _while(ctx, op, env) -> list:
    carried = [env[v] for v in op.operands]
    while True:
        condition, *forwarded = run_region(ctx, op.regions[0], env, carried)
        if not bool(condition):
            return forwarded
        carried = run_region(ctx, op.regions[1], env, forwarded)


register_region_rules({"for": _for, "if": _if, "while": _while})
