"""flash-linear-attention on the GPU: its recurrences under aotk and under Triton.
(Not named fla.py: with bench/ on sys.path, that name would shadow the fla package.)

    PYTHONPATH=. python3 bench/linear_attention.py [--out DIR] [--cases NAME,...]
                                                   [--dtype bfloat16]

For each case of tests/compat/fla.py (six recurrences, chunked and fused-recurrent) at
``fla.BENCH_SIZE`` (B=4, T=2048, H=8, K=V=128): fla's own host code runs once with
``import triton`` giving aotk and once with the real Triton, on the same CUDA inputs. The
two outputs are compared with each other (and with fla's PyTorch reference, reported)
before any time is kept; the first call of each side tunes its autotuned kernels and is
not timed. Times are medians of CUDA-event timed calls of the whole forward op (host code
included) and, from the torch profiler, the GPU time of fla's kernels alone. Writes
fla.json and fla.md under --out and prints the table last.
"""
from __future__ import annotations

import argparse
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench.sides import autotuned_choices, run_all, summary_lines, time_sides  # noqa: E402

# Between the two sides, of the output's largest magnitude: both multiply bf16 (or tf32)
# on tensor cores, in orders that differ.
MATCH = 2e-2


def _difference(got, want) -> float:
    scale = float(want.float().abs().max()) or 1.0
    return float((got.float() - want.float()).abs().max()) / scale


def run_case(case, ops_aotk, ops_triton, dtype) -> dict:
    import aotk
    import torch
    from tests.compat import fla
    inputs = fla.make_inputs("cuda", fla.BENCH_SIZE, dtype)
    with aotk.record_launches() as launches:
        got = case.run(ops_aotk, inputs)
    want = case.run(ops_triton, inputs)
    torch.cuda.synchronize()
    reference = case.reference(ops_triton, inputs)
    row = {"case": case.name, "kernels": sorted({launch.kernel.name for launch in launches}),
           "difference_to_triton": _difference(got, want),
           "difference_to_reference": _difference(got, reference),
           "triton_difference_to_reference": _difference(want, reference)}
    if row["difference_to_triton"] > MATCH:
        return row
    row.update(time_sides(lambda: case.run(ops_aotk, inputs),
                          lambda: case.run(ops_triton, inputs), set(row["kernels"])))
    for side, ops in (("aotk", ops_aotk), ("triton", ops_triton)):
        choices = autotuned_choices(list(ops["modules"].values()), set(row["kernels"]))
        if choices:
            row[f"{side}_configs"] = choices
    return row


def markdown(document: dict) -> str:
    lines = [f"# flash-linear-attention (fla-core {document['fla_core']}) under aotk vs "
             f"Triton {document['triton']}, {document['gpu']}", "",
             f"Size {document['size']}, {document['dtype']}. Whole op = fla's forward call, "
             "host code included (CUDA events, median); kernels = GPU time of fla's kernels "
             "only (torch profiler). Differences are of the output's largest magnitude. "
             "Ratio > 1: aotk faster.", "",
             "| case | vs Triton | vs reference (Triton's) | op aotk ms | op Triton ms "
             "| op ratio | kernels aotk us | kernels Triton us | kernel ratio |",
             "|---|---|---|---|---|---|---|---|---|"]
    for row in document["rows"]:
        if "error" in row:
            lines.append(f"| {row['case']} | {row['error']} | | | | | | | |")
            continue
        cells = [f"{row['difference_to_triton']:.1e}",
                 f"{row['difference_to_reference']:.1e} "
                 f"({row['triton_difference_to_reference']:.1e})"]
        if "aotk_ms" in row:
            cells += [f"{row['aotk_ms']:.3f}", f"{row['triton_ms']:.3f}",
                      f"{row['triton_ms'] / row['aotk_ms']:.3f}",
                      f"{row['aotk_kernel_us']:.1f}", f"{row['triton_kernel_us']:.1f}",
                      f"{row['triton_kernel_us'] / max(row['aotk_kernel_us'], 1e-9):.3f}"]
        else:
            cells += ["not timed: outputs differ"] + [""] * 5
        lines.append(f"| {row['case']} | " + " | ".join(cells) + " |")
    lines += summary_lines(document["rows"])
    per_kernel = [(row["case"], name, us, row["triton_per_kernel_us"].get(name))
                  for row in document["rows"] if "aotk_per_kernel_us" in row
                  for name, us in sorted(row["aotk_per_kernel_us"].items())]
    if per_kernel:
        lines += ["", "Per kernel (GPU us per call of the op; ratio > 1: aotk faster):", "",
                  "| case | kernel | aotk us | Triton us | ratio |", "|---|---|---|---|---|"]
        for case, name, us, triton_us in per_kernel:
            ratio = f"{triton_us / us:.3f}" if triton_us and us else ""
            lines.append(f"| {case} | {name} | {us:.1f} | "
                         f"{triton_us if triton_us is None else f'{triton_us:.1f}'} | {ratio} |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="bench/results")
    parser.add_argument("--cases", default="")
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32"])
    args = parser.parse_args(argv)
    import torch
    import triton
    from importlib.metadata import version

    from tests.compat import fla
    dtype = getattr(torch, args.dtype)
    ops_aotk, ops_triton = fla.load_ops(True), fla.load_ops(False)
    wanted = set(filter(None, args.cases.split(",")))
    document = {"gpu": torch.cuda.get_device_name(), "triton": triton.__version__,
                "torch": torch.__version__, "fla_core": version("fla-core"),
                "size": fla.BENCH_SIZE, "dtype": args.dtype, "rows": []}
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    run_all(fla.cases(), wanted, lambda case: run_case(case, ops_aotk, ops_triton, dtype),
            document, out / "fla.json")
    (out / "fla.md").write_text(markdown(document))
    print(markdown(document))


if __name__ == "__main__":
    main()
