"""``import triton`` resolving to aotk while a kernel file loads, so that a file from a Triton
kernel library is built as it is.

In: a ``with redirect_triton():`` block (``aotk.buildsys.sources`` runs each manifest
kernel file's import in one). Out: inside it, an ``import triton`` / ``import triton.X.Y`` /
``from triton.X import Y`` statement gives ``aotk`` / ``aotk.X.Y`` (``triton.language.extra.
libdevice`` -> ``aotk.language.extra.libdevice``); a Triton module aotk has no counterpart
for is a ModuleNotFoundError naming it (what Python raises for any missing module).

The redirection is of import statements, not of ``sys.modules``: nothing named ``triton``
is registered, so a real triton package stays importable elsewhere in the process. PyTorch
is left out of it: a kernel library's ``import torch`` can run torch's compiler modules,
which import the real triton's internals (``triton.backends``, ``triton.runtime``) and
test for it by import; they get the real package, or the ImportError that tells them
there is none. ``importlib.import_module("triton")`` is not an import statement and is not
redirected; ``importlib.util.find_spec("triton...")``, a library's probe for an optional
part of Triton, is answered for aotk's counterpart (``_redirected_find_spec``).
"""
from __future__ import annotations

import builtins
import contextlib
import importlib
import importlib.util
import sys
import threading

_PREFIX = "triton"

# Importers (by top-level package) whose ``import triton`` means the real one.
_KEEPS_REAL_TRITON = frozenset({"torch", "functorch", "torchgen", "triton"})

_lock = threading.Lock()
_depth = 0
_original_import = builtins.__import__   # the one in place when the first redirection opened


def _is_triton(name: str) -> bool:
    return name == _PREFIX or name.startswith(_PREFIX + ".")


def _exists(module_name: str) -> bool:
    """Whether the module can be imported; False also where a package above it is missing
    (find_spec raises then)."""
    try:
        return importlib.util.find_spec(module_name) is not None
    except ModuleNotFoundError:
        return False


def _counterpart(name: str):
    """``aotk[.X]`` for ``triton[.X]``, imported."""
    aotk_name = "aotk" + name[len(_PREFIX):]
    if not _exists(aotk_name):
        # ModuleNotFoundError, as for any missing module: libraries probing for an optional
        # part of Triton (fla: ``find_spec("triton.experimental.gluon")``) catch that one.
        raise ModuleNotFoundError(f"{name} is not provided by aotk (kernel files that import "
                                  f"triton load it as aotk, which has no {aotk_name})",
                                  name=name)
    return importlib.import_module(aotk_name)


def _redirected_import(name, globals=None, locals=None, fromlist=(), level=0):
    importer = ((globals or {}).get("__name__") or "").split(".")[0]
    if level != 0 or not _is_triton(name) or importer in _KEEPS_REAL_TRITON:
        return _original_import(name, globals, locals, fromlist, level)
    module = _counterpart(name)
    if not fromlist:
        return importlib.import_module("aotk")   # `import triton.X` binds the top package
    for entry in fromlist:
        if entry != "*" and not hasattr(module, entry):
            submodule = f"{name}.{entry}"
            if hasattr(module, "__path__") and _exists("aotk" + submodule[len(_PREFIX):]):
                _counterpart(submodule)
            else:
                raise ImportError(f"cannot import name {entry!r} from {name!r}: aotk's "
                                  f"{module.__name__} has no {entry}", name=name)
    return module


_original_find_spec = importlib.util.find_spec


def _redirected_find_spec(name, package=None):
    """``importlib.util.find_spec`` while a redirection is open: a ``triton`` name asked by
    a redirected importer is answered for its aotk counterpart (None, or
    ModuleNotFoundError naming the first missing package above it, as for any missing
    module). Python's own answer would come from ``sys.modules`` first, where the real
    triton may have put the name (fla probes ``triton.experimental.gluon``, then imports
    it). Bound by a library at import, it stays Python's own once no redirection is open."""
    importer = (sys._getframe(1).f_globals.get("__name__") or "").split(".")[0]
    if _depth == 0 or name.startswith(".") or not _is_triton(name) or \
            importer in _KEEPS_REAL_TRITON:
        return _original_find_spec(name, package)
    parts = name.split(".")
    for depth in range(1, len(parts) + 1):
        prefix = ".".join(parts[:depth])
        if not _exists("aotk" + prefix[len(_PREFIX):]):
            if depth == len(parts):
                return None
            raise ModuleNotFoundError(f"No module named {prefix!r} (aotk has no "
                                      f"aotk{prefix[len(_PREFIX):]})", name=prefix)
    return _original_find_spec("aotk" + name[len(_PREFIX):])


@contextlib.contextmanager
def redirect_triton():
    """Nested and concurrent uses share one hook (of ``import`` and of
    ``importlib.util.find_spec``), installed while any is open."""
    global _depth
    with _lock:
        if _depth == 0:
            global _original_import
            _original_import = builtins.__import__
            builtins.__import__ = _redirected_import
            importlib.util.find_spec = _redirected_find_spec
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                builtins.__import__ = _original_import
                importlib.util.find_spec = _original_find_spec
