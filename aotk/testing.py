"""``aotk.testing.do_bench``: Triton's GPU timing helper, for kernel files and benchmarks that
call it (CUDA events around repeated calls, through torch, an optional dependency)."""
from __future__ import annotations

import statistics


def do_bench(fn, warmup=25, rep=100, grad_to_none=None, quantiles=None, return_mode="mean",
             *, hide_launch_time=False):
    """Milliseconds per call of ``fn``: run about ``warmup`` ms, then time about ``rep`` ms
    of calls with CUDA events, each after clearing the L2 cache. ``quantiles`` (a list of
    fractions) returns those instead; ``return_mode`` is min, max, mean, median or all.

    ``hide_launch_time`` (aotk's, keyword-only): the GPU's time only. Before each timed
    call the stream waits on the GPU (``torch.cuda._sleep``) for longer than ``fn`` takes
    to enqueue its work on the host, so the start event is not reached before the kernel
    is queued behind it. Without it, where ``fn``'s host side is slower than the L2 clear
    (about 60 us on an H200), the events time the host: the autotuner kept fla's cumsum
    at 4 warps (48.9 us of GPU time) over 2 warps (33.0 us); with it, 2 warps."""
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
    sleep_cycles = _launch_cover_cycles(torch, fn) if hide_launch_time else 0
    times = []
    for _ in range(max(1, int(rep / estimate))):
        if grad_to_none is not None:
            for tensor in grad_to_none:
                tensor.grad = None
        cache.zero_()
        if sleep_cycles:
            torch.cuda._sleep(sleep_cycles)
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


def _launch_cover_cycles(torch, fn) -> int:
    """GPU clock cycles to wait before a timed call of ``fn`` so that the host has enqueued
    it by then: twice the slowest of five host-side calls (the GPU runs them meanwhile),
    plus 20 us, at the device's clock (2 GHz where torch does not say)."""
    import time
    host = 0.0
    for _ in range(5):
        started = time.perf_counter()
        fn()
        host = max(host, time.perf_counter() - started)
    torch.cuda.synchronize()
    properties = torch.cuda.get_device_properties(torch.cuda.current_device())
    clock_hz = getattr(properties, "clock_rate", 0) * 1e3 or 2e9
    return int((2 * host + 20e-6) * clock_hz)
