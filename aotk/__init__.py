"""aotk: ahead-of-time GPU kernels from a Triton-style Python block language."""
from . import language, testing
from .autotune import Config, autotune, heuristics
from .errors import AotkError, CompilationError
from .helpers import cdiv, next_power_of_2
from .ir.signature import Signature, SignatureError
from .jit import JITFunction, jit
from .language.core import constexpr_function
from .launch.recording import Launch, record_launches
from .options import CompileOptions
from .triton_imports import redirect_triton
from .version import __version__


def compile(kernel, signature, constants=None, num_warps=4, num_stages=3, target="sm_90",
            debug=None, tma=True, maxnreg=None, num_ctas=1, *, options=None):
    """Compiles ``kernel`` for one signature (text, {param: entry} or a ``Signature``); see
    ``aotk.compiler.compile``. ``debug`` (default: the kernel's own setting) compiles device
    asserts in; ``tma=False`` reads tensor descriptors with pointer loads even where TMA
    could copy them; ``maxnreg`` caps the registers of a thread (PTX ``.maxnreg``);
    ``num_ctas`` must be 1; ``options``, a ``CompileOptions``, stands for all of them."""
    from .compiler import compile as _compile
    return _compile(kernel, signature, constants=constants, num_warps=num_warps,
                    num_stages=num_stages, target=target, debug=debug, tma=tma,
                    maxnreg=maxnreg, num_ctas=num_ctas, options=options)


def build(manifest="aotk.toml", out_dir=None, jobs=None, **options):
    """Builds a manifest into ``lib<name>.so`` + header; see ``aotk.buildsys.builder.build``."""
    from .buildsys.builder import build as _build
    return _build(manifest, out_dir=out_dir, jobs=jobs, **options)


def load(path):
    """Loads a library built by ``aotk build``; see ``aotk.launch.library``."""
    from .launch.library import load as _load
    return _load(path)


__all__ = ["jit", "build", "load", "JITFunction", "compile", "CompileOptions", "Signature",
           "SignatureError", "language", "CompilationError", "AotkError", "__version__", "cdiv",
           "next_power_of_2", "constexpr_function", "autotune", "heuristics", "Config", "testing",
           "redirect_triton", "record_launches", "Launch"]
