"""aotk: ahead-of-time GPU kernels from a Triton-style Python block language."""
from . import language
from .errors import AotkError, CompilationError
from .jit import JITFunction, jit

__version__ = "0.1.0"


def compile(kernel, signature, constants=None, num_warps=4, num_stages=3, target="sm_90"):
    """Compiles ``kernel`` for one signature; see ``aotk.compiler.compile``."""
    from .compiler import compile as _compile
    return _compile(kernel, signature, constants=constants, num_warps=num_warps,
                    num_stages=num_stages, target=target)


__all__ = ["jit", "JITFunction", "compile", "language", "CompilationError", "AotkError",
           "__version__"]
