"""Installed copies of the repository's ``templates/`` and ``runtime/`` (see pyproject).

From a source tree the top-level folders are used directly; ``resource_dir`` hides which.
"""
from __future__ import annotations

import importlib.resources
from pathlib import Path


def resource_dir(name: str) -> Path:
    in_tree = Path(__file__).resolve().parents[2] / name
    if in_tree.is_dir():
        return in_tree
    return Path(str(importlib.resources.files(f"aotk.data.{name}")))
