"""Names of Triton 3.6's language that aotk does not provide yet: using one is one clear
error that names it, not an AttributeError from inside aotk.

In: a module's ``__getattr__`` asking for a name. Out: for a name Triton has there, a tl
builtin that raises (at the point of the kernel that calls it, as a CompilationError), or
an object that raises when a kernel uses it; AttributeError for any other name.
"""
from __future__ import annotations

from .core import builtin

# By module, the names Triton 3.6 defines there that aotk lacks.
NOT_PROVIDED = {
    # float8e4b8 and float8e5b16 are AMD's (Triton on CUDA rejects them too)
    "aotk.language": ("float8e4b8", "float8e5b16"),
    "aotk.language.standard": (),
    "aotk.language.extra.cuda": (),
    # every libdevice function Triton names is provided (aotk.semantic's math tables)
    "aotk.language.extra.libdevice": (),
}


def not_provided(qualified: str):
    """A tl builtin standing for Triton's ``qualified`` name: calling it is the error."""
    @builtin
    def missing(*args, **kwargs):
        raise NotImplementedError(f"{qualified} is not provided by aotk yet (Triton has it); "
                                  "see docs/architecture.md for adding a builtin")
    missing.__name__ = missing.__qualname__ = qualified.rsplit(".", 1)[1]
    return missing


def module_getattr(module: str, display: str):
    """A module ``__getattr__`` for ``module`` (shown to users as ``display``, e.g. tl)."""
    names = frozenset(NOT_PROVIDED[module])

    def lookup(name: str):
        if name in names:
            return not_provided(f"{display}.{name}")
        raise AttributeError(f"module {display!r} has no attribute {name!r}")
    return lookup
