"""Kernel source files -> their ``@aotk.jit`` functions, and the local files they import.

In: a Python file path and a function name. Out: the ``JITFunction`` (under any
``@autotune`` / ``@heuristics``: the variants give the constants) plus the absolute paths of
every module the import pulled in from the file's own directory tree (for the depfile and
the cache key). A file that imports ``triton`` gets aotk in its place unless told not to
(``aotk.triton_imports``). Errors name the file.
"""
from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import sys
from pathlib import Path

from ..autotune import Autotuner, Heuristics
from ..errors import CompilationError
from ..jit import JITFunction
from ..triton_imports import redirect_triton


class SourceError(Exception):
    pass


def _module_name(path: Path) -> str:
    return "aotk_user_" + hashlib.sha256(str(path).encode()).hexdigest()[:16]


def load_module(path: Path, triton_as_aotk: bool = True):
    """Imports ``path`` (with ``import triton`` loading aotk when ``triton_as_aotk``);
    returns (module, local dependency paths including itself)."""
    path = Path(path).resolve()
    if path.suffix != ".py":
        raise SourceError(f"{path}: a kernel source must be a Python file (.py)")
    root = path.parent
    before = set(sys.modules)
    sys.path.insert(0, str(root))
    try:
        spec = importlib.util.spec_from_file_location(_module_name(path), path)
        module = importlib.util.module_from_spec(spec)
        with redirect_triton() if triton_as_aotk else contextlib.nullcontext():
            spec.loader.exec_module(module)
    except CompilationError:
        raise
    except SystemExit as exc:
        # A module that calls sys.exit() while it is imported does not end aotk.
        raise SourceError(f"{path}: cannot import: it called sys.exit({exc.code!r}) while "
                          "being imported") from None
    except Exception as exc:  # noqa: BLE001 - any import failure is the user's file's
        raise SourceError(f"{path}: cannot import: {type(exc).__name__}: {exc}") from None
    finally:
        sys.path.remove(str(root))
    dependencies = {path}
    for name in set(sys.modules) - before:
        file = getattr(sys.modules[name], "__file__", None)
        if file and Path(file).resolve().is_relative_to(root) and "site-packages" not in file:
            dependencies.add(Path(file).resolve())
    return module, sorted(dependencies)


def load_kernel(path: Path, function: str, triton_as_aotk: bool = True):
    kernel, _, dependencies = load_kernel_and_tuner(path, function, triton_as_aotk)
    return kernel, dependencies


def load_kernel_and_tuner(path: Path, function: str, triton_as_aotk: bool = True):
    """(the JITFunction, the outermost ``@autotune`` wrapper over it or None, dependencies)."""
    kernel, tuner, _, dependencies = load_kernel_wrappers(path, function, triton_as_aotk)
    return kernel, tuner, dependencies


def load_kernel_wrappers(path: Path, function: str, triton_as_aotk: bool = True):
    """(the JITFunction, the outermost ``@autotune`` wrapper or None, the ``@heuristics``
    values {constexpr: function} in the order a launch computes them, dependencies)."""
    if Path(path).suffix == ".tc":   # Triton-C: the file is the kernel's whole source
        from ..tritonc import load as load_tritonc
        try:
            return load_tritonc(path, function), None, {}, [Path(path).resolve()]
        except OSError as exc:
            raise SourceError(f"{path}: cannot read: {exc.strerror}") from None
    module, dependencies = load_module(path, triton_as_aotk)
    kernel = getattr(module, function, None)
    tuner, heuristics = None, {}
    wrapper = kernel
    while isinstance(wrapper, (Autotuner, Heuristics)):
        if isinstance(wrapper, Autotuner) and tuner is None:
            tuner = wrapper
        if isinstance(wrapper, Heuristics):
            heuristics.update(wrapper.values)
        wrapper = wrapper.fn
    if isinstance(kernel, (Autotuner, Heuristics)):
        kernel = kernel.jit_function
    if not isinstance(kernel, JITFunction):
        raise SourceError(f"{path}: {function!r} is not an @aotk.jit function")
    return kernel, tuner, heuristics, dependencies
