"""Installed Triton kernel libraries loaded through aotk's import redirection (liger.py,
fla.py), and what their loaders share."""
from __future__ import annotations

import contextlib
import os
import sys


@contextlib.contextmanager
def fresh_package(package: str):
    """Imports inside get new modules of ``package``; afterwards sys.modules is as before
    (so the library loaded with the real triton and with aotk can live in one process)."""
    saved = {n: m for n, m in sys.modules.items() if n.split(".")[0] == package}
    for name in saved:
        del sys.modules[name]
    try:
        yield
    finally:
        for name in [n for n in sys.modules if n.split(".")[0] == package]:
            del sys.modules[name]
        sys.modules.update(saved)


@contextlib.contextmanager
def interpreting():
    """AOTK_INTERPRET=1 for the duration: a library's host code launches on the CPU
    interpreter."""
    previous = os.environ.get("AOTK_INTERPRET")
    os.environ["AOTK_INTERPRET"] = "1"
    try:
        yield
    finally:
        if previous is None:
            del os.environ["AOTK_INTERPRET"]
        else:
            os.environ["AOTK_INTERPRET"] = previous
