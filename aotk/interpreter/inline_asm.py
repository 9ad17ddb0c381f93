"""Interpreter rule of ``inline_asm``: none can run here. The assembly is PTX for the GPU;
the interpreter stops with an error naming the builtin (Triton's interpreter does too).

In: the op. Out: a NotImplementedError.
"""
from __future__ import annotations

from .executor import register_op_rules


def _inline_asm(ctx, op, *operands):
    raise NotImplementedError(
        "tl.inline_asm_elementwise runs only on the GPU: the interpreter cannot execute the "
        "PTX assembly; build the kernel for a GPU target, or give the interpreter path a "
        "tl equivalent")


register_op_rules({"inline_asm": _inline_asm})
