"""``aotk.testing.do_bench``: Triton's GPU timing helper, for kernel files and benchmarks that
call it (CUDA events around repeated calls, through torch, an optional dependency)."""
from __future__ import annotations

import statistics


def do_bench(fn, warmup=25, rep=100, grad_to_none=None, quantiles=None, return_mode="mean"):
    """Milliseconds per call of ``fn``: run about ``warmup`` ms, then time about ``rep`` ms
    of calls with CUDA events, each after clearing the L2 cache. ``quantiles`` (a list of
    fractions) returns those instead; ``return_mode`` is min, max, mean, median or all."""
    try:
        import torch
    except ImportError as exc:
        raise RuntimeError("aotk.testing.do_bench times on the GPU through torch, which is not "
                           "installed") from exc
    if return_mode not in ("min", "max", "mean", "median", "all"):
        raise ValueError(f"return_mode must be min, max, mean, median or all, got {return_mode!r}")
    fn()
    torch.cuda.synchronize()
    cache = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.int32, device="cuda")
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(5):
        cache.zero_()
        fn()
    end.record()
    torch.cuda.synchronize()
    estimate = max(start.elapsed_time(end) / 5, 1e-3)
    for _ in range(max(1, int(warmup / estimate))):
        fn()
    times = []
    for _ in range(max(1, int(rep / estimate))):
        if grad_to_none is not None:
            for tensor in grad_to_none:
                tensor.grad = None
        cache.zero_()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    if quantiles is not None:
        ordered = sorted(times)
        values = [ordered[min(len(ordered) - 1, int(q * len(ordered)))] for q in quantiles]
        return values[0] if len(values) == 1 else values
    if return_mode == "all":
        return times
    return {"min": min, "max": max, "mean": statistics.mean,
            "median": statistics.median}[return_mode](times)
