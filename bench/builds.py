"""The build figures of issue "builds at scale", in one run on one machine, one report.

    PYTHONPATH=. python3 bench/builds.py [--variants 2000] [--jobs 1 4 16] [--out DIR]

- cold compile of one (kernel configuration, target), aotk against Triton
  (bench/compile_speed.py: each side in its own process, median of 3);
- the root manifest: cold build with one job and with all, a no-op build (median of 5);
- generated manifests of --variants variants (bench/scale.py: shared and distinct
  specializations): plan time, peak memory, cold build time and .so size per job count,
  the speed-up over one job;
- a build on a machine whose local cache is empty but whose shared cache (a file:// URL,
  as a CI farm's disk or bucket would be) holds every entry another machine compiled.
No GPU needed. Writes builds.json and builds.md under --out and prints the table.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from bench.harness import write_report  # noqa: E402

import scale  # noqa: E402


def _build(out, cache, jobs=None, cache_url=None) -> float:
    command = [sys.executable, "-m", "aotk", "build", str(ROOT / "aotk.toml"), "-o", str(out)]
    if jobs:
        command += ["-j", str(jobs)]
    if cache_url:
        command += ["--cache-url", cache_url]
    start = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True,
                   env={**os.environ, "AOTK_CACHE_DIR": str(cache), "PYTHONPATH": str(ROOT)})
    return time.perf_counter() - start


def root_manifest(work: pathlib.Path) -> dict:
    cores = os.cpu_count() or 1
    figures = {"cold_one_job_s": _build(work / "one", work / "cache-one", 1),
               "cold_all_jobs_s": _build(work / "all", work / "cache-all", cores)}
    figures["noop_s"] = statistics.median(_build(work / "all", work / "cache-all", cores)
                                          for _ in range(5))
    # Another machine: its own empty local cache, the shared cache the first one filled.
    shared = f"file://{work / 'shared'}"
    _build(work / "filler", work / "cache-filler", cores, shared)
    figures["warm_from_shared_cache_s"] = _build(work / "second", work / "cache-second",
                                                 cores, shared)
    return figures


def compile_speed(work: pathlib.Path) -> dict:
    subprocess.run([sys.executable, str(ROOT / "bench" / "compile_speed.py"), "--out",
                    str(work / "compile")], check=True, capture_output=True,
                   env={**os.environ, "PYTHONPATH": str(ROOT)})
    return json.loads((work / "compile" / "compile_speed.json").read_text())


def at_scale(work: pathlib.Path, variants: int, jobs: list) -> list:
    rows = []
    for case in ("shared", "distinct"):
        text = scale.shared_manifest(variants) if case == "shared" else \
            scale.distinct_manifest(variants)
        manifest = scale.write_project(work / case, text)
        plan_s = scale._plan_seconds(manifest)
        for count in jobs:
            rows.append({"case": case, "variants": variants, "plan_s": plan_s,
                         **scale._cold_build(manifest, count, work / case)})
    for row in rows:
        one = next(r for r in rows if r["case"] == row["case"] and r["jobs"] == min(jobs))
        row["speedup"] = one["seconds"] / row["seconds"]
    return rows


def markdown(document: dict) -> str:
    speed = document["compile"]
    lines = [f"# aotk builds, {document['machine']}, {document['date']}", "",
             "## Cold compile of one kernel configuration (sm_90), aotk / Triton "
             f"{speed['triton']}", "",
             "| kernel | aotk ms | of it ptxas ms | Triton ms | ratio |", "|---|---|---|---|---|"]
    for r in speed["rows"]:
        lines.append(f"| {r['kernel']} | {r['aotk_s'] * 1e3:.1f} | {r['aotk_ptxas_s'] * 1e3:.1f} "
                     f"| {r['triton_s'] * 1e3:.1f} | {r['aotk_s'] / r['triton_s']:.2f} |")
    lines += [f"| all | | | | {speed['ratio_total']:.2f} |", "",
              "## The root manifest", "", "| figure | seconds |", "|---|---|"]
    lines += [f"| {k} | {v:.3f} |" for k, v in document["root"].items()]
    lines += ["", f"## Generated manifests of {document['scale'][0]['variants']} variants", "",
              "| case | plan s | jobs | cold build s | speed-up | peak MiB | .so bytes |",
              "|---|---|---|---|---|---|---|"]
    for r in document["scale"]:
        lines.append(f"| {r['case']} | {r['plan_s']:.2f} | {r['jobs']} | {r['seconds']:.1f} | "
                     f"{r['speedup']:.2f}x | {r['peak_mib']:.0f} | {r['so_bytes']:,} |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variants", type=int, default=2000)
    parser.add_argument("--jobs", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--out", default=str(ROOT / "bench" / "results"))
    args = parser.parse_args(argv)
    work = pathlib.Path(tempfile.mkdtemp(prefix="aotk-builds-"))
    document = {"machine": f"{platform.machine()}, {os.cpu_count()} cores",
                "date": time.strftime("%Y-%m-%d"),
                "compile": compile_speed(work), "root": root_manifest(work),
                "scale": at_scale(work, args.variants, args.jobs)}
    for row in document["scale"]:
        row.pop("library", None)
    write_report(args.out, "builds", document, markdown(document))


if __name__ == "__main__":
    main()
