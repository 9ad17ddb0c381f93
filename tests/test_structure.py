"""The shape of the code: no import cycles under aotk/, and no module reading another
module's private names. Both are read from the sources (imports inside functions count), so
a new circle or reach-in fails here before review has to find it."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).parent.parent / "aotk"


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _resolve(module: str, node: ast.ImportFrom) -> str:
    """The absolute module an ``from ... import`` names."""
    if not node.level:
        return node.module or ""
    package = module.split(".")
    if not MODULES[module].name == "__init__.py":
        package = package[:-1]
    base = package[:len(package) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def _imports(module: str) -> list:
    """(imported aotk module, names taken from it) for every import in ``module``."""
    tree = ast.parse(MODULES[module].read_text())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, []) for alias in node.names if alias.name in MODULES]
        elif isinstance(node, ast.ImportFrom):
            source = _resolve(module, node)
            for alias in node.names:
                submodule = f"{source}.{alias.name}"
                if submodule in MODULES:
                    found.append((submodule, []))
                elif source in MODULES:
                    found.append((source, [alias.name]))
    return found


def _graph() -> dict:
    return {module: {target for target, _ in _imports(module) if target != module}
            for module in MODULES}


def _cycles(graph: dict) -> list:
    """Strongly connected components of more than one module (Tarjan's algorithm)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in graph:
        if node not in index:
            visit(node)
    return found


def test_no_import_cycles_under_aotk():
    assert _cycles(_graph()) == []


def test_the_cycle_check_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def _private_reads(module: str) -> list:
    """``from aotk.x import _name`` and ``x._name`` where ``x`` is an imported aotk module."""
    reads = [f"{module}: from {source} import {name}" for source, names in _imports(module)
             for name in names if name.startswith("_") and not name.startswith("__")]
    tree = ast.parse(MODULES[module].read_text())
    aliases = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            source = _resolve(module, node)
            for alias in node.names:
                if f"{source}.{alias.name}" in MODULES:
                    aliases[alias.asname or alias.name] = f"{source}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in MODULES and alias.asname:
                    aliases[alias.asname] = alias.name
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and \
                node.value.id in aliases and node.attr.startswith("_") and \
                not node.attr.startswith("__"):
            reads.append(f"{module}: {node.value.id}.{node.attr}")
    return reads


def test_no_module_reads_another_modules_private_names():
    assert [read for module in MODULES for read in _private_reads(module)] == []


# The op families (docs/architecture.md). Descriptor ops never reach the backend:
# passes/descriptors.py rewrites them into loads and stores, or TMA copies (backend/tma.py).
FAMILIES = ("creation", "elementwise", "math", "views", "memory", "reduce", "scan", "combine", "dot",
            "atomics", "descriptors", "debug", "control", "sort", "gather", "histogram",
            "inline_asm", "map_elementwise")


def test_each_op_family_has_one_file_name_in_every_layer():
    for family in FAMILIES:
        assert (PACKAGE / "semantic" / f"{family}.py").is_file(), family
        assert (PACKAGE / "interpreter" / f"{family}.py").is_file(), family
        if family != "descriptors":
            assert (PACKAGE / "backend" / f"{family}.py").is_file(), family


def test_an_op_is_run_and_lowered_by_files_of_the_same_family():
    from aotk import backend, interpreter   # noqa: F401  (the families register on import)
    from aotk.backend import lower  # noqa: F401
    from aotk.backend.registry import OP_LOWERINGS, VALUE_LOWERINGS
    from aotk.interpreter.executor import OP_RULES
    lowerings = {**VALUE_LOWERINGS, **OP_LOWERINGS}
    family_of = {opcode: rule.__module__.rsplit(".", 1)[1] for opcode, rule in OP_RULES.items()}
    mismatched = {opcode: (family, lowerings[opcode].__module__.rsplit(".", 1)[1])
                  for opcode, family in family_of.items() if opcode in lowerings and
                  lowerings[opcode].__module__.rsplit(".", 1)[1] != family}
    assert mismatched == {}
    assert set(family_of.values()) <= set(FAMILIES)


def _fresh_interpreter(code: str):
    import subprocess
    import sys
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            cwd=PACKAGE.parent)
    assert result.returncode == 0, result.stderr


def test_import_aotk_alone_loads_no_compiler():
    """`import aotk` is cheap (the no-op build's path); its names load on first use."""
    _fresh_interpreter(
        "import sys, aotk\n"
        "heavy = [m for m in ('numpy', 'llvmlite', 'aotk.jit', 'aotk.semantic') "
        "if m in sys.modules]\n"
        "assert not heavy, heavy\n"
        "assert callable(aotk.jit) and callable(aotk.compile) and aotk.language.arange\n"
        "assert 'jit' in dir(aotk)\n")





@pytest.mark.parametrize("entry", ["aotk.jit", "aotk.autotune", "aotk.semantic",
                                   "aotk.frontend.codegen", "aotk.buildsys.builder",
                                   "aotk.interpreter", "aotk.compiler", "aotk.language"])
def test_every_entry_module_imports_first_and_aotk_jit_stays_the_decorator(entry):
    """A program may import any module first (the import order of aotk/__init__ no longer
    hides a cycle); the submodules aotk.jit and aotk.autotune never replace the decorators
    of the same names."""
    _fresh_interpreter(f"import sys, {entry}\nimport aotk.jit, aotk.autotune\nimport aotk\n"
                       "from aotk.jit import JITFunction\n"
                       "assert callable(aotk.jit) and not isinstance(aotk.jit, type(sys))\n"
                       "assert callable(aotk.autotune) "
                       "and not isinstance(aotk.autotune, type(sys))\n")
