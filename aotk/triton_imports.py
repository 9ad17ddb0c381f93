"""``import triton`` resolving to aotk while a kernel file loads, so that a file from a Triton
kernel library is built as it is.

In: a ``with redirect_triton():`` block (``aotk.buildsys.sources`` runs each manifest
kernel file's import in one). Out: inside it, ``triton`` is ``aotk`` and ``triton.X.Y`` is
``aotk.X.Y`` (``triton.language.extra.libdevice`` -> ``aotk.language.extra.libdevice``);
a Triton module aotk has no counterpart for is an ImportError naming it. Afterwards the
``triton`` names are taken out of ``sys.modules`` again, so a real triton package can still
be imported elsewhere in the process.
"""
from __future__ import annotations

import contextlib
import importlib
import importlib.abc
import importlib.util
import sys

_PREFIX = "triton"


class _AotkAlias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds ``triton[.X]`` as the already imported ``aotk[.X]``."""

    def find_spec(self, name, path=None, target=None):
        if name != _PREFIX and not name.startswith(_PREFIX + "."):
            return None
        counterpart = "aotk" + name[len(_PREFIX):]
        if importlib.util.find_spec(counterpart) is None:
            raise ImportError(f"{name} is not provided by aotk (kernel files that import "
                              f"triton load it as aotk, which has no {counterpart})", name=name)
        return importlib.util.spec_from_loader(name, self)

    def create_module(self, spec):
        return importlib.import_module("aotk" + spec.name[len(_PREFIX):])

    def exec_module(self, module):
        """The aotk module is loaded already."""


@contextlib.contextmanager
def redirect_triton():
    saved = {name: module for name, module in sys.modules.items()
             if name == _PREFIX or name.startswith(_PREFIX + ".")}
    for name in saved:
        del sys.modules[name]
    finder = _AotkAlias()
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)
        for name in [n for n in sys.modules if n == _PREFIX or n.startswith(_PREFIX + ".")]:
            del sys.modules[name]
        sys.modules.update(saved)
