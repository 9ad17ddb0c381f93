"""GPU timing helpers shared by the benchmarks (torch needed, imported lazily)."""
from __future__ import annotations

import importlib.util
import pathlib
import statistics
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
KERNELS = ROOT / "examples" / "kernels"


def triton_port(path: pathlib.Path, use_triton: bool = True):
    """Loads an example kernel module; with use_triton, the same source with its imports
    swapped to Triton (ported back, not rewritten)."""
    source = path.read_text()
    if use_triton:
        source = source.replace("import aotk.language as tl", "import triton.language as tl")
        source = source.replace("import aotk\n", "import triton\n").replace("@aotk.jit", "@triton.jit")
        target = pathlib.Path("/tmp") / f"triton_{path.name}"   # Triton reads real files
        target.write_text(source)
        path = target
    spec = importlib.util.spec_from_file_location(f"bench_{path.stem}_{use_triton}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def matmul_operands(m: int, n: int, k: int) -> tuple:
    """(a, b, torch.matmul(a, b)): fp16 operands from one seed, the same for every bench and
    run, and cuBLAS's product that outputs are checked against."""
    import torch
    generator = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn((m, k), generator=generator, device="cuda", dtype=torch.float16)
    b = torch.randn((k, n), generator=generator, device="cuda", dtype=torch.float16)
    return a, b, torch.matmul(a, b)


def time_ms(fn, warmup=10, reps=30, back_to_back=10) -> float:
    """Median over ``reps`` of the mean kernel time of ``back_to_back`` queued launches
    (CUDA events): queued launches hide each implementation's host cost equally. One
    implementation's ``time_interleaved``."""
    return time_interleaved({"fn": fn}, warmup, reps, back_to_back)["fn"]


def turns(names: list, rounds: int) -> list:
    """The order the implementations take their turns in, round by round: each once a
    round, the first of one round the last of the next, so each goes first as often."""
    names = list(names)
    return [names[r % len(names):] + names[:r % len(names)] for r in range(rounds)]


def time_interleaved(fns: dict, warmup=10, reps=30, back_to_back=10) -> dict:
    """{name: ms} as ``time_ms`` gives each of ``fns``, the implementations taking turns:
    one block of ``back_to_back`` queued launches each per round, in ``turns`` order.
    Timed one after the other, a card whose clocks drift favors whichever goes first:
    bench/run.py (aotk timed first) put the descriptor matmul at 1.11x torch at 4096^3,
    where probes timing cuBLAS first put it at 0.82-0.91x (H200s, 2026-11-27/28); the
    order is one difference between the two, so the implementations take turns."""
    import torch
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    torch.cuda.synchronize()
    times = {name: [] for name in fns}
    for order in turns(list(fns), reps):
        for name in order:
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(back_to_back):
                fns[name]()
            end.record()
            end.synchronize()
            times[name].append(start.elapsed_time(end) / back_to_back)
    return {name: statistics.median(values) for name, values in times.items()}


def host_us(fn, calls=500, rounds=20) -> float:
    """Host cost per call: rounds of few calls of a one-program kernel so the launch queue
    never fills (a full queue would time the GPU instead); best round."""
    import torch
    best = float("inf")
    for _ in range(rounds):
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - start) / calls)
    torch.cuda.synchronize()
    return best * 1e6
