"""The glue between the typing rules and kir: which builder the rules append to, and how
one typed op is appended.

In: the frontend's ``Builder`` (while it generates a kernel body) and its hook to inline an
``@aotk.jit`` function. Out: ``emit``, which appends one op and wraps its result in a
``tensor``; ``current_builder`` for the few rules that need more (regions, the function).
"""
from __future__ import annotations

import contextlib
import threading

from ..ir.kir import Builder
from ..language.core import tensor

_state = threading.local()


@contextlib.contextmanager
def building(builder: Builder, inline=None, num_warps: int | None = None,
             target: str | None = None):
    """Makes ``builder`` the target of every rule while a kernel body is generated.

    ``inline(fn, args)`` is the frontend's hook for rules that take an ``@aotk.jit`` function
    (a reduce/scan combine): it inlines ``fn`` on ``args`` at the builder's insertion point
    and returns what ``fn`` returns. ``num_warps``: the launch's, when the caller knows it;
    ``target``: the GPU target compiled for (None on the interpreter)."""
    previous = (getattr(_state, "builder", None), getattr(_state, "inline", None),
                getattr(_state, "num_warps", None), getattr(_state, "target", None))
    _state.builder, _state.inline, _state.num_warps, _state.target = \
        builder, inline, num_warps, target
    try:
        yield builder
    finally:
        _state.builder, _state.inline, _state.num_warps, _state.target = previous


def compile_target() -> str | None:
    """The target ("sm_90"...) the kernel being generated is compiled for; None when it
    runs on the interpreter."""
    return getattr(_state, "target", None)


def launch_num_warps() -> int:
    """The number of warps the kernel being generated will run with."""
    num_warps = getattr(_state, "num_warps", None)
    if num_warps is None:
        raise ValueError("the number of warps is not known while this kernel is generated "
                         "(kernel.kir() without num_warps=); compile or launch it instead")
    return num_warps


def inline_function(fn, args: list):
    """Generates the body of the ``@aotk.jit`` function ``fn`` on ``args`` (tensors) at the
    insertion point; returns its return value."""
    inline = getattr(_state, "inline", None)
    if inline is None:
        raise RuntimeError("no frontend is generating a kernel: cannot inline a function")
    return inline(fn, args)


def current_builder() -> Builder:
    """The builder of the kernel being generated."""
    b = getattr(_state, "builder", None)
    if b is None:
        raise RuntimeError("aotk.language functions can only be called inside an @aotk.jit kernel")
    return b


def emit(opcode, operands, result_type, **attrs) -> tensor | None:
    """Appends one op on ``operands`` (tensors) whose result has ``result_type`` (already
    decided by the rule); returns its result, or None for an op without one."""
    value = current_builder().create(opcode, [o.handle for o in operands], result_type, **attrs)
    return tensor(value) if value is not None else None
