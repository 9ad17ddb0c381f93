"""The descriptor matmuls built several ways into one library, against cuBLAS (torch.matmul),
fp16, in one run: examples/kernels/matmul_descriptor.py's 128x256x64 tile (8 warps, 3
stages) as it is, with a producer warp (WARP_SPECIALIZE), and with producer warps shared by
pairs of programs (num_ctas = 2: TMA multicast of B's tiles);
examples/kernels/matmul_descriptor_split.py's 128 x (128 + 64) tile, plain and in pairs; and
examples/kernels/matmul_descriptor_tail.py (the same 128x256 tile, the last partial wave's
tiles split along K over the idle SMs; wave = the SM count, splits from its tail_plan),
plain, with a producer warp and in pairs.

    PYTHONPATH=. python3 bench/matmul_pairs.py [--out DIR]

Sizes where B's rows are 128-byte aligned (4096, 8192, 3072) and where they are not (N =
3000: 6000-byte rows; N = 1000). Every output is checked against torch.matmul first; times
are bench/timing.time_interleaved medians (the implementations taking turns). Writes
matmul_pairs.json and matmul_pairs.md; the table is printed last.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from timing import KERNELS, matmul_operands, time_interleaved  # noqa: E402

SIZES = [(2816, 3000, 3000), (3000, 3000, 3000), (5120, 1000, 3000), (3072, 3072, 3072),
         (4096, 4096, 4096), (8192, 8192, 8192)]
# name -> (source file, function, constants, num_ctas)
TILE = "BLOCK_SIZE_M = 128, BLOCK_SIZE_N = 256, BLOCK_SIZE_K = 64, GROUP_SIZE_M = 8"
SPLIT = "BLOCK_SIZE_M = 128, BLOCK_N1 = 128, BLOCK_N2 = 64, BLOCK_SIZE_K = 64, GROUP_SIZE_M = 8"
BUILDS = {
    "plain": ("matmul_descriptor", "matmul_descriptor_kernel", TILE, 1),
    "producer": ("matmul_descriptor", "matmul_descriptor_kernel",
                 TILE + ", WARP_SPECIALIZE = true", 1),
    "pairs": ("matmul_descriptor", "matmul_descriptor_kernel", TILE + ", WARP_SPECIALIZE = true",
              2),
    "split192": ("matmul_descriptor_split", "matmul_descriptor_split_kernel", SPLIT, 1),
    "split192_pairs": ("matmul_descriptor_split", "matmul_descriptor_split_kernel",
                       SPLIT + ", WARP_SPECIALIZE = true", 2),
    "tail": ("matmul_descriptor_tail", "matmul_descriptor_tail_kernel",
             TILE + ", FIXUP_ROWS = 32", 1),
    "tail_producer": ("matmul_descriptor_tail", "matmul_descriptor_tail_kernel",
                      TILE + ", FIXUP_ROWS = 32, WARP_SPECIALIZE = true", 1),
    "tail_pairs": ("matmul_descriptor_tail", "matmul_descriptor_tail_kernel",
                   TILE + ", FIXUP_ROWS = 32, WARP_SPECIALIZE = true", 2),
}
WIDTHS = {"matmul_descriptor_kernel": 256, "matmul_descriptor_split_kernel": 192,
          "matmul_descriptor_tail_kernel": 256}
SIGNATURES = {
    "matmul_descriptor_tail_kernel":
        "*fp16:16, *fp16:16, *fp16:16, *fp32:16, *i32:16, i32, i32:8, i32:8, i32:8, i32:8, "
        "i32:8, i32, i32"}
GRIDS = {"matmul_descriptor_tail_kernel":
         "cdiv(M, 128) * cdiv(N, 256) + cdiv(M, 128) * cdiv(N, 256) % wave * (splits - 1)"}
KERNEL = """
[[kernel]]
name = "{name}"
source = "{source}"
function = "{function}"
signature = "{signature}"
grid = ["{grid}"]
specialize = "none"
num_warps = 8
num_stages = 3
num_ctas = {num_ctas}
constants = {{ {constants} }}
"""


def build(folder: pathlib.Path):
    import aotk
    text = '[library]\nname = "pairs"\ntargets = ["sm_90"]\n' + "".join(
        KERNEL.format(name=name, source=KERNELS / f"{file}.py", function=function,
                      signature=SIGNATURES.get(function, "*fp16:16, *fp16:16, *fp16:16, i32, "
                                                         "i32:8, i32:8, i32:8, i32:8, i32:8"),
                      grid=GRIDS.get(function, f"cdiv(M, 128) * cdiv(N, {WIDTHS[function]})"),
                      constants=constants, num_ctas=num_ctas)
        for name, (file, function, constants, num_ctas) in BUILDS.items())
    (folder / "aotk.toml").write_text(text)
    return aotk.load(aotk.build(folder / "aotk.toml", out_dir=folder / "out").library)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "bench" / "results"))
    args = parser.parse_args(argv)
    import torch
    lib = build(pathlib.Path(tempfile.mkdtemp()))
    sys.path.insert(0, str(KERNELS))
    from matmul_descriptor_tail import tail_plan
    wave = torch.cuda.get_device_properties(0).multi_processor_count
    rows = []
    for m, n, k in SIZES:
        a, b, expected = matmul_operands(m, n, k)
        outputs = {name: torch.empty((m, n), device="cuda", dtype=torch.float16)
                   for name in BUILDS}
        plan = tail_plan(m, n, k, wave)
        workspace = torch.empty(plan["workspace"], device="cuda", dtype=torch.float32)
        counters = torch.zeros(plan["counters"], device="cuda", dtype=torch.int32)

        def call(name):
            if BUILDS[name][1] == "matmul_descriptor_tail_kernel":
                return lambda: getattr(lib, name)(a, b, outputs[name], workspace, counters, m, n,
                                                  k, k, n, n, wave, plan["splits"])
            return lambda: getattr(lib, name)(a, b, outputs[name], m, n, k, k, n, n)
        calls = {name: call(name) for name in BUILDS}
        row = {"M": m, "N": n, "K": k, "wave": wave, "tail_splits": plan["splits"]}
        for name, call in calls.items():
            outputs[name].fill_(float("nan"))
            call()
            torch.cuda.synchronize()
            row[f"{name}_matches"] = bool(torch.allclose(outputs[name].float(), expected.float(),
                                                         atol=0.5, rtol=1e-2))
        times = time_interleaved({"cublas": lambda: torch.matmul(a, b), **calls})
        row.update({f"{name}_ms": ms for name, ms in times.items()})
        row.update({f"{name}_vs_cublas": times["cublas"] / times[name] for name in BUILDS})
        rows.append(row)
        print(json.dumps(row), flush=True)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "matmul_pairs.json").write_text(json.dumps(
        {"gpu": torch.cuda.get_device_name(), "rows": rows}, indent=1))
    lines = ["| M x N x K | cuBLAS us | " + " | ".join(f"{name} us (x cuBLAS)" for name in BUILDS)
             + " | all match |", "|---|---|" + "---|" * len(BUILDS) + "---|"]
    for row in rows:
        cells = [f"{row[name + '_ms'] * 1000:.1f} ({row[name + '_vs_cublas']:.2f})"
                 for name in BUILDS]
        matches = all(row[f"{name}_matches"] for name in BUILDS)
        lines.append(f"| {row['M']}x{row['N']}x{row['K']} | {row['cublas_ms'] * 1000:.1f} | "
                     + " | ".join(cells) + f" | {'yes' if matches else 'NO'} |")
    (out / "matmul_pairs.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
