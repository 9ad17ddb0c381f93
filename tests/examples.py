"""The example kernels (examples/kernels/*.py) as modules, for the tests that compile or run
them: ``example_module("matmul")``. Each call loads a fresh module from the file."""
import importlib.util
from pathlib import Path

KERNELS = Path(__file__).resolve().parent.parent / "examples" / "kernels"


def example_module(name: str):
    spec = importlib.util.spec_from_file_location(f"example_{name}", KERNELS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
