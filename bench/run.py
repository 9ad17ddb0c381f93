"""The benchmark suite, one command:

    PYTHONPATH=. python3 bench/run.py [--out bench/results] [--log2n 28] [--build-only]

1. build time: cold and no-op `aotk build` of the root aotk.toml, seconds per build, and
   (on a GPU with triton) Triton's first-call compile of the same kernel sources;
2. on a GPU: every example kernel through the built library (aotk.load), under Triton's
   JIT (same source, imports swapped) and torch: outputs checked before any time is
   kept, CUDA-event medians with the implementations taking turns (timing.time_interleaved),
   rotated inputs; GB/s and the ratios. The matmuls again from
   the library built for sm_80 only, whose PTX the driver compiles for the GPU: on an
   H100/H200 that is the mma.sync path beside the sm_90a (wgmma) one;
3. on a GPU: launch cost, C dispatch vs raw cuLaunchKernel, Python lib.add vs Triton.
Writes <stem>.json and <stem>.md under --out (stem: date, GPU, driver, versions) and
prints the summary table last. Without a GPU only part 1 runs, and the rest is listed
as skipped with the reason.
"""
from __future__ import annotations

import argparse
import ctypes
import datetime
import importlib.util
import json
import os
import pathlib
import platform
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import harness  # noqa: E402
from timing import KERNELS, ROOT  # noqa: E402


MMA_SYNC_SUFFIX = " [sm_80 build: mma.sync]"


def gpu_present() -> bool:
    try:
        libcuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    count = ctypes.c_int(0)
    return libcuda.cuInit(0) == 0 and libcuda.cuDeviceGetCount(ctypes.byref(count)) == 0 \
        and count.value > 0


def environment(have_gpu: bool) -> dict:
    import aotk
    from aotk.toolchain.ptxas import find_ptxas
    env = {"aotk": aotk.__version__, "python": platform.python_version(),
           "ptxas": find_ptxas().version, "cpus": os.cpu_count()}
    for name in ("triton", "torch", "llvmlite"):
        if importlib.util.find_spec(name):
            env[name] = __import__(name).__version__
    if have_gpu:
        import torch
        env["gpu"] = torch.cuda.get_device_name()
        smi = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True)
        env["driver"] = smi.stdout.strip().splitlines()[0] if smi.returncode == 0 else "unknown"
    return env


def _aotk_build(out: pathlib.Path, cache: pathlib.Path, jobs: int) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "aotk", "build", str(ROOT / "aotk.toml"), "-o", str(out),
                    "-j", str(jobs)], check=True, capture_output=True,
                   env={**os.environ, "AOTK_CACHE_DIR": str(cache), "PYTHONPATH": str(ROOT)})
    return time.perf_counter() - start


def build_times(work: pathlib.Path, have_gpu: bool) -> tuple[dict, pathlib.Path]:
    """Seconds: cold build with all cores and with one, a no-op rebuild, per build."""
    from aotk.buildsys.manifest import load_manifest
    from aotk.buildsys.plan import plan_builds
    manifest = load_manifest(ROOT / "aotk.toml")
    builds = sum(len(p.builds) for p in plan_builds(manifest))
    out = work / "lib"
    figures = {"builds": builds,
               "cold_one_job_s": _aotk_build(work / "lib1", work / "cache1", 1),
               "cold_all_jobs_s": _aotk_build(out, work / "cache", os.cpu_count() or 1),
               "noop_s": _aotk_build(out, work / "cache", os.cpu_count() or 1)}
    figures["per_build_one_job_s"] = figures["cold_one_job_s"] / builds
    if have_gpu and importlib.util.find_spec("triton"):
        import torch
        from workloads import WORKLOADS
        os.environ["TRITON_CACHE_DIR"] = str(work / "triton-cache")
        total = 0.0
        for workload in WORKLOADS:
            module = __import__("timing").triton_port(KERNELS / workload.triton_file)
            inputs = workload.make(torch, 12)
            torch.cuda.synchronize()
            start = time.perf_counter()
            workload.triton(module, inputs)   # first call: Triton compiles for this GPU only
            torch.cuda.synchronize()
            total += time.perf_counter() - start
        figures["triton_first_call_per_kernel_s"] = total / len(WORKLOADS)
    return figures, out / f"lib{manifest.name}.so"


def kernel_rows(library: pathlib.Path, log2n: int, rotations: int = 3, only=None,
                mma_sync_library=None) -> list:
    """Rows for every workload. With ``mma_sync_library`` (the manifest built for sm_80
    only: on sm_90 the driver runs its PTX, so dots take the mma.sync path), the matmul
    workloads are timed a second time, with Triton and torch beside them again, under the
    kernel name suffixed ``MMA_SYNC_SUFFIX``."""
    import torch

    import aotk
    from timing import time_interleaved, triton_port
    from workloads import WORKLOADS
    libraries = [("", aotk.load(library))]
    if mma_sync_library is not None:
        libraries.append((MMA_SYNC_SUFFIX, aotk.load(mma_sync_library)))
    have_triton = importlib.util.find_spec("triton") is not None
    rows = []
    for workload in WORKLOADS:
        if only and not any(workload.kernel.startswith(prefix) for prefix in only):
            continue
        sets = [workload.make(torch, log2n) for _ in range(rotations)]
        module = triton_port(KERNELS / workload.triton_file) if have_triton else None
        for suffix, lib in libraries:
            if suffix and not workload.kernel.startswith("matmul"):
                continue
            ways = {"aotk": lambda a, lib=lib: workload.aotk(lib, a), "torch": workload.torch}
            if module is not None:
                ways["triton"] = lambda a, m=module: workload.triton(m, a)
            present = [impl for impl in harness.IMPLEMENTATIONS if impl in ways]
            for impl in present:
                for inputs in sets:   # correctness before any time is kept
                    inputs["out"].fill_(float("nan"))
                    ways[impl](inputs)
                    torch.cuda.synchronize()
                    torch.testing.assert_close(inputs["out"], workload.expected(inputs),
                                               msg=lambda m: f"{workload.kernel}/{impl}: {m}",
                                               **(workload.tolerance or {}))
            # The implementations take turns (``time_interleaved``), each rotating its sets.
            turn = {impl: iter(range(1 << 62)) for impl in present}
            timed = time_interleaved({impl: lambda impl=impl: ways[impl](
                sets[next(turn[impl]) % rotations]) for impl in present})
            for impl in present:
                rows.append(harness.kernel_row(workload.kernel + suffix, impl, timed[impl],
                                               workload.metric, workload.bytes_moved(sets[0])))
        sets = None   # the inputs of this workload go before the next one's are made
        torch.cuda.empty_cache()
    return rows


def build_mma_sync_library(work: pathlib.Path) -> pathlib.Path:
    """The root manifest built for sm_80 only (see ``kernel_rows``)."""
    from aotk.buildsys.builder import build
    return build(ROOT / "aotk.toml", out_dir=work / "lib-sm80", targets=["sm_80"]).library


def summary(document: dict) -> str:
    return harness.markdown(document)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "bench" / "results"))
    parser.add_argument("--log2n", type=int, default=28)
    parser.add_argument("--build-only", action="store_true")
    parser.add_argument("--kernels", nargs="*", help="only workloads whose name starts so")
    options = parser.parse_args(argv)
    have_gpu = gpu_present() and not options.build_only
    document = {"schema": harness.SCHEMA_VERSION, "date": datetime.date.today().isoformat(),
                "environment": environment(have_gpu), "kernels": [], "launch": None,
                "build": {}, "skipped": []}
    with tempfile.TemporaryDirectory(prefix="aotk-bench-") as work:
        document["build"], library = build_times(pathlib.Path(work), have_gpu)
        if have_gpu:
            mma_sync = build_mma_sync_library(pathlib.Path(work))
            document["kernels"] = kernel_rows(library, options.log2n, only=options.kernels,
                                              mma_sync_library=mma_sync)
            from launch import measure
            document["launch"] = measure(library)
        else:
            reason = "--build-only" if options.build_only else "no CUDA driver or GPU here"
            document["skipped"] += [f"kernel timings ({reason})", f"launch overhead ({reason})"]
    harness.validate(document)
    out = pathlib.Path(options.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = harness.result_stem(document)
    (out / f"{stem}.json").write_text(json.dumps(document, indent=2, sort_keys=True) + "\n")
    (out / f"{stem}.md").write_text(summary(document))
    print(f"wrote {out / stem}.json and .md\n")
    print(summary(document))
    return document


if __name__ == "__main__":
    main()
