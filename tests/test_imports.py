"""Import layering: no cycle runs through the JIT, the frontend, the launch package, the
compiler or the build system, counting imports inside functions too."""
import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent
# Packages and modules; "aotk" is the package's __init__ alone.
LAYERED = ("aotk", "aotk.jit", "aotk.frontend", "aotk.launch", "aotk.compiler", "aotk.cache",
           "aotk.options", "aotk.version", "aotk.ir.signature", "aotk.buildsys")


def _modules() -> dict:
    modules = {}
    for path in (ROOT / "aotk").rglob("*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def _imports(name: str, path: pathlib.Path, modules: dict) -> set:
    """The aotk modules ``name`` imports anywhere in its file. ``from X import y`` is an
    import of the submodule X.y where there is one, else of X."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name in modules)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package
                for _ in range(node.level - 1):
                    base = base.rpartition(".")[0]
                target = f"{base}.{node.module}" if node.module else base
            else:
                target = node.module or ""
            for alias in node.names:
                submodule = f"{target}.{alias.name}"
                if submodule in modules:
                    found.add(submodule)
                elif target in modules:
                    found.add(target)
    found.discard(name)
    return found


def _on_a_cycle(start: str, graph: dict) -> list:
    """A path of imports from ``start`` back to itself, or []."""
    stack, seen = [(start, [start])], set()
    while stack:
        module, path = stack.pop()
        for imported in graph[module]:
            if imported == start:
                return path + [start]
            if imported not in seen:
                seen.add(imported)
                stack.append((imported, path + [imported]))
    return []


def test_no_import_cycle_through_the_jit_frontend_launch_compiler_or_build():
    modules = _modules()
    graph = {name: _imports(name, path, modules) for name, path in modules.items()}
    layered = [m for m in modules if m in LAYERED
               or any(m.startswith(p + ".") for p in LAYERED if p != "aotk")]
    assert "aotk.launch.device" in layered and "aotk.frontend.codegen" in layered
    cycles = [" -> ".join(cycle) for m in sorted(layered) if (cycle := _on_a_cycle(m, graph))]
    assert cycles == []


def test_the_frontend_does_not_import_the_jit_or_the_launchers():
    modules = _modules()
    for name, path in modules.items():
        if name.startswith("aotk.frontend"):
            imported = _imports(name, path, modules)
            assert not {m for m in imported if m == "aotk.jit" or m.startswith("aotk.launch")}, name
