"""Installed copies of the repository's ``templates/`` and ``runtime/`` (see pyproject).

From a source tree (or an editable install) the top-level folders are used directly; an
installed wheel carries them as ``aotk/data/templates`` and ``aotk/data/runtime``.
"""
from __future__ import annotations

from pathlib import Path


def resource_dir(name: str) -> Path:
    in_tree = Path(__file__).resolve().parents[2] / name
    if in_tree.is_dir():
        return in_tree
    return Path(__file__).resolve().parent / name
