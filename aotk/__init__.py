"""aotk: ahead-of-time GPU kernels from a Triton-style Python block language."""
import importlib
import sys
import types

# The public names, imported when first used (PEP 562): `import aotk` alone costs nothing, so
# that `python -m aotk build` can answer a no-op build before the compiler (numpy, llvmlite)
# is loaded. `import aotk.language as tl` and `from aotk import jit` work as ever.
_PUBLIC = {
    "language": (".language", None), "testing": (".testing", None), "torch": (".torch", None),
    # Triton's package imports its runtime: libraries probe `triton.runtime.driver.active`
    # after a plain `import triton` (fla decides its platform, tf32 and tile sizes by it).
    "runtime": (".runtime", None),
    "Config": (".autotune", "Config"), "autotune": (".autotune", "autotune"),
    "heuristics": (".autotune", "heuristics"),
    "AotkError": (".errors", "AotkError"), "CompilationError": (".errors", "CompilationError"),
    "cdiv": (".helpers", "cdiv"), "next_power_of_2": (".helpers", "next_power_of_2"),
    "Signature": (".ir.signature", "Signature"),
    "SignatureError": (".ir.signature", "SignatureError"),
    "JITFunction": (".jit", "JITFunction"), "jit": (".jit", "jit"),
    "constexpr_function": (".language.core", "constexpr_function"),
    "Launch": (".launch.recording", "Launch"),
    "record_launches": (".launch.recording", "record_launches"),
    "CompileOptions": (".options", "CompileOptions"),
    "redirect_triton": (".triton_imports", "redirect_triton"),
}


class _Package(types.ModuleType):
    """aotk's module type: ``aotk.jit`` and ``aotk.autotune`` stay the decorators after their
    same-named submodules load (the import system sets a package's attribute to a submodule
    when it first loads it; the eager imports this file used to make rebound the names)."""

    def __setattr__(self, name, value):
        if name in _SHADOWING_SUBMODULES and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


_SHADOWING_SUBMODULES = {"jit", "autotune"}
sys.modules[__name__].__class__ = _Package


def __getattr__(name):
    if name not in _PUBLIC:
        raise AttributeError(f"module 'aotk' has no attribute {name!r}")
    module_name, attribute = _PUBLIC[name]
    module = importlib.import_module(module_name, __name__)
    value = module if attribute is None else getattr(module, attribute)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_PUBLIC))


from .version import __version__


def compile(kernel, signature, constants=None, num_warps=4, num_stages=3, target="sm_90",
            debug=None, tma=True, maxnreg=None, num_ctas=1, enable_fp_fusion=True, *,
            options=None, older=None):
    """Compiles ``kernel`` for one signature (text, {param: entry} or a ``Signature``); see
    ``aotk.compiler.compile``. ``debug`` (default: the kernel's own setting) compiles device
    asserts in; ``tma=False`` reads tensor descriptors with pointer loads even where TMA
    could copy them; ``maxnreg`` caps the registers of a thread (PTX ``.maxnreg``);
    ``num_ctas`` must be 1; ``enable_fp_fusion=False`` keeps a * b + c from becoming one
    FMA (Triton's option); ``options``, a ``CompileOptions``, stands for all of them;
    ``older``, this specialization compiled for an older target, lends its PTX where the
    IR is the same (LLVM then runs once for both targets)."""
    from .compiler import compile as _compile
    return _compile(kernel, signature, constants=constants, num_warps=num_warps,
                    num_stages=num_stages, target=target, debug=debug, tma=tma,
                    maxnreg=maxnreg, num_ctas=num_ctas, enable_fp_fusion=enable_fp_fusion,
                    options=options, older=older)


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
