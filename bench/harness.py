"""Pure benchmark bookkeeping, no GPU needed: the result schema, ratios, the markdown table,
the results file name, and the JSON-plus-table report every bench script writes. ``bench/run.py`` fills it; tests check it on recorded samples.

A result document::

    {"schema": 1, "date": "2026-11-22", "environment": {...}, "kernels": [row, ...],
     "launch": {...} | null, "build": {...}, "skipped": [reason, ...]}

A kernel row: ``{"kernel", "impl" ("aotk" | "triton" | "torch"), "ms", "metric", "value"}``
where metric is "GB/s" or "TFLOP/s".
"""
from __future__ import annotations

import json
import pathlib
import re

SCHEMA_VERSION = 1
IMPLEMENTATIONS = ("aotk", "triton", "torch")
_REQUIRED = {"schema", "date", "environment", "kernels", "launch", "build", "skipped"}
_ROW_KEYS = {"kernel", "impl", "ms", "metric", "value"}


def kernel_row(kernel: str, impl: str, ms: float, metric: str, amount: float) -> dict:
    """``amount`` is bytes moved (GB/s) or flops (TFLOP/s) per call."""
    if impl not in IMPLEMENTATIONS:
        raise ValueError(f"unknown implementation {impl!r}")
    if ms <= 0:
        raise ValueError(f"{kernel}/{impl}: time must be positive, got {ms}")
    scale = 1e6 if metric == "GB/s" else 1e9
    return {"kernel": kernel, "impl": impl, "ms": ms, "metric": metric,
            "value": amount / ms / scale}


def ratios(rows: list) -> dict:
    """{kernel: {"vs_triton": x, "vs_torch": y}}: aotk's speed over each (>1 = aotk faster)."""
    by_key = {(r["kernel"], r["impl"]): r for r in rows}
    out = {}
    for (kernel, impl), row in by_key.items():
        if impl != "aotk":
            continue
        entry = {}
        for other in ("triton", "torch"):
            if (kernel, other) in by_key:
                entry[f"vs_{other}"] = by_key[(kernel, other)]["ms"] / row["ms"]
        out[kernel] = entry
    return out


def validate(document: dict) -> None:
    missing = _REQUIRED - set(document)
    if missing:
        raise ValueError(f"result lacks {sorted(missing)}")
    if document["schema"] != SCHEMA_VERSION:
        raise ValueError(f"schema {document['schema']} is not {SCHEMA_VERSION}")
    for row in document["kernels"]:
        if set(row) != _ROW_KEYS:
            raise ValueError(f"kernel row has keys {sorted(row)}, expected {sorted(_ROW_KEYS)}")


def _format(value, digits=3) -> str:
    return "" if value is None else f"{value:.{digits}f}"


def markdown(document: dict) -> str:
    validate(document)
    env = document["environment"]
    lines = [f"# aotk benchmark, {document['date']}", "",
             f"GPU: {env.get('gpu', 'none')}; driver: {env.get('driver', 'none')}; "
             f"aotk {env.get('aotk')}, triton {env.get('triton', '-')}, torch {env.get('torch', '-')}", ""]
    if document["kernels"]:
        lines += ["| kernel | aotk ms | triton ms | torch ms | metric | aotk | aotk/triton | aotk/torch |",
                  "|---|---|---|---|---|---|---|---|"]
        by_key = {(r["kernel"], r["impl"]): r for r in document["kernels"]}
        kernels = list(dict.fromkeys(r["kernel"] for r in document["kernels"]))
        ratio = ratios(document["kernels"])
        for kernel in kernels:
            cells = [by_key.get((kernel, impl)) for impl in IMPLEMENTATIONS]
            aotk = cells[0]
            lines.append("| " + " | ".join([
                kernel, *(_format(c["ms"]) if c else "" for c in cells),
                aotk["metric"] if aotk else "", _format(aotk["value"], 1) if aotk else "",
                _format(ratio.get(kernel, {}).get("vs_triton")) + ("x" if ratio.get(kernel, {}).get("vs_triton") else ""),
                _format(ratio.get(kernel, {}).get("vs_torch")) + ("x" if ratio.get(kernel, {}).get("vs_torch") else ""),
            ]) + " |")
        lines.append("")
    launch = document["launch"]
    if launch:
        lines += ["| launch path | us per call |", "|---|---|"]
        lines += [f"| {name} | {_format(value, 2)} |" for name, value in launch.items()
                  if name.endswith("_us")]
        if "c_ratio" in launch:
            lines.append(f"| C dispatch / raw cuLaunchKernel | {_format(launch['c_ratio'])}x |")
        for name, label in (("jit_ratio_add", "Triton JIT / aotk JIT, 4 arguments"),
                            ("jit_ratio_31_arguments", "Triton JIT / aotk JIT, 31 arguments")):
            if name in launch:
                lines.append(f"| {label} | {_format(launch[name])}x |")
        lines.append("")
    build = document["build"]
    if build:
        lines += ["| build | value |", "|---|---|"]
        lines += [f"| {name} | {value if isinstance(value, int) else _format(value, 3)} |"
                  for name, value in build.items() if isinstance(value, (int, float))]
        lines.append("")
    for reason in document["skipped"]:
        lines.append(f"- skipped: {reason}")
    return "\n".join(lines).rstrip() + "\n"


def result_stem(document: dict) -> str:
    """``2026-11-22_nvidia-h200_drv580.159.04_aotk0.1.0``: date, GPU, driver, versions."""
    env = document["environment"]
    parts = [document["date"], env.get("gpu") or "nogpu", f"drv{env.get('driver') or 'none'}",
             f"aotk{env.get('aotk')}"]
    if env.get("triton"):
        parts.append(f"triton{env['triton']}")
    return "_".join(re.sub(r"[^A-Za-z0-9.-]+", "-", p).strip("-").lower() for p in parts)


def write_report(out, name: str, document: dict, table: str) -> None:
    """``document`` as ``out/<name>.json`` and ``table`` (its markdown) as
    ``out/<name>.md``, the folder made where missing; the table printed as well."""
    out = pathlib.Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.json").write_text(json.dumps(document, indent=1))
    (out / f"{name}.md").write_text(table)
    print(table)
