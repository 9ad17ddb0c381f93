"""Errors users see: CompilationError points at the kernel source, AotkError at a library call;
``suggestion`` ends a message about an unknown name."""
from __future__ import annotations

import difflib


def suggestion(name: str, known) -> str:
    """"; did you mean 'x'?" where a known name is close to ``name``, else the known names."""
    close = difflib.get_close_matches(name, list(known), n=1)
    return f"; did you mean {close[0]!r}?" if close else f" (known: {', '.join(known)})"


class CompilationError(Exception):
    """A kernel that cannot be compiled, located in its source file.

    The message reads like a compiler diagnostic::

        kernels/add.py:12:8: error: `other` needs a `mask` ...
            x = tl.load(x_ptr + offs, other=0.0)
                ^
    """

    def __init__(self, message: str, filename: str = "<unknown>", line: int | None = None,
                 column: int | None = None, source_line: str | None = None):
        self.message = message
        self.filename = filename
        self.line = line
        self.column = column
        self.source_line = source_line
        super().__init__(self._render())

    def _render(self) -> str:
        if self.line is None:
            return f"{self.filename}: error: {self.message}"
        text = f"{self.filename}:{self.line}:{(self.column or 0) + 1}: error: {self.message}"
        if self.source_line is not None:
            text += f"\n    {self.source_line.rstrip()}\n    {' ' * (self.column or 0)}^"
        return text


class AotkError(RuntimeError):
    """A failing status from a built library or a launch, with the library's message."""
