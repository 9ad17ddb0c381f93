"""Triton-C examples against their Python twins on the GPU, in one process.

In: examples/kernels/{add,softmax,layer_norm,matmul}.tc and their .py twins. Out: a markdown
table (and ``--out DIR``: tritonc.json + tritonc.md) of each pair's kernel time, launched
the same way (JIT, the same constants and warps), results compared bit for bit, the ratio
Triton-C / Python (1.00 = same speed), and each matmul's fraction of cuBLAS (torch.matmul).

    python bench/tritonc.py [--out DIR]
"""
from __future__ import annotations

import argparse
import json
import statistics
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from bench.sides import kernel_gpu_us  # noqa: E402
from bench.timing import KERNELS, time_ms, triton_port  # noqa: E402


def _cases(torch, tritonc):
    """(name, python kernel, Triton-C kernel, launch(kernel, out) -> None, make_out,
    torch reference or None, flops or bytes, metric)."""
    twin = {n: triton_port(KERNELS / f"{n}.py", use_triton=False)
            for n in ("add", "softmax", "layer_norm", "matmul")}
    tc = {n: tritonc.load(KERNELS / f"{n}.tc", f)
          for n, f in (("add", "add_kernel"), ("softmax", "softmax_kernel"),
                       ("layer_norm", "layer_norm_fwd_kernel"), ("matmul", "matmul_kernel"))}
    cases = []

    n = 1 << 24
    x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    cases.append(("add 16M fp32", twin["add"].add_kernel, tc["add"],
                  lambda k, o: k[(triton_cdiv(n, 1024),)](x, y, o, n, BLOCK=1024),
                  lambda: torch.empty_like(x), None, 3 * 4 * n, "GB/s"))

    rows, cols = 4096, 1000
    logits = torch.randn(rows, cols, device="cuda")
    cases.append(("softmax 4096x1000 fp32", twin["softmax"].softmax_kernel, tc["softmax"],
                  lambda k, o: k[(rows,)](o, logits, cols, cols, rows, cols, BLOCK=1024),
                  lambda: torch.empty_like(logits), None, 2 * 4 * rows * cols, "GB/s"))

    M, N = 4096, 4096
    xs = torch.randn(M, N, device="cuda", dtype=torch.float16)
    w = torch.rand(N, device="cuda", dtype=torch.float16)
    b = torch.rand(N, device="cuda", dtype=torch.float16)
    mean = torch.empty(M, device="cuda")
    rstd = torch.empty(M, device="cuda")
    cases.append(("layer_norm 4096x4096 fp16", twin["layer_norm"].layer_norm_fwd_kernel,
                  tc["layer_norm"],
                  lambda k, o: k[(M,)](xs, o, w, b, mean, rstd, N, M, N, 1e-5,
                                       BLOCK_SIZE=4096, num_warps=8),
                  lambda: torch.empty_like(xs), None, 2 * 2 * M * N, "GB/s"))

    for size in (4096, 3000):
        a = torch.randn(size, size, device="cuda", dtype=torch.float16)
        bm = torch.randn(size, size, device="cuda", dtype=torch.float16)
        big = dict(BLOCK_SIZE_M=128, BLOCK_SIZE_N=256, BLOCK_SIZE_K=64, GROUP_SIZE_M=8,
                   num_warps=8)
        grid = (triton_cdiv(size, 128) * triton_cdiv(size, 256),)

        def launch(k, o, a=a, bm=bm, size=size, big=big, grid=grid):
            extra = {"ACTIVATION": ""} if k == twin["matmul"].matmul_kernel else {}
            k[grid](a, bm, o, size, size, size, a.stride(0), a.stride(1), bm.stride(0),
                    bm.stride(1), o.stride(0), o.stride(1), **big, **extra)
        cases.append((f"matmul {size}^3 fp16", twin["matmul"].matmul_kernel, tc["matmul"],
                      launch, lambda size=size: torch.empty(size, size, device="cuda",
                                                            dtype=torch.float16),
                      (lambda a=a, bm=bm: torch.matmul(a, bm)), 2 * size ** 3, "TFLOP/s"))
    return cases


def _same_ptx(launch, python_kernel, c_kernel, out) -> bool:
    """Whether both sides' launches compile to the same PTX (their kir differs only in
    the source lines it cites): each launch is recorded and compiled instead of run."""
    import aotk
    from aotk.launch.arguments import specialize
    texts = []
    for kernel in (python_kernel, c_kernel):
        seen = {}

        class Recorder:
            def __getitem__(self, grid):
                def record(*args, **kwargs):
                    num_warps = kwargs.pop("num_warps", 4)
                    runtime, constants = kernel._split_arguments(args, kwargs)
                    signature = specialize(kernel, runtime)[0]
                    seen["ptx"] = aotk.compile(kernel, signature, constants=constants,
                                               num_warps=num_warps, target="sm_90").asm["ptx"]
                return record
        launch(_Alias(Recorder(), kernel), out)
        texts.append(seen["ptx"])
    return texts[0] == texts[1]


class _Alias:
    """A stand-in for a kernel in ``launch`` (which tells the twins apart by identity)."""

    def __init__(self, recorder, kernel):
        self._recorder, self._kernel = recorder, kernel

    def __getitem__(self, grid):
        return self._recorder[grid]

    def __eq__(self, other):
        return other is self._kernel

    __hash__ = object.__hash__


def triton_cdiv(a, b):
    return (a + b - 1) // b


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=pathlib.Path)
    args = parser.parse_args(argv)
    import torch
    from aotk import tritonc
    rows = []
    for name, python_kernel, c_kernel, launch, make_out, reference, amount, metric in \
            _cases(torch, tritonc):
        out_py, out_c = make_out(), make_out()
        launch(python_kernel, out_py)
        launch(c_kernel, out_c)
        torch.cuda.synchronize()
        same = bool(torch.equal(out_py, out_c))
        times = {}
        # Interleaved rounds in alternating order: drifting clocks and whatever the side
        # before left in L2 affect both sides alike.
        # Both write the same output buffer, so only the code differs.
        sides = [("python", python_kernel), ("tritonc", c_kernel)]
        for round_ in range(8):
            for side, kernel in (sides if round_ % 2 == 0 else sides[::-1]):
                times.setdefault(side, []).append(time_ms(lambda: launch(kernel, out_py)))
        row = {"case": name, "same_bits": same, "same_ptx": _same_ptx(launch, python_kernel,
                                                                        c_kernel, out_py),
               "metric": metric, "python_ms": statistics.median(times["python"]),
               "tritonc_ms": statistics.median(times["tritonc"])}
        row["ratio"] = row["tritonc_ms"] / row["python_ms"]
        # The GPU's own time of the kernels (torch profiler): no launch path in it.
        names = {python_kernel.name}
        profiled = {}
        for round_ in range(4):
            for side, kernel in (sides if round_ % 2 == 0 else sides[::-1]):
                profiled.setdefault(side, []).append(sum(kernel_gpu_us(
                    lambda: launch(kernel, out_py), names, reps=50).values()))
        row["python_kernel_us"] = statistics.median(profiled["python"])
        row["tritonc_kernel_us"] = statistics.median(profiled["tritonc"])
        row["kernel_ratio"] = row["tritonc_kernel_us"] / row["python_kernel_us"]
        if reference is not None:
            row["cublas_ms"] = time_ms(reference)
            row["python_of_cublas"] = row["cublas_ms"] / row["python_ms"]
            row["tritonc_of_cublas"] = row["cublas_ms"] / row["tritonc_ms"]
        scale = 1e6 if metric == "GB/s" else 1e9
        row["tritonc_value"] = amount / row["tritonc_ms"] / scale
        rows.append(row)
    lines = [f"GPU: {torch.cuda.get_device_name(0)}", "",
             "| case | same bits | same PTX | Python ms | Triton-C ms | Triton-C / Python | kernel "
             "us Python | kernel us Triton-C | kernel Triton-C / Python | Triton-C "
             "| Python of cuBLAS | Triton-C of cuBLAS |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        cublas = (f"{r['python_of_cublas']:.2f} | {r['tritonc_of_cublas']:.2f}"
                  if "cublas_ms" in r else "- | -")
        lines.append(f"| {r['case']} | {'yes' if r['same_bits'] else 'NO'} | "
                     f"{'yes' if r['same_ptx'] else 'no'} | "
                     f"{r['python_ms']:.4f} | {r['tritonc_ms']:.4f} | {r['ratio']:.3f} | "
                     f"{r['python_kernel_us']:.1f} | {r['tritonc_kernel_us']:.1f} | "
                     f"{r['kernel_ratio']:.3f} | "
                     f"{r['tritonc_value']:.0f} {r['metric']} | {cublas} |")
    table = "\n".join(lines)
    print(table)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "tritonc.json").write_text(json.dumps(
            {"gpu": torch.cuda.get_device_name(0), "rows": rows}, indent=1))
        (args.out / "tritonc.md").write_text(table + "\n")
    return 0 if all(r["same_bits"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
