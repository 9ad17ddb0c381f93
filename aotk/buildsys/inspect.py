"""``aotk inspect``: what every variant compiled to, as rows of a table.

In: a built ``lib<name>.so`` (read through ``<name>_info()``) or a manifest (built first,
from the cache when nothing changed). Out: rows of kernel, variant, target, registers,
spills, shared memory and vector width. The target is the arch of the cubin in the fatbin:
``sm_90a`` where a kernel built for sm_90 uses Hopper-only instructions (wgmma); ``ptx`` the
arch of the PTX ptxas assembled it from: an older target's where the IR was the same
(``compiler.shares_ptx``).
With ``against_triton`` (a manifest only: Triton needs the sources), two more columns give
the registers and spill bytes of Triton's build of the same kernel and configuration
(``triton_side``), and notes say why a row has none.
"""
from __future__ import annotations

from pathlib import Path

COLUMNS = ("kernel", "variant", "target", "ptx", "registers", "spills", "shared", "vector")
TRITON_COLUMNS = ("triton registers", "triton spills")
TUNED_COLUMN = "tuned fastest at"


def inspect_rows(path, against_triton: bool = False) -> tuple:
    """(rows, notes): a row per variant and target; notes say why a Triton column is empty."""
    path = Path(path)
    manifest_path = path if path.suffix == ".toml" else None
    if against_triton and manifest_path is None:
        raise ValueError("--triton needs the manifest (Triton compiles the kernel sources), "
                         "not a built library")
    if manifest_path is not None:
        from .builder import build
        path = build(manifest_path).library
    from ..launch.library import load
    info = load(path).info
    builds = _builds_by_variant(manifest_path) if against_triton else {}
    rows, notes = [], {}
    tuned = any("tuned" in entry for description in info["kernels"].values()
                for entry in description["builds"])
    for kernel, description in info["kernels"].items():
        for entry in description["builds"]:
            for target, facts in sorted(entry["targets"].items(), key=lambda t: int(t[0][3:])):
                widths = facts.get("vector_widths") or [1]
                arch = facts.get("arch", target)
                row = (kernel, entry["variant"], arch, facts.get("ptx_arch", arch),
                       str(facts.get("registers")), str(facts.get("spills")),
                       str(facts.get("shared", entry["shared"])), "x".join(map(str, widths)))
                if against_triton:
                    row += _triton_columns(builds[(kernel, entry["variant"])], target, notes)
                if tuned:
                    row += (_tuned_column(entry.get("tuned", []), target),)
                rows.append(row)
    return rows, sorted(notes.items())


def _tuned_column(measured: list, target: str) -> str:
    """The tuned points (of this target) where the variant's config was measured fastest."""
    return "; ".join(", ".join(f"{k}={v}" for k, v in m["point"].items())
                     + (f": {m['ms']:.4g} ms" if m["ms"] is not None else "")
                     for m in measured if m["arch"] == target) or "-"


def _builds_by_variant(manifest_path) -> dict:
    from .manifest import load_manifest
    from .plan import plan_builds
    return {(plan.kernel.name, build.description): (plan, build)
            for plan in plan_builds(load_manifest(manifest_path)) for build in plan.builds}


def _triton_columns(plan_and_build, target: str, notes: dict) -> tuple:
    from .triton_side import TritonSideError, load_triton_function, triton_resources
    plan, build = plan_and_build
    try:
        function = load_triton_function(plan.kernel.source, plan.kernel.function)
        numbers = triton_resources(function, build.signature, build.constants,
                                   build.variant.num_warps, build.variant.num_stages, target)
    except TritonSideError as exc:
        notes[plan.kernel.name] = str(exc)
        return ("-", "-")
    return (str(numbers["registers"]), str(numbers["spills"]))


def render(rows, notes=(), against_triton: bool = False) -> str:
    columns = COLUMNS + (TRITON_COLUMNS if against_triton else ())
    if rows and len(rows[0]) > len(columns):
        columns += (TUNED_COLUMN,)
    widths = [max(len(c), *(len(r[i]) for r in rows)) if rows else len(c)
              for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths))]
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths)) for row in rows]
    lines += [f"{kernel}: no Triton number: {why}" for kernel, why in notes]
    return "\n".join(lines)
