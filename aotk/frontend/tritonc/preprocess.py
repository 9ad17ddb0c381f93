"""Triton-C source text + macros -> preprocessed text and where each of its lines came from.

In: the source, its file name and {macro: replacement text}. Out: the text pcpp produces
(``#define``, ``#if`` / ``#ifdef`` / ``#else`` / ``#endif`` and ``#include`` applied, macros
expanded) without its line markers, and for each of its lines the line of the source it
came from, so that errors point into the file the user wrote. pcpp (a C99 preprocessor in
Python, from the package index) is used rather than a hand-written one.
"""
from __future__ import annotations

import io
import re

from ...errors import CompilationError

_LINE_MARKER = re.compile(r'^#line (\d+)(?: "(.*)")?\s*$')


def preprocess(text: str, filename: str, macros: dict) -> tuple[str, list[int]]:
    import pcpp

    errors = []

    class Preprocessor(pcpp.Preprocessor):
        def on_error(self, file, line, message):
            errors.append(CompilationError(f"preprocessor: {message}", file, line))

    preprocessor = Preprocessor()
    preprocessor.line_directive = "#line"
    for name, value in macros.items():
        preprocessor.define(f"{name} {value}")
    preprocessor.parse(text, filename)
    output = io.StringIO()
    preprocessor.write(output)
    if errors:
        raise errors[0]
    lines, origins, line = [], [], 1
    for raw in output.getvalue().splitlines():
        marker = _LINE_MARKER.match(raw)
        if marker:
            line = int(marker.group(1))
            continue
        lines.append(raw)
        origins.append(line)
        line += 1
    return "\n".join(lines) + "\n", origins
