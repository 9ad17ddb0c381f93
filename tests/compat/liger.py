"""liger-kernel, an installed Triton kernel library, loaded through aotk's import redirection.

In: the installed ``liger_kernel`` package (a test extra; nothing of it is copied here). Out:
- ``load_ops(redirect)``: its CUDA op modules (``liger_kernel/ops/*.py`` and
  ``ops/experimental/*.py``), imported with ``import triton`` giving aotk (``redirect=True``)
  or the real triton; ``sys.modules`` is left as found, so both can live in one process;
- ``kernels(ops)``: every ``@triton.jit`` function those modules define, split into kernels
  (launched from host code: ``name[grid](...)``) and device functions (called from kernels);
- ``cases()`` (``liger_cases_*``): liger's own host code (its autograd Functions) run on inputs,
  against PyTorch written out from the op's definition.
The other backends liger ships (``ops/backends/_ascend`` for Ascend NPUs through
triton-ascend, ``ops/cutile``, ``ops/cutedsl``) are not Triton-for-CUDA code and are left out.
"""
from __future__ import annotations

import ast
import contextlib
import importlib
import importlib.util
from pathlib import Path

from aotk.autotune import Autotuner, Heuristics
from aotk.jit import JITFunction
from aotk.triton_imports import redirect_triton

from . import fresh_package, interpreting

PACKAGE = "liger_kernel"


def package_dir() -> Path:
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None:
        raise ImportError("liger-kernel is not installed (it is in aotk's test extra)")
    return Path(spec.origin).parent


def op_files() -> list[Path]:
    ops = package_dir() / "ops"
    return sorted(p for p in [*ops.glob("*.py"), *(ops / "experimental").glob("*.py")]
                  if p.name != "__init__.py")


def _module_name(path: Path) -> str:
    relative = path.relative_to(package_dir().parent).with_suffix("")
    return ".".join(relative.parts)


_loaded: dict = {}


def load_ops(redirect: bool = True) -> dict:
    """{short name: module} of liger's CUDA op modules, e.g. ``ops["rms_norm"]``."""
    if redirect not in _loaded:
        with fresh_package(PACKAGE), (redirect_triton() if redirect else contextlib.nullcontext()):
            _loaded[redirect] = {
                path.stem if path.parent.name == "ops" else f"{path.parent.name}.{path.stem}":
                importlib.import_module(_module_name(path)) for path in op_files()}
    return _loaded[redirect]


def _launched_and_called_names() -> tuple[set[str], set[str]]:
    """Names subscripted and called in liger's op sources (``kernel[grid](...)``), and
    names used inside functions decorated with ``jit`` (device functions, combine functions
    of ``tl.reduce``)."""
    launched, called = set(), set()
    for path in op_files():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Subscript):
                target = node.func.value
                if isinstance(target, ast.Name):
                    launched.add(target.id)
                elif isinstance(target, ast.Attribute):
                    launched.add(target.attr)
            elif isinstance(node, ast.FunctionDef) and "jit" in ast.dump(
                    ast.Module(node.decorator_list, [])):
                called |= {name.id for name in ast.walk(node) if isinstance(name, ast.Name)}
    return launched, called


def kernels(ops: dict) -> tuple[dict, dict]:
    """({qualified name: JITFunction} of kernels, {...} of device functions), each defined
    in the op module that owns it (not the ones it is imported into). A kernel is launched
    from host code, or called from no other ``@jit`` function."""
    launched, called = _launched_and_called_names()
    found_kernels, device_functions = {}, {}
    for module in ops.values():
        for name, value in vars(module).items():
            function = value.jit_function if isinstance(value, (Autotuner, Heuristics)) \
                else value
            if not isinstance(function, JITFunction) \
                    or function.fn.__module__ != module.__name__:
                continue
            qualified = f"{module.__name__.split('.', 2)[-1]}.{name}"
            is_kernel = name in launched or name not in called
            (found_kernels if is_kernel else device_functions)[qualified] = function
    return found_kernels, device_functions


CASE_GROUPS = ("norms", "losses", "rl", "attention", "matmul")


def cases() -> list:
    found = []
    for group in CASE_GROUPS:
        found += importlib.import_module(f"{__package__}.liger_cases_{group}").CASES
    return found


def run_cases(ops) -> dict:
    """{case name: (outputs, launches)}: each case's own host code run on CPU tensors (the
    interpreter, AOTK_INTERPRET=1 for the duration) with its launches recorded; an exception
    in place of the outputs where the host code or the interpreter failed."""
    import aotk
    results = {}
    with interpreting():
        for case in cases():
            with aotk.record_launches() as launches:
                try:
                    outputs = case.run(ops, case.make_inputs("cpu", False))
                except Exception as exc:   # noqa: BLE001 - reported by the caller
                    outputs = exc
            results[case.name] = (outputs, list(launches))
    return results
