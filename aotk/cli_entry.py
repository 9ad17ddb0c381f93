"""Finds the command line: the installed ``aotk_cli`` package, or, in a bare source tree
(``PYTHONPATH=.``, as on the GPU machine), the repository's ``cli/`` folder under that name."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path


def import_cli():
    if importlib.util.find_spec("aotk_cli") is None:
        init = Path(__file__).resolve().parents[1] / "cli" / "__init__.py"
        spec = importlib.util.spec_from_file_location("aotk_cli", init,
                                                      submodule_search_locations=[str(init.parent)])
        module = importlib.util.module_from_spec(spec)
        sys.modules["aotk_cli"] = module
        spec.loader.exec_module(module)
    from aotk_cli import main
    return main
