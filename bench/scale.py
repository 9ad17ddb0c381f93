"""Builds at scale: generated manifests of thousands of variants, built cold at several job
counts, with plan time, peak memory, total time and library size; the dispatch checked.

    PYTHONPATH=. python3 bench/scale.py [--variants 2000] [--jobs 1 4 16] [--out DIR]

Two manifests of ``--variants`` variants over one kernel source (a scaled add):
- shared: kernels of 8 variants each whose `when` ranges split n, 8 distinct
  specializations in all (what the library compiles and embeds once each);
- distinct: every variant its own specialization (a SCALE constexpr per variant).
Each is built cold (a fresh cache) by `aotk build -j J` in a child process; peak memory is
the child's (ru_maxrss). The plan (manifest read, kernels loaded and checked, builds laid
out) is timed in this process. After each shared build, `NAME_KERNEL_select` of a sample of
kernels and sizes must name the variant whose range holds n. Writes scale.json and scale.md.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.harness import write_report  # noqa: E402

KERNEL = '''import aotk
import aotk.language as tl


@aotk.jit
def scaled_add(x_ptr, y_ptr, out_ptr, n, SCALE: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x * SCALE + tl.load(y_ptr + offs, mask=mask), mask=mask)
'''
BLOCKS = (64, 128, 256, 512, 1024, 2048, 4096, 8192)
RANGE = 1 << 14   # the n each variant of a shared kernel covers


def _header(name: str) -> str:
    return f'[library]\nname = "{name}"\ntargets = ["sm_80"]\n'


def _kernel(name: str) -> str:
    return (f'\n[[kernel]]\nname = "{name}"\nsource = "scaled_add.py"\n'
            'function = "scaled_add"\nsignature = "*fp32, *fp32, *fp32, i32"\n'
            'grid = ["cdiv(n, BLOCK)"]\nspecialize = "none"\n')


def shared_manifest(variants: int) -> str:
    """variants / 8 kernels; variant v of each covers n in [v * RANGE, (v + 1) * RANGE)
    with BLOCK = BLOCKS[v]: 8 specializations whatever the count."""
    text = _header("shared")
    for k in range(variants // len(BLOCKS)):
        text += _kernel(f"add{k}")
        for v, block in enumerate(BLOCKS):
            text += (f'\n[[kernel.variant]]\nwhen = "n >= {v * RANGE} && n < {(v + 1) * RANGE}"'
                     f'\nconstants = {{ SCALE = 2, BLOCK = {block} }}\n')
    return text


def expected_variant(kernel: int, n: int):
    """The variant name the shared library's dispatch must give for n (None: none holds)."""
    v = n // RANGE
    return f"add{kernel}[SCALE=2, BLOCK={BLOCKS[v]}]" if 0 <= v < len(BLOCKS) else None


def distinct_manifest(variants: int) -> str:
    """One kernel of ``variants`` variants, each its own specialization (SCALE = v + 1)."""
    text = _header("distinct") + _kernel("add")
    for v in range(variants):
        text += (f'\n[[kernel.variant]]\nwhen = "n == {v}"\n'
                 f'constants = {{ SCALE = {v + 1}, BLOCK = 256 }}\n')
    return text


def write_project(folder: pathlib.Path, manifest: str) -> pathlib.Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "scaled_add.py").write_text(KERNEL)
    (folder / "aotk.toml").write_text(manifest)
    return folder / "aotk.toml"


def _plan_seconds(manifest: pathlib.Path) -> float:
    from aotk.buildsys.manifest import load_manifest
    from aotk.buildsys.plan import plan_builds
    start = time.perf_counter()
    plan_builds(load_manifest(manifest))
    return time.perf_counter() - start


def _cold_build(manifest: pathlib.Path, jobs: int, work: pathlib.Path) -> dict:
    cache, out, log = work / f"cache-{jobs}", work / f"out-{jobs}", work / f"build-{jobs}.log"
    start = time.perf_counter()
    with open(log, "w") as errors:
        child = subprocess.Popen([sys.executable, "-m", "aotk", "build", str(manifest), "-o",
                                  str(out), "-j", str(jobs)], stdout=subprocess.DEVNULL,
                                 stderr=errors, env={**os.environ, "AOTK_CACHE_DIR": str(cache),
                                                     "PYTHONPATH": str(ROOT)})
        # wait4: this build's own usage; its peak covers the compile workers it waited for
        _, status, usage = os.wait4(child.pid, 0)
    seconds = time.perf_counter() - start
    if status != 0:
        raise RuntimeError(f"aotk build -j {jobs} failed: {log.read_text().strip()[-500:]}")
    library = next(out.glob("lib*.so"))
    return {"jobs": jobs, "seconds": seconds, "peak_mib": usage.ru_maxrss / 1024,
            "so_bytes": library.stat().st_size, "library": str(library)}


def check_dispatch(library: str, kernels: int, samples: int = 200) -> int:
    """select() of sampled kernels and sizes names the variant whose range holds n."""
    import random

    import aotk
    lib = aotk.load(library)
    rng = random.Random(7)
    for _ in range(samples):
        k, n = rng.randrange(kernels), rng.randrange(len(BLOCKS) * RANGE + 100)
        got = getattr(lib, f"add{k}").select(0, 0, 0, n)
        if got != expected_variant(k, n):
            raise AssertionError(f"add{k}.select(n={n}) = {got}, expected "
                                 f"{expected_variant(k, n)}")
    return samples


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variants", type=int, default=2000)
    parser.add_argument("--jobs", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--cases", nargs="+", default=["shared", "distinct"])
    parser.add_argument("--out", default=str(ROOT / "bench" / "results"))
    args = parser.parse_args(argv)
    work = pathlib.Path(tempfile.mkdtemp(prefix="aotk-scale-"))
    rows = []
    for case in args.cases:
        text = shared_manifest(args.variants) if case == "shared" else \
            distinct_manifest(args.variants)
        manifest = write_project(work / case, text)
        plan_s = _plan_seconds(manifest)
        for jobs in args.jobs:
            row = {"case": case, "variants": args.variants, "plan_s": plan_s,
                   **_cold_build(manifest, jobs, work / case)}
            if case == "shared":
                row["dispatch_checked"] = check_dispatch(row["library"],
                                                         args.variants // len(BLOCKS))
            rows.append(row)
            print(json.dumps(row), flush=True)
    document = {"machine": f"{platform.node()} ({os.cpu_count()} cores)", "rows": rows}
    write_report(args.out, "scale", document, markdown(document))


def markdown(document) -> str:
    lines = [f"# aotk build at scale, {document['machine']}", "",
             "| case | variants | plan s | jobs | cold build s | peak MiB | .so bytes |",
             "|---|---|---|---|---|---|---|"]
    for r in document["rows"]:
        lines.append(f"| {r['case']} | {r['variants']} | {r['plan_s']:.2f} | {r['jobs']} | "
                     f"{r['seconds']:.1f} | {r['peak_mib']:.0f} | {r['so_bytes']:,} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
