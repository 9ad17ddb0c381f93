"""liger-kernel on the GPU: the same library loaded twice, under aotk and under Triton.

    PYTHONPATH=. python3 bench/liger.py [--out DIR] [--cases NAME,...] [--part K/N]
    python3 bench/liger.py --merge RUN1/liger.json RUN2/liger.json ... --out DIR

The whole table on a host of N GPUs, one process and one GPU a part (each case's two sides
still in one process on one GPU), then one table:

    for k in $(seq 1 N); do CUDA_VISIBLE_DEVICES=$((k-1)) python3 bench/liger.py \
        --part $k/N --out OUT/part$k > OUT/part$k.log 2>&1 & done; wait
    python3 bench/liger.py --merge OUT/part*/liger.json --out OUT

For each case of the compatibility suite (tests/compat/liger_cases_*.py) at its ``bench``
size: liger's own host code runs once with ``import triton`` giving aotk and once with the
real Triton, on the same CUDA inputs. Outputs (forward and gradients) are compared with each
other and with the PyTorch reference before any time is kept. Times are medians of CUDA-event
timed calls of the whole op (forward + backward, host code included) and, from the torch
profiler, the GPU time of the Triton-language kernels alone. Writes liger.json and liger.md
under --out and prints the table last.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench.sides import autotuned_choices, run_all, summary_lines, time_sides  # noqa: E402


def _close(got, want, atol, rtol) -> str:
    import torch
    for index, (a, b) in enumerate(zip(got, want)):
        try:
            torch.testing.assert_close(a, b, atol=atol, rtol=rtol)
        except AssertionError as exc:
            return f"output {index}: {str(exc).splitlines()[1:3]}"
    return ""


def run_case(case, ops_aotk, ops_triton) -> dict:
    import aotk
    import torch
    inputs = case.make_inputs("cuda", True)
    with aotk.record_launches() as launches:
        got = case.run(ops_aotk, inputs)
    torch.cuda.synchronize()
    want = case.run(ops_triton, inputs)
    reference = case.reference(inputs)
    # Bench sizes sum longer rows than the test sizes: 10x the test's tolerance, unless the
    # case says otherwise.
    atol, rtol = case.bench_tolerance or (case.atol * 10, case.rtol * 10)
    row = {"case": case.name, "kernels": sorted({launch.kernel.name for launch in launches}),
           "matches_triton": _close(got, want, atol, rtol) or "yes",
           "matches_torch": _close(got, reference, atol, rtol) or "yes"}
    if row["matches_triton"] != "yes":
        return row
    row.update(time_sides(lambda: case.run(ops_aotk, inputs),
                          lambda: case.run(ops_triton, inputs), set(row["kernels"])))
    for side, ops in (("aotk", ops_aotk), ("triton", ops_triton)):
        choices = autotuned_choices(ops[name] for name in case.modules)
        if choices:
            row[f"{side}_configs"] = choices
    return row


def markdown(document: dict) -> str:
    lines = [f"# liger-kernel {document['liger_kernel']} under aotk vs Triton "
             f"{document['triton']}, {document['gpu']}", "",
             "Whole op = liger's forward + backward call, host code included (CUDA events, "
             "median). Kernels = GPU time of liger's Triton kernels only (torch profiler). "
             "Ratio > 1: aotk faster.", "",
             "| case | matches Triton | matches torch | op aotk ms | op Triton ms | op ratio "
             "| kernels aotk us | kernels Triton us | kernel ratio |",
             "|---|---|---|---|---|---|---|---|---|"]
    for row in document["rows"]:
        if "aotk_ms" in row:
            lines.append(
                f"| {row['case']} | {row['matches_triton']} | {row['matches_torch']} "
                f"| {row['aotk_ms']:.3f} | {row['triton_ms']:.3f} "
                f"| {row['triton_ms'] / row['aotk_ms']:.3f} | {row['aotk_kernel_us']:.1f} "
                f"| {row['triton_kernel_us']:.1f} "
                f"| {row['triton_kernel_us'] / max(row['aotk_kernel_us'], 1e-9):.3f} |")
        else:
            lines.append(f"| {row['case']} | {row.get('matches_triton', row.get('error'))} "
                         f"| {row.get('matches_torch', '')} | | | | | | |")
    lines += summary_lines(document["rows"])
    return "\n".join(lines) + "\n"


def _read_run(path: pathlib.Path) -> dict:
    """A run's liger.json, or the log of one cut short: its printed rows, one JSON a line."""
    if path.suffix == ".json":
        return json.loads(path.read_text())
    return {"rows": [json.loads(line) for line in path.read_text().splitlines()
                     if line.startswith('{"case"')]}


def part_of(names: list, part: str) -> set:
    """The case names of ``part`` ("K/N": every N-th case from the K-th, K from 1), dealt
    round-robin so that each part gets a share of the slow cases."""
    try:
        k, n = (int(x) for x in part.split("/"))
    except ValueError:
        raise SystemExit(f"--part {part!r}: expected K/N, e.g. 2/4") from None
    if not 1 <= k <= n:
        raise SystemExit(f"--part {part!r}: K must be 1 to N")
    return set(names[k - 1::n])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="bench/results")
    parser.add_argument("--cases", default="")
    parser.add_argument("--part", default=None, metavar="K/N",
                        help="only the K-th of N round-robin parts of the cases (one GPU each)")
    parser.add_argument("--merge", nargs="+", default=None, metavar="LIGER_JSON",
                        help="write one table from several runs' liger.json (or the log of a run "
                             "cut short), the later run's row of a case winning")
    args = parser.parse_args(argv)
    out = pathlib.Path(args.out)
    if args.merge:
        documents = [_read_run(pathlib.Path(path)) for path in args.merge]
        rows = {}
        for document in documents:
            rows.update({row["case"]: row for row in document["rows"]})
        environment = next((d for d in documents if "gpu" in d), None)
        if environment is None:
            raise SystemExit("--merge: give at least one run's liger.json; a log names no GPU "
                             "or versions")
        merged = {**environment, "rows": list(rows.values())}
        out.mkdir(parents=True, exist_ok=True)
        (out / "liger.json").write_text(json.dumps(merged, indent=1))
        (out / "liger.md").write_text(markdown(merged))
        print(markdown(merged))
        return
    import torch
    import triton
    from importlib.metadata import version

    from tests.compat import liger
    ops_aotk, ops_triton = liger.load_ops(True), liger.load_ops(False)
    wanted = set(filter(None, args.cases.split(",")))
    if args.part:
        part = part_of([case.name for case in liger.cases()], args.part)
        wanted = wanted & part if wanted else part
    document = {"gpu": torch.cuda.get_device_name(), "triton": triton.__version__,
                "torch": torch.__version__, "liger_kernel": version("liger-kernel"), "rows": []}
    out.mkdir(parents=True, exist_ok=True)
    run_all(liger.cases(), wanted, lambda case: run_case(case, ops_aotk, ops_triton), document,
            out / "liger.json")
    (out / "liger.md").write_text(markdown(document))
    print(markdown(document))


if __name__ == "__main__":
    main()
