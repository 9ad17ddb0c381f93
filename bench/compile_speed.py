"""Cold compile time of one (kernel, configuration, target): aotk against Triton, no GPU.

    PYTHONPATH=. python3 bench/compile_speed.py [--target sm_90] [--out bench/results]
    PYTHONPATH=. python3 bench/compile_speed.py --target sm_80,sm_90   # a library's targets
    PYTHONPATH=. python3 bench/compile_speed.py --runs 1               # one compile a kernel

The example kernels with the root manifest's configurations, compiled from PTX-less start to
cubin by each side: aotk.compile (frontend, passes, LLVM, ptxas) and Triton's
triton.compile (its MLIR passes, LLVM, ptxas; TRITON_ALWAYS_COMPILE=1 and a fresh cache, so
nothing is reused). The Triton side reads the same source files with the imports changed
to triton. Each side runs in its own process (as a build worker would: the other compiler is
not imported), compiles one kernel first to warm up, then takes the median of 3 fresh
compiles per kernel (``--runs``). Each side's ptxas share is shown apart (Triton's: its ptxas
subprocesses timed): ptxas is the floor both sides pay.
With several targets, each side compiles each configuration for every target, as a library
build does (aotk's newer targets take the oldest's PTX where the IR is the same:
compiler.shares_ptx; Triton compiles each target whole), and the times are per (kernel,
target): the total over the targets divided by their number.
Writes compile_speed.json and compile_speed.md under --out and prints the table.
"""
from __future__ import annotations

import argparse
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

ROOT = pathlib.Path(__file__).resolve().parent.parent

# (file, function, signature, constants, num_warps): the configurations of aotk.toml.
CASES = [
    ("add.py", "add_kernel", "*fp32:16, *fp32:16, *fp32:16, i32:16", {"BLOCK": 1024}, 4),
    ("softmax.py", "softmax_kernel", "*fp32:16, *fp32:16, i32:16, i32:16, i32, i32",
     {"BLOCK": 1024}, 4),
    ("layer_norm.py", "layer_norm_fwd_kernel",
     "*fp16:16, *fp16:16, *fp16:16, *fp16:16, *fp32:16, *fp32:16, i32:16, i32, i32:16, fp32",
     {"BLOCK_SIZE": 1024}, 4),
    ("row_argmax.py", "row_argmax_kernel", "*i32:16, *fp32:16, i32:16, i32, i32",
     {"BLOCK": 1024}, 4),
    ("transpose.py", "transpose_kernel", "*fp32:16, *fp32:16, i32:16, i32:16",
     {"BLOCK_M": 32, "BLOCK_N": 32}, 4),
    ("matmul.py", "matmul_kernel", "*fp16:16, *fp16:16, *fp16:16, i32:16, i32:16, i32:16, "
     "i32:16, i32:1, i32:16, i32:1, i32:16, i32:1",
     dict(BLOCK_SIZE_M=128, BLOCK_SIZE_N=256, BLOCK_SIZE_K=64, GROUP_SIZE_M=8, ACTIVATION=""), 8),
    ("matmul.py", "matmul_kernel", "*fp16, *fp16, *fp16, i32, i32, i32, i32, i32, i32, i32, "
     "i32, i32",
     dict(BLOCK_SIZE_M=64, BLOCK_SIZE_N=64, BLOCK_SIZE_K=32, GROUP_SIZE_M=8, ACTIVATION=""), 4),
]


def _load(file: str, function: str, as_triton: bool):
    """A fresh copy of the kernel (no memoized compile), for aotk or for Triton."""
    text = (ROOT / "examples" / "kernels" / file).read_text()
    if as_triton:
        text = (text.replace("import aotk.language as tl", "import triton.language as tl")
                .replace("import aotk", "import triton").replace("@aotk.jit", "@triton.jit"))
    path = pathlib.Path(tempfile.mkdtemp(prefix="aotk-bench-")) / file
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(f"{path.stem}_{time.perf_counter_ns()}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, function)


def _side(side: str, targets: list, runs: int = 3) -> list:
    """In this process: [{"seconds", "ptxas_seconds"}] per case, for one side: the median
    of ``runs`` fresh compiles."""
    sys.path.insert(0, str(ROOT))
    import aotk
    from aotk import compiler as aotk_compiler
    from aotk.ir.signature import Signature
    from aotk.toolchain import ptxas
    spent = {"ptxas": 0.0}
    assemble = ptxas.assemble

    def timed_assemble(*args, **kwargs):
        start = time.perf_counter()
        try:
            return assemble(*args, **kwargs)
        finally:
            spent["ptxas"] += time.perf_counter() - start
    ptxas.assemble = timed_assemble
    if side == "triton":
        # Triton runs ptxas as a subprocess (its backend's make_cubin): time those runs.
        run = subprocess.run

        def timed_run(command, *args, **kwargs):
            is_ptxas = isinstance(command, (list, tuple)) and command and \
                os.path.basename(str(command[0])).startswith("ptxas") and \
                "--version" not in command
            start = time.perf_counter()
            try:
                return run(command, *args, **kwargs)
            finally:
                if is_ptxas:
                    spent["ptxas"] += time.perf_counter() - start
        subprocess.run = timed_run

    def compile_once(case) -> tuple:
        file, function, signature, constants, num_warps = case
        spent["ptxas"] = 0.0
        if side == "aotk":
            kernel = _load(file, function, False)
            aotk_compiler.forget_machine_code()   # a cold compile: LLVM and ptxas run
            start = time.perf_counter()
            oldest = None
            for target in targets:   # oldest first, as compile_builds
                compiled = aotk.compile(kernel, signature, constants=constants,
                                        num_warps=num_warps, target=target, older=oldest)
                oldest = oldest or compiled
        else:
            from aotk.buildsys.triton_side import triton_compile
            kernel = _load(file, function, True)
            parsed = Signature.parse(signature, _load(file, function, False).runtime_names)
            start = time.perf_counter()
            for target in targets:
                triton_compile(kernel, parsed, constants, num_warps, 3, target)
        return ((time.perf_counter() - start) / len(targets), spent["ptxas"] / len(targets))

    compile_once(CASES[0])   # imports, LLVM and MLIR initialization, libdevice
    rows = []
    for case in CASES:
        times = sorted(compile_once(case) for _ in range(runs))
        rows.append({"seconds": times[runs // 2][0], "ptxas_seconds": times[runs // 2][1]})
    return rows


def main(argv=None):
    sys.path.insert(0, str(ROOT))
    from bench.harness import write_report
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="sm_90",
                        help="a target, or several separated by commas (a library's)")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results"))
    parser.add_argument("--runs", type=int, default=3,
                        help="fresh compiles per kernel and side, the median kept (default 3)")
    parser.add_argument("--side", choices=["aotk", "triton"], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    from aotk.targets import capability
    targets = sorted(args.target.split(","), key=capability)
    if args.side:
        print(json.dumps(_side(args.side, targets, args.runs)))
        return
    env = {**os.environ, "TRITON_ALWAYS_COMPILE": "1",
           "TRITON_CACHE_DIR": tempfile.mkdtemp(prefix="aotk-bench-triton-"),
           "AOTK_CACHE_DIR": tempfile.mkdtemp(prefix="aotk-bench-cache-")}
    results = {}
    for side in ("aotk", "triton"):
        run = subprocess.run([sys.executable, __file__, "--side", side, "--target",
                              ",".join(targets), "--runs", str(args.runs)],
                             capture_output=True, text=True, env=env, check=True)
        results[side] = json.loads(run.stdout.strip().splitlines()[-1])
    import triton
    rows = []
    for case, ours, theirs in zip(CASES, results["aotk"], results["triton"]):
        file, function, _, constants, num_warps = case
        rows.append({"kernel": function, "constants": constants, "num_warps": num_warps,
                     "aotk_s": ours["seconds"], "aotk_ptxas_s": ours["ptxas_seconds"],
                     "triton_s": theirs["seconds"], "triton_ptxas_s": theirs["ptxas_seconds"]})
    total_ours = sum(r["aotk_s"] for r in rows)
    total_theirs = sum(r["triton_s"] for r in rows)
    document = {"date": datetime.date.today().isoformat(), "target": ",".join(targets),
                "machine": f"{platform.machine()}, {os.cpu_count()} cores",
                "runs": args.runs, "triton": triton.__version__, "rows": rows,
                "ratio_total": total_ours / total_theirs}
    per = " per target" if len(targets) > 1 else ""
    lines = [f"# Cold compile of one kernel configuration, {document['target']}: aotk vs "
             f"Triton {triton.__version__}", "",
             f"{document['machine']}, no GPU; median of {args.runs} per kernel, each side "
             "in its own process (bench/compile_speed.py). Ratio < 1: aotk faster."
             + (f" Each configuration compiled for {', '.join(targets)}, as a library build "
                "does; times are per (kernel, target)." if per else ""), "",
             f"| kernel | configuration | aotk ms{per} | of it ptxas ms | Triton ms{per} "
             "| of it ptxas ms | aotk / Triton | aotk / Triton without ptxas |",
             "|---|---|---|---|---|---|---|---|"]
    def without_ptxas(row):
        return row["triton_s"] - row["triton_ptxas_s"]
    for r in rows:
        shown = ", ".join(f"{k}={v}" for k, v in r["constants"].items() if v != "")
        lines.append(f"| {r['kernel']} | {shown}, {r['num_warps']} warps | "
                     f"{r['aotk_s'] * 1e3:.1f} | {r['aotk_ptxas_s'] * 1e3:.1f} | "
                     f"{r['triton_s'] * 1e3:.1f} | {r['triton_ptxas_s'] * 1e3:.1f} | "
                     f"{r['aotk_s'] / r['triton_s']:.2f} | "
                     f"{(r['aotk_s'] - r['aotk_ptxas_s']) / without_ptxas(r):.2f} |")
    lines += ["", f"All kernels: aotk {total_ours * 1e3:.0f} ms, Triton {total_theirs * 1e3:.0f} "
              f"ms, ratio {document['ratio_total']:.2f}."]
    write_report(args.out, "compile_speed", document, "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
