"""Elementwise benchmark on the GPU: aotk's JIT vs Triton's JIT on the same kernel source,
and torch, measured side by side in one process. CUDA-event timing, warm-up, median.

    PYTHONPATH=. python3 bench/elementwise.py [--json OUT.json]
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import pathlib
import statistics
import sys
import types

import torch

ROOT = pathlib.Path(__file__).resolve().parent.parent
KERNELS = ROOT / "examples" / "kernels"


def load_module(path: pathlib.Path, use_triton: bool):
    """Loads an example kernel; with use_triton, the same source with its imports swapped."""
    source = path.read_text()
    if use_triton:
        source = source.replace("import aotk.language as tl", "import triton.language as tl")
        source = source.replace("import aotk\n", "import triton\n").replace("@aotk.jit", "@triton.jit")
        # Triton reads the source from a real file.
        target = pathlib.Path("/tmp") / f"triton_{path.name}"
        target.write_text(source)
        path = target
    spec = importlib.util.spec_from_file_location(f"bench_{path.stem}_{use_triton}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def time_ms(fn, warmup=10, reps=30, back_to_back=10) -> float:
    """Median over ``reps`` of the mean kernel time of ``back_to_back`` launches: queued
    launches hide each implementation's host launch cost equally (launch cost is measured
    on its own elsewhere)."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(back_to_back):
            fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / back_to_back)
    return statistics.median(times)


def launch_us(fn, calls=2000) -> float:
    """Host cost of one launch call (small grid), averaged over many calls."""
    import time
    fn()
    torch.cuda.synchronize()
    begin = time.perf_counter()
    for _ in range(calls):
        fn()
    elapsed = time.perf_counter() - begin
    torch.cuda.synchronize()
    return elapsed / calls * 1e6


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--json")
    parser.add_argument("--log2n", type=int, default=28)
    options = parser.parse_args()
    n = 1 << options.log2n
    have_triton = importlib.util.find_spec("triton") is not None
    rows = []
    x = torch.randn(n, device="cuda")
    y = torch.randn(n, device="cuda")
    out = torch.empty(n, device="cuda")

    def record(name, bytes_moved, fn, check):
        fn()
        torch.cuda.synchronize()
        check()   # correctness before any time is reported
        ms = time_ms(fn)
        rows.append({"kernel": name, "ms": ms, "GB/s": bytes_moved / ms / 1e6})

    for impl in ["aotk"] + (["triton"] if have_triton else []):
        add = load_module(KERNELS / "add.py", impl == "triton").add_kernel
        copy = load_module(KERNELS / "copy.py", impl == "triton").copy_kernel
        copy2d = load_module(KERNELS / "copy2d.py", impl == "triton").copy2d_kernel
        block = 1024
        grid = ((n + block - 1) // block,)
        out.zero_()
        record(f"add/{impl}", 3 * 4 * n,
               lambda: add[grid](x, y, out, n, BLOCK=block, num_warps=4),
               lambda: torch.testing.assert_close(out, x + y))
        out.zero_()
        record(f"copy/{impl}", 2 * 4 * n, lambda: copy[grid](x, out, n, BLOCK=block, num_warps=4),
               lambda: torch.testing.assert_close(out, x))
        rows_, cols = 1 << (options.log2n // 2), 1 << (options.log2n - options.log2n // 2)
        src = x.view(rows_, cols)
        dst = out.view(rows_, cols)
        out.zero_()
        bm, bn = 32, 128
        g2 = ((rows_ + bm - 1) // bm, (cols + bn - 1) // bn)
        record(f"copy2d/{impl}", 2 * 4 * n,
               lambda: copy2d[g2](src, dst, rows_, cols, cols, cols, BLOCK_M=bm, BLOCK_N=bn,
                                  num_warps=4),
               lambda: torch.testing.assert_close(dst, src))
    out.zero_()
    record("add/torch", 3 * 4 * n, lambda: torch.add(x, y, out=out),
           lambda: torch.testing.assert_close(out, x + y))
    record("copy/torch", 2 * 4 * n, lambda: out.copy_(x), lambda: torch.testing.assert_close(out, x))

    small = torch.randn(1024, device="cuda")
    small_out = torch.empty_like(small)
    launch = {}
    for impl in ["aotk"] + (["triton"] if have_triton else []):
        add = load_module(KERNELS / "add.py", impl == "triton").add_kernel
        launch[impl] = launch_us(lambda: add[(1,)](small, small, small_out, 1024, BLOCK=1024))
    print("python launch (us/call): " + ", ".join(f"{k} {v:.1f}" for k, v in launch.items()))

    by_name = {r["kernel"]: r for r in rows}
    print(f"\n{'kernel':<16}{'ms':>10}{'GB/s':>10}{'vs triton':>11}{'vs torch':>10}")
    for r in rows:
        base = r["kernel"].split("/")[0]
        tri = by_name.get(f"{base}/triton")
        tor = by_name.get(f"{base}/torch")
        ratio_t = f"{tri['ms'] / r['ms']:.3f}x" if tri and r["kernel"].endswith("aotk") else ""
        ratio_o = f"{tor['ms'] / r['ms']:.3f}x" if tor and r["kernel"].endswith("aotk") else ""
        print(f"{r['kernel']:<16}{r['ms']:>10.3f}{r['GB/s']:>10.1f}{ratio_t:>11}{ratio_o:>10}")
    if options.json:
        pathlib.Path(options.json).write_text(json.dumps(
            {"device": torch.cuda.get_device_name(), "n": n, "rows": rows,
             "launch_us": launch}, indent=2))


if __name__ == "__main__":
    sys.exit(main())
