"""Stream-K matmul (examples/kernels/matmul_streamk.py) against cuBLAS (torch.matmul) and the
tutorial kernel (examples/kernels/matmul.py, one program per tile), fp16 in, fp16 out, at
sizes whose last wave is partial on an H100/H200 (132 SMs) and at 4096^3 (whole waves).

    PYTHONPATH=. python3 bench/streamk.py [--out DIR] [--sizes 3000x3000x3000,...]

Stream-K runs P = the SM count programs at 128x256x64 and 128x128x64 (8 warps, 3 stages);
the tutorial at 128x256x64 (8 warps, 3 stages, the 264-tile case's 0.95-0.98x of cuBLAS).
Triton's JIT of the same stream-K source runs beside it (same launch), to tell the
schedule's effect from the code generator's. Every output is checked against torch.matmul
before it is timed. The workspace and counters are allocated once per size and reused by
every launch (the kernel leaves the counters zero), as a library would cache them; the
fixup sums 64-row slices (16 bytes x 16 loads in flight per thread at 128x256).
Time: bench/timing.time_ms (CUDA events, median of back-to-back launches).
Writes streamk.json and streamk.md.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from timing import KERNELS, time_ms, triton_port  # noqa: E402

SIZES = [(3000, 3000, 3000), (4096, 4096, 4096), (5120, 1000, 3000), (3072, 2816, 3000)]
TUTORIAL = (128, 256, 64, 8, 3)                       # BLOCK_M, BLOCK_N, BLOCK_K, warps, stages
STREAMK = {"streamk_128x256": (128, 256, 64, 8, 3), "streamk_128x128": (128, 128, 64, 8, 3)}


def _tutorial(kernel, a, b, c):
    m, k = a.shape
    n = b.shape[1]
    block_m, block_n, block_k, warps, stages = TUTORIAL
    grid = (-(-m // block_m) * -(-n // block_n),)

    def launch():
        kernel[grid](a, b, c, m, n, k, a.stride(0), 1, b.stride(0), 1, n, 1,
                     BLOCK_SIZE_M=block_m, BLOCK_SIZE_N=block_n, BLOCK_SIZE_K=block_k,
                     GROUP_SIZE_M=8, ACTIVATION="", num_warps=warps, num_stages=stages)
    return launch


def _streamk(module, kernel, a, b, c, programs, config):
    import torch
    m, k = a.shape
    n = b.shape[1]
    block_m, block_n, block_k, warps, stages = config
    workspace = torch.empty(module.workspace_elements(programs, block_m, block_n),
                            device="cuda", dtype=torch.float32)
    counters = torch.zeros(module.counter_count(m, n, programs, block_m, block_n),
                           device="cuda", dtype=torch.int32)

    def launch():
        kernel[(programs,)](a, b, c, workspace, counters, m, n, k, a.stride(0), 1,
                            b.stride(0), 1, n, 1, BLOCK_SIZE_M=block_m, BLOCK_SIZE_N=block_n,
                            BLOCK_SIZE_K=block_k, GROUP_SIZE_M=8, FIXUP_ROWS=64,
                            num_warps=warps, num_stages=stages)
    return launch, counters


def run(sizes) -> dict:
    import torch
    import triton
    programs = torch.cuda.get_device_properties(0).multi_processor_count
    tutorial = triton_port(KERNELS / "matmul.py", use_triton=False).matmul_kernel
    streamk = triton_port(KERNELS / "matmul_streamk.py", use_triton=False)
    streamk_triton = triton_port(KERNELS / "matmul_streamk.py")
    rows = []
    for m, n, k in sizes:
        generator = torch.Generator(device="cuda").manual_seed(0)
        a = torch.randn((m, k), generator=generator, device="cuda", dtype=torch.float16)
        b = torch.randn((k, n), generator=generator, device="cuda", dtype=torch.float16)
        expected = torch.matmul(a, b)
        row = {"M": m, "N": n, "K": k, "programs": programs,
               "tiles_128x256": -(-m // 128) * -(-n // 256)}
        launchers = {"cublas": lambda: torch.matmul(a, b)}
        outputs = {}
        c = torch.empty((m, n), device="cuda", dtype=torch.float16)
        launchers["tutorial"], outputs["tutorial"] = _tutorial(tutorial, a, b, c), c
        for name, config in STREAMK.items():
            for suffix, module, kernel in (("", streamk, streamk.matmul_streamk_kernel),
                                           ("_triton", streamk_triton,
                                            streamk_triton.matmul_streamk_kernel)):
                c = torch.empty((m, n), device="cuda", dtype=torch.float16)
                launch, counters = _streamk(module, kernel, a, b, c, programs, config)
                launchers[name + suffix], outputs[name + suffix] = launch, (c, counters)
        for name, launch in list(launchers.items()):
            if name == "cublas":
                continue
            try:
                for _ in range(2):   # the second launch reuses the counters the first reset
                    launch()
                torch.cuda.synchronize()
                got = outputs[name]
                c, counters = got if isinstance(got, tuple) else (got, None)
                torch.testing.assert_close(c, expected, atol=0.5, rtol=0.05)
                if counters is not None:
                    assert torch.count_nonzero(counters).item() == 0, "counters left nonzero"
            except Exception as error:   # a failed variant is reported, not timed
                row[f"{name}_error"] = f"{type(error).__name__}: {error}"[:300]
                del launchers[name]
        for name, launch in launchers.items():
            row[f"{name}_ms"] = time_ms(launch)
        for name in launchers:
            row[f"{name}_vs_cublas"] = row["cublas_ms"] / row[f"{name}_ms"]
        print(json.dumps(row), flush=True)
        rows.append(row)
    return {"gpu": torch.cuda.get_device_name(), "triton": triton.__version__,
            "torch": torch.__version__, "rows": rows}


def markdown(document) -> str:
    names = ["tutorial", "streamk_128x256", "streamk_128x128", "streamk_128x256_triton",
             "streamk_128x128_triton"]
    lines = [f"# Stream-K matmul on {document['gpu']} (fraction of cuBLAS; higher is better)",
             "", "| M x N x K | tiles 128x256 | cuBLAS ms | " + " | ".join(names) + " |",
             "|---|---|---|" + "---|" * len(names)]
    for row in document["rows"]:
        cells = [f"{row[name + '_vs_cublas']:.2f}x" if name + "_vs_cublas" in row
                 else "failed" for name in names]
        lines.append(f"| {row['M']}x{row['N']}x{row['K']} | {row['tiles_128x256']} | "
                     f"{row['cublas_ms']:.3f} | " + " | ".join(cells) + " |")
    errors = [f"- {row['M']}x{row['N']}x{row['K']} {key[:-6]}: {value}"
              for row in document["rows"] for key, value in row.items() if key.endswith("_error")]
    return "\n".join(lines + ([""] + errors if errors else [])) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "bench" / "results"))
    parser.add_argument("--sizes", default=None,
                        help="comma-separated MxNxK (default: " +
                             ",".join("x".join(map(str, s)) for s in SIZES) + ")")
    args = parser.parse_args(argv)
    sizes = SIZES if args.sizes is None else \
        [tuple(int(x) for x in size.split("x")) for size in args.sizes.split(",")]
    document = run(sizes)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "streamk.json").write_text(json.dumps(document, indent=1))
    (out / "streamk.md").write_text(markdown(document))
    print(markdown(document))


if __name__ == "__main__":
    main()
