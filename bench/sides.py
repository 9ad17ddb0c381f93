"""A kernel library's ops timed under aotk and under Triton, side by side on one GPU: what
bench/liger.py and bench/fla.py share.

In: callables that run one op under each side, the names of the library's kernels. Out:
the row's times (CUDA-event medians of the whole op, host code included, and the GPU time
of the named kernels alone from the torch profiler), the closing line of the tables, and
the loop that runs every case into a JSON file written after each one.
"""
from __future__ import annotations

import json
import pathlib
import statistics

from bench.timing import time_interleaved, turns


def kernel_gpu_us(fn, kernel_names: set, reps: int = 10) -> dict:
    """Mean GPU time per call of each named kernel (its launches within one call), from
    the torch profiler's CUDA activity."""
    import torch
    from torch.profiler import ProfilerActivity, profile
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            fn()
        torch.cuda.synchronize()
    return {event.key: event.device_time_total / reps for event in prof.key_averages()
            if event.key in kernel_names}


def kernel_gpu_us_in_turns(runs: dict, kernel_names: set, reps: int = 10) -> dict:
    """{side: ``kernel_gpu_us`` of its run}, the sides taking turns one call at a time
    (``timing.turns``) so that a drifting clock favors neither; each call is profiled on
    its own (the two sides' kernels have the same names)."""
    totals = {side: {} for side in runs}
    for order in turns(list(runs), reps):
        for side in order:
            for name, us in kernel_gpu_us(runs[side], kernel_names, reps=1).items():
                totals[side][name] = totals[side].get(name, 0.0) + us / reps
    return totals


def autotuned_choices(modules, kernel_names: set | None = None) -> dict:
    """{kernel: the configuration its autotuner last launched} over the functions of
    ``modules`` (those named in ``kernel_names``, if given): ``best_config`` of Triton's
    Autotuner and of aotk's, found through ``heuristics`` wrappers. A row whose two sides
    tuned to different configurations then says so."""
    choices = {}
    for module in modules:
        for name, value in vars(module).items():
            if kernel_names is not None and name not in kernel_names:
                continue
            for _ in range(4):   # heuristics(autotune(jit)): follow .fn to the tuner
                if getattr(value, "best_config", None) is not None:
                    choices[name] = str(value.best_config)
                    break
                value = getattr(value, "fn", None)
    return choices


def time_sides(run_aotk, run_triton, kernel_names: set) -> dict:
    """aotk_ms / triton_ms (whole op), aotk_kernel_us / triton_kernel_us (the kernels
    together) and, per kernel, aotk_per_kernel_us / triton_per_kernel_us."""
    per_kernel = kernel_gpu_us_in_turns({"aotk": run_aotk, "triton": run_triton},
                                        kernel_names)
    whole = time_interleaved({"aotk": run_aotk, "triton": run_triton}, warmup=3, reps=15,
                             back_to_back=3)
    return {"aotk_ms": whole["aotk"], "triton_ms": whole["triton"],
            "aotk_kernel_us": sum(per_kernel["aotk"].values()),
            "triton_kernel_us": sum(per_kernel["triton"].values()),
            "aotk_per_kernel_us": per_kernel["aotk"],
            "triton_per_kernel_us": per_kernel["triton"]}


def summary_lines(rows: list) -> list:
    """The geometric means (Triton / aotk) over the timed rows."""
    timed = [row for row in rows if "aotk_ms" in row]
    if not timed:
        return []
    op = statistics.geometric_mean([r["triton_ms"] / r["aotk_ms"] for r in timed])
    kernel = statistics.geometric_mean([r["triton_kernel_us"] / r["aotk_kernel_us"]
                                        for r in timed if r["aotk_kernel_us"] > 0])
    return ["", f"{len(timed)} of {len(rows)} cases timed; geometric mean ratio "
            f"(Triton / aotk): whole op {op:.3f}, kernels {kernel:.3f}."]


def run_all(cases, wanted: set, run_case, document: dict, json_path: pathlib.Path) -> None:
    """Runs each wanted case into ``document["rows"]``; a case that raises is a row naming
    the error, not the end. The JSON is written after every case, so a run cut short
    keeps what it measured."""
    for case in cases:
        if wanted and case.name not in wanted:
            continue
        try:
            row = run_case(case)
        except Exception as exc:   # noqa: BLE001 - a failing case is a row
            row = {"case": case.name, "error": f"{type(exc).__name__}: "
                                               f"{str(exc).splitlines()[0][:200]}"}
        document["rows"].append(row)
        print(json.dumps(row), flush=True)
        json_path.write_text(json.dumps(document, indent=1))
