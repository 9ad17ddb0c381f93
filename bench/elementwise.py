"""Elementwise benchmark on the GPU: aotk's JIT vs Triton's JIT on the same kernel source,
and torch, measured side by side in one process. CUDA-event timing, warm-up, median.

    PYTHONPATH=. python3 bench/elementwise.py [--json OUT.json]
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from timing import KERNELS, host_us, time_ms, triton_port  # noqa: E402


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
        add = triton_port(KERNELS / "add.py", impl == "triton").add_kernel
        copy = triton_port(KERNELS / "copy.py", impl == "triton").copy_kernel
        copy2d = triton_port(KERNELS / "copy2d.py", impl == "triton").copy2d_kernel
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
        add = triton_port(KERNELS / "add.py", impl == "triton").add_kernel
        launch[impl] = host_us(lambda: add[(1,)](small, small, small_out, 1024, BLOCK=1024))
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
