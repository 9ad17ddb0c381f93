"""Triton-C kernels from Python: ``aotk.tritonc.kernel(text, name)`` or ``load(path, name)``.

In: Triton-C source (the C-syntax block language; ``aotk.frontend.tritonc``) and the name
of one of its ``__global__`` functions. Out: a ``TritonCKernel``, usable as an ``@aotk.jit``
function: ``aotk.compile(kernel, kernel.signature(), constants={"BLOCK": 1024})`` and
``kernel[grid](...)`` on the interpreter or the GPU. Its constants are the macros the source
uses (``BLOCK``, ``TYPE``: a dtype becomes its C name, ``half`` for ``tl.float16``); its
parameters are all runtime parameters, typed by their C declarations.
Needs the ``tritonc`` extra (lark, pcpp).
"""
from __future__ import annotations

import ast
import hashlib
import importlib.util
import re
from pathlib import Path

from .errors import CompilationError
from .frontend.codegen import generate_kir
from .frontend.source import SourceInfo
from .ir.signature import Signature, runtime_parameter_names
from .jit import JITFunction

_C_NAMES = {"int1": "bool", "int8": "char", "int16": "short", "int32": "int", "int64": "long",
            "uint8": "unsigned char", "uint16": "unsigned short", "uint32": "unsigned",
            "uint64": "unsigned long", "float16": "half", "float32": "float",
            "float64": "double"}
_KERNEL_HEAD = re.compile(r"__global__\s+void\s+(\w+)\s*\(")


def _parser():
    from lark import Lark
    grammar = (Path(__file__).parent / "frontend" / "tritonc" / "grammar.lark").read_text()
    return Lark(grammar, parser="lalr", propagate_positions=True)


_PARSER = None


def macro_text(value) -> str:
    """A constant as the macro the preprocessor substitutes: a dtype its C type name,
    a bool 1 or 0, a number as written."""
    from .ir.types import DType
    if isinstance(value, DType):
        if value.name not in _C_NAMES:
            raise TypeError(f"{value.name} has no Triton-C type")
        return _C_NAMES[value.name]
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, str):
        from .ir.types import DType as _DType
        try:
            return macro_text(_DType(value))   # "fp16" -> half
        except (KeyError, ValueError, TypeError):
            return value
    return repr(value)


class _Translated:
    """One specialization of a Triton-C kernel as the Python frontend sees a kernel: name,
    parameters, the Python AST standing for it (positions in the Triton-C file) and a
    function whose globals hold tl and tc."""

    def __init__(self, name, params, module, source_info):
        from . import language
        from .frontend.tritonc import builtins
        self.name = name
        self.param_names = [p.name for p in params]
        self.constexpr_names = set()
        self.source_info = source_info
        self._module = module
        scope = {"tl": language, "tc": builtins}
        exec(compile(module, source_info.filename, "exec"), scope)
        self.fn = scope[name]

    def parse(self):
        return self._module


class TritonCKernel(JITFunction):
    """A Triton-C ``__global__`` function, launched and compiled like an ``@aotk.jit`` one."""

    constants_are_macros = True   # a manifest variant's constants may name any macro

    def __init__(self, text: str, name: str, filename: str = "<triton-c>"):
        self.text, self.name, self.__name__ = text, name, name
        self.filename = filename
        self.__doc__ = None
        self.__module__ = "aotk.tritonc"
        self.debug_option = None
        self._kir_cache = {}
        self.defaults = {}
        self.constexpr_names = set()
        self.param_names = self._parameter_names()
        self.runtime_names = list(self.param_names)
        self.do_not_specialize = frozenset()
        self.do_not_specialize_on_alignment = frozenset()
        lines = text.splitlines()
        self.source_info = SourceInfo(filename, 1, lines, 0)
        self._translations = {}

    def _parameter_names(self) -> list:
        """The names of the kernel's parameters, read before the constants are known (the
        file's own macros expanded, so a kernel named by a #define is found): the last
        identifier of each comma-separated declaration."""
        text = self.text
        if importlib.util.find_spec("pcpp") is not None:
            from .frontend.tritonc.preprocess import preprocess
            try:
                text, _ = preprocess(self.text, self.filename, {})
            except CompilationError:
                pass   # reported, with its line, when the kernel is translated
        heads = list(_KERNEL_HEAD.finditer(text))
        chosen = [m for m in heads if m.group(1) == self.name]
        if not chosen:
            # A kernel named by a macro the specialization defines (`__global__ void
            # KERNEL(...)` with KERNEL = "scale_fp16" among a manifest variant's constants):
            # by C convention the one head spelled in capitals. translate() checks that the
            # constants do expand it to this name.
            chosen = [m for m in heads if m.group(1).isupper()][:2]
            chosen = chosen if len(chosen) == 1 else []
        for match in chosen:
            depth, end = 1, match.end()
            while depth and end < len(text):
                depth += {"(": 1, ")": -1}.get(text[end], 0)
                end += 1
            declarations = text[match.end():end - 1]
            declarations = re.sub(r"\w+\s*\(\s*\d+\s*\)", "", declarations)   # __aligned(16)
            names = []
            for declaration in filter(str.strip, re.findall(r"[^,]+", declarations)):
                words = re.findall(r"[A-Za-z_]\w*", declaration)
                names.append(next(w for w in reversed(words)
                                  if w not in ("__noalias", "__readonly", "__writeonly",
                                               "restrict")))
            return names
        raise CompilationError(f"no __global__ function named {self.name!r}", self.filename)

    @property
    def source_digest(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()

    def translate(self, constants: dict | None = None):
        """The Python-frontend view of the kernel with ``constants`` as macros (memoized)."""
        global _PARSER
        if importlib.util.find_spec("lark") is None or importlib.util.find_spec("pcpp") is None:
            raise ImportError("Triton-C needs the tritonc extra: pip install 'aotk[tritonc]' "
                              "(lark and pcpp)")
        from lark.exceptions import UnexpectedInput

        from .frontend.tritonc.preprocess import preprocess
        from .frontend.tritonc.translate import Translator
        macros = {k: macro_text(v) for k, v in sorted((constants or {}).items())}
        key = tuple(macros.items())
        if key not in self._translations:
            text, origins = preprocess(self.text, self.filename, macros)
            if _PARSER is None:
                _PARSER = _parser()
            try:
                tree = _PARSER.parse(text)
            except UnexpectedInput as exc:
                line = origins[exc.line - 1] if 0 < exc.line <= len(origins) else exc.line
                expected = sorted(getattr(exc, "expected", None) or
                                  getattr(exc, "allowed", None) or [])
                found = getattr(exc, "token", None) or getattr(exc, "char", "")
                raise CompilationError(
                    f"syntax error at {str(found)!r}" +
                    (f" (expected one of {', '.join(expected[:8])})" if expected else ""),
                    self.filename, line, max(exc.column - 1, 0),
                    self.source_info.lines[line - 1] if line <= len(self.source_info.lines)
                    else None) from None
            kernels = [k for k in tree.children if str(k.children[0]) == self.name]
            if not kernels:
                named = ", ".join(repr(str(k.children[0])) for k in tree.children)
                raise CompilationError(
                    f"no __global__ function named {self.name!r}" +
                    (f" with the macros {dict(macros)} (the file defines {named})"
                     if macros else ""), self.filename)
            translator = Translator(self.filename, origins)
            module, params = translator.kernel(kernels[0])
            self._translations[key] = (_Translated(self.name, params, module, self.source_info),
                                       params)
        return self._translations[key]

    def signature(self, constants: dict | None = None) -> str:
        """The aotk signature the C parameter list declares, e.g. ``*fp32:16, i32``
        (``__aligned(16)`` / ``__multipleof(16)`` give ``:16``)."""
        from .ir import types as T
        from .ir.signature import SignatureParameter
        _, params = self.translate(constants)
        return str(Signature(tuple(SignatureParameter(
            p.name, T.PointerType(T.DType(p.element)) if p.pointer else T.DType(p.element),
            p.divisibility) for p in params)))

    def python_source(self, constants: dict | None = None) -> str:
        """The Python kernel this one translates to (for reading; positions aside)."""
        translated, _ = self.translate(constants)
        return ast.unparse(translated.parse())

    def kir(self, signature, hints=None, constants=None, debug=None, num_warps=None,
            target=None):
        debug = self.debug if debug is None else bool(debug)
        constants = dict(constants or {})
        translated, _ = self.translate(constants)
        names = runtime_parameter_names(self.runtime_names, {})
        if isinstance(signature, str):
            signature = Signature.parse(signature, names, self.name)
        elif not isinstance(signature, Signature):
            signature = Signature.from_types(signature, hints, names)
        key = (signature.cache_key, tuple(sorted((k, repr(v)) for k, v in constants.items())),
               debug, num_warps, target)
        if key not in self._kir_cache:
            # The macros are recorded as the function's constants, as a Python twin's
            # constexprs are: the same kernel gives the same kir, and shares its cache entry.
            self._kir_cache[key] = generate_kir(translated, signature.types, signature.hints,
                                                constants, debug, num_warps, target)
        return self._kir_cache[key]

    def _split_arguments(self, args, kwargs):
        """Launch arguments: the parameters positionally or by name; every other keyword is
        a macro of the specialization."""
        runtime = dict(zip(self.param_names, args))
        constants = {}
        for key, value in kwargs.items():
            (runtime if key in self.param_names else constants)[key] = value
        missing = [n for n in self.param_names if n not in runtime]
        if missing:
            raise TypeError(f"{self.name}() missing arguments {missing}")
        return runtime, constants

    def __repr__(self) -> str:
        return f"TritonCKernel({self.filename}:{self.name})"


def kernel(text: str, name: str, filename: str = "<triton-c>") -> TritonCKernel:
    return TritonCKernel(text, name, filename)


def load(path, name: str) -> TritonCKernel:
    path = Path(path)
    return TritonCKernel(path.read_text(), name, str(path))
