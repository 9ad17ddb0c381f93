"""Launches observed while a Python program runs -> the specializations it compiled for.

In: a ``with record_launches() as launches:`` block around code that launches ``@aotk.jit``
kernels (on the GPU or the interpreter). Out: ``launches``, one ``Launch`` per launch in
order: the kernel, the grid, the GPU ``Signature`` its arguments specialize to (as
``aotk.launch.arguments.specialize`` makes it, host arrays included), the constexprs and
the launch options. It is what an ahead-of-time build of that program's kernels needs:
``aotk.compile(launch.kernel, launch.signature, launch.constants, launch.num_warps,
launch.num_stages, target=...)``.
"""
from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass

from ..ir.signature import Signature
from .arguments import specialize


@dataclass(frozen=True)
class Launch:
    kernel: object
    grid: tuple
    signature: Signature
    constants: dict
    num_warps: int
    num_stages: int

    def specialization(self) -> tuple:
        """What one compiled variant is keyed by (two launches alike but for the grid and
        the argument values give the same one)."""
        return (self.kernel, self.signature, tuple(sorted(
            (k, repr(v)) for k, v in self.constants.items())), self.num_warps, self.num_stages)


_recorders = threading.local()


@contextlib.contextmanager
def record_launches():
    stack = _recorders.__dict__.setdefault("stack", [])
    launches: list[Launch] = []
    stack.append(launches)
    try:
        yield launches
    finally:
        stack.remove(launches)


def observe(kernel, grid, runtime_args, constants, num_warps, num_stages):
    """Called by every ``kernel[grid](...)`` launch; records it where a recording is open."""
    stack = getattr(_recorders, "stack", None)
    if not stack:
        return
    signature, _ = specialize(kernel, runtime_args, host_memory=True)
    launch = Launch(kernel, grid, signature, dict(constants), num_warps, num_stages)
    for launches in stack:
        launches.append(launch)
