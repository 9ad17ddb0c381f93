"""``aotk inspect``: what every variant compiled to, as rows of a table.

In: a built ``lib<name>.so`` (read through ``<name>_info()``) or a manifest (built first,
from the cache when nothing changed). Out: rows of kernel, variant, target, registers,
spills, shared memory and vector width. The target is the arch of the cubin in the fatbin:
``sm_90a`` where a kernel built for sm_90 uses Hopper-only instructions (wgmma).
"""
from __future__ import annotations

from pathlib import Path

COLUMNS = ("kernel", "variant", "target", "registers", "spills", "shared", "vector")


def inspect_rows(path) -> list:
    path = Path(path)
    if path.suffix == ".toml":
        from .builder import build
        path = build(path).library
    from ..launch.library import load
    info = load(path).info
    rows = []
    for kernel, description in info["kernels"].items():
        for entry in description["builds"]:
            for target, facts in sorted(entry["targets"].items()):
                widths = facts.get("vector_widths") or [1]
                rows.append((kernel, entry["variant"], facts.get("arch", target),
                             str(facts.get("registers")),
                             str(facts.get("spills")), str(entry["shared"]),
                             "x".join(map(str, widths))))
    return rows


def render(rows) -> str:
    widths = [max(len(c), *(len(r[i]) for r in rows)) if rows else len(c)
              for i, c in enumerate(COLUMNS)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(COLUMNS, widths))]
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths)) for row in rows]
    return "\n".join(lines)
