"""The CPU reference: executes kir with numpy, program by program.

In: a kir ``Function``, a grid and the arguments (``run``). Out: the argument arrays, updated
in place. Importing the op-family modules registers their rules with the executor.
"""
from . import (atomics, combine, control, creation, debug, descriptors, dot,  # noqa: F401
               elementwise, gather, histogram, inline_asm, map_elementwise, math, memory, reduce,
               scan, sort, views)
from .executor import run

__all__ = ["run"]
