"""Interpreter rule of ``inline_asm``: the assembly is PTX for the GPU and cannot run here;
the interpreter stops with an error naming the builtin (Triton's interpreter does too).
The one exception is ``griddepcontrol`` (tl.extra.cuda.gdc_wait / gdc_launch_dependents):
without a programmatic dependent launch, which the interpreter never makes, it does nothing.

In: the op. Out: a NotImplementedError, or griddepcontrol's dummy register (0).
"""
from __future__ import annotations

import numpy as np

from .executor import register_op_rules


def _inline_asm(ctx, op, *operands):
    if op.attrs["asm"].startswith("griddepcontrol.") and not operands:
        return np.int32(0)
    raise NotImplementedError(
        "tl.inline_asm_elementwise runs only on the GPU: the interpreter cannot execute the "
        "PTX assembly; build the kernel for a GPU target, or give the interpreter path a "
        "tl equivalent")


register_op_rules({"inline_asm": _inline_asm})
