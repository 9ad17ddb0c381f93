"""A Python kernel function -> its source, AST and parameters.

In: the decorated Python function. Out: a ``KernelSource``: the dedented source (from its
``def`` line) and its AST, a ``SourceInfo`` mapping AST positions back to the file, the
parameter names, which are ``tl.constexpr``, their defaults, and ``bind_arguments`` for
calls from other kernels. Code generation recognises callable kernels by this class.
"""
from __future__ import annotations

import ast
import hashlib
import inspect
import linecache
import textwrap

from ..errors import CompilationError
from ..language.core import constexpr


class SourceInfo:
    """Maps AST positions of a dedented function source back to its file."""

    def __init__(self, filename: str, first_line: int, lines: list[str], indent: int):
        self.filename = filename
        self.first_line = first_line
        self.lines = lines
        self.indent = indent

    def location(self, node) -> tuple:
        return (self.filename, node.lineno + self.first_line - 1, node.col_offset + self.indent)

    def error(self, node, message) -> CompilationError:
        line = getattr(node, "lineno", None)
        if line is None:
            return CompilationError(message, self.filename)
        source_line = self.lines[line - 1] if 0 < line <= len(self.lines) else None
        return CompilationError(message, self.filename, line + self.first_line - 1,
                                node.col_offset + self.indent,
                                (" " * self.indent + source_line) if source_line is not None else None)


class KernelSource:
    """What the source of a kernel function says: no types, no launching."""

    def __init__(self, fn):
        self.fn = fn
        self.name = fn.__name__
        self.__name__ = fn.__name__
        self.__doc__ = fn.__doc__
        self.__module__ = fn.__module__
        signature = inspect.signature(fn)
        self.param_names = list(signature.parameters)
        self.arg_names = self.param_names   # Triton's name for them
        self.defaults = {name: p.default for name, p in signature.parameters.items()
                         if p.default is not inspect.Parameter.empty}
        self.constexpr_names = {name for name, p in signature.parameters.items()
                                if _is_constexpr_annotation(p.annotation)}
        self.runtime_names = [n for n in self.param_names if n not in self.constexpr_names]
        self.source_info, self._source = _read_source(fn)
        self._tree = None
        self.parse()   # syntax errors surface at decoration, pointing at the file

    @property
    def source_digest(self) -> str:
        """sha256 of the file the kernel is written in (its helpers in that file included),
        or of its own source where the file cannot be read."""
        try:
            with open(self.source_info.filename, "rb") as f:
                content = f.read()
        except OSError:
            content = self._source.encode()
        return hashlib.sha256(content).hexdigest()

    def parse(self) -> ast.Module:
        if self._tree is None:
            try:
                self._tree = ast.parse(self._source)
            except SyntaxError as exc:
                raise CompilationError(f"invalid syntax: {exc.msg}", self.source_info.filename,
                                       (exc.lineno or 1) + self.source_info.first_line - 1,
                                       (exc.offset or 1) - 1 + self.source_info.indent) from None
        return self._tree

    def bind_arguments(self, args, kwargs) -> dict:
        """Positional + keyword + defaults -> {param name: value}, for inlined calls."""
        if len(args) > len(self.param_names):
            raise TypeError(f"{self.name}() takes {len(self.param_names)} arguments, "
                            f"got {len(args)}")
        bound = dict(zip(self.param_names, args))
        for key, value in kwargs.items():
            if key not in self.param_names:
                raise TypeError(f"{self.name}() got an unexpected argument {key!r}")
            bound[key] = value
        for name in self.param_names:
            if name not in bound:
                if name not in self.defaults:
                    raise TypeError(f"{self.name}() missing argument {name!r}")
                bound[name] = constexpr(self.defaults[name])
            elif name in self.constexpr_names and not isinstance(bound[name], constexpr):
                if hasattr(bound[name], "handle"):
                    raise TypeError(f"argument {name!r} of {self.name}() is a tl.constexpr "
                                    "and needs a compile-time value")
                bound[name] = constexpr(bound[name])
        return bound


def _is_constexpr_annotation(annotation) -> bool:
    if annotation is constexpr:
        return True
    if isinstance(annotation, str):   # `from __future__ import annotations`
        return annotation.split(".")[-1] == "constexpr"
    return False


def _read_source(fn):
    filename = inspect.getsourcefile(fn) or fn.__code__.co_filename
    lines, first_line = inspect.getsourcelines(fn)
    raw = "".join(lines)
    source = textwrap.dedent(raw)
    indent = len(lines[0]) - len(lines[0].lstrip())
    # Drop decorators so line 1 of the parsed tree is the `def` line.
    tree = ast.parse(source)
    def_line = tree.body[0].lineno
    kept = source.splitlines(keepends=True)[def_line - 1:]
    linecache.checkcache(filename)
    info = SourceInfo(filename, first_line + def_line - 1, [l.rstrip("\n") for l in kept], indent)
    return info, "".join(kept)
