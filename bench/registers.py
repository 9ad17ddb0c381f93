"""Registers and spills of liger-kernel's kernels, aotk against Triton, without a GPU.

    python bench/registers.py [--out DIR] [--targets sm_90,sm_80] [--library liger|fla]
                              [--launches FILE.json]

Every specialization liger's own host code launches in the compatibility suite (its cases
run on aotk's interpreter, launches recorded: the signatures, hints, constexprs, num_warps
and num_stages liger chooses) is compiled by aotk and by the installed Triton for each
target; the same ptxas reports the registers per thread and the spill bytes of both.
With ``--library fla``, the same for flash-linear-attention's kernels that
tests/compat/fla.py's cases launch (fla picks each launch's configuration itself: on the
interpreter, an autotuned kernel's first configuration).
With ``--launches``, the launches a GPU recorded (bench/launches.py: the variants the
benchmark times, at its sizes) instead of those of the CPU test cases.
Writes registers.json and registers.md under --out and prints the summary last. This is
issue 19's first measure: where aotk needs more registers than Triton, or spills where
Triton does not, for the same kernel and configuration.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _launches():
    """{specialization: (kernel name, launch)} of every launch liger's cases make."""
    from tests.compat import liger
    ops = liger.load_ops(redirect=True)
    found, _ = liger.kernels(ops)
    by_function = {id(function): name for name, function in found.items()}
    launches = {}
    for _, recorded in liger.run_cases(ops).values():
        for launch in recorded:
            launches.setdefault(launch.specialization(),
                                (by_function[id(launch.kernel)], launch))
    return launches


def _fla_launches():
    """{specialization: (kernel name, launch)} of every launch the fla cases make."""
    from tests.compat import fla
    launches = {}
    for _, _, recorded in fla.run_cases(fla.load_ops(redirect=True)).values():
        for launch in recorded:
            module = launch.kernel.fn.__module__.removeprefix("fla.ops.")
            name = f"{module}.{launch.kernel.__name__}"
            launches.setdefault(launch.specialization(), (name, launch))
    return launches


def _triton_function(name: str):
    from tests.compat import liger
    module_name, _, function = name.rpartition(".")
    return getattr(liger.load_ops(redirect=False)[module_name], function)


def measure(targets, library: str = "liger", launches=None) -> list:
    """A row per (launch, target); ``launches``: [(kernel name, launch)], by default every
    launch of the library's CPU test cases."""
    import aotk
    from aotk.buildsys.triton_side import TritonSideError, triton_resources
    rows = []
    if launches is None:
        launches = list((_launches() if library == "liger" else _fla_launches()).values())
    for name, launch in sorted(launches, key=lambda item: item[0]):
        for target in targets:
            row = {"kernel": name, "signature": str(launch.signature),
                   "constants": {k: repr(v) for k, v in sorted(launch.constants.items())},
                   "num_warps": launch.num_warps, "num_stages": launch.num_stages,
                   "target": target}
            try:
                compiled = aotk.compile(launch.kernel, launch.signature, launch.constants,
                                        launch.num_warps, launch.num_stages, target=target)
                row["aotk"] = {"registers": compiled.metadata["registers"],
                               "spills": compiled.metadata["spills"],
                               "arch": compiled.metadata["arch"]}
            except Exception as exc:   # noqa: BLE001 - reported in the table
                row["aotk"] = {"error": f"{type(exc).__name__}"}
            try:
                if library == "liger":
                    function = _triton_function(name)
                else:
                    from tests.compat import fla
                    function = fla.triton_function(launch.kernel)
                row["triton"] = triton_resources(function, launch.signature,
                                                 launch.constants, launch.num_warps,
                                                 launch.num_stages, target)
            except TritonSideError as exc:
                row["triton"] = {"error": str(exc)}
            rows.append(row)
            print(_line(row), flush=True)
    return rows


def _line(row) -> str:
    def cell(side):
        facts = row[side]
        if "error" in facts:
            return facts["error"]
        return f"{facts['registers']} regs, {facts['spills']} B spilled"
    return f"{row['kernel']:<55} {row['target']:<6} aotk {cell('aotk'):<26} triton {cell('triton')}"


def summary(rows) -> list:
    both = [r for r in rows if "registers" in r["aotk"] and "registers" in r["triton"]]
    lines = [f"{len(rows)} builds, {len(both)} compiled by both"]
    for target in sorted({r["target"] for r in both}):
        mine = [r for r in both if r["target"] == target]
        more = [r for r in mine if r["aotk"]["registers"] > 1.1 * r["triton"]["registers"]]
        spill_only_aotk = [r for r in mine if r["aotk"]["spills"] and not r["triton"]["spills"]]
        ratio = 1.0
        for r in mine:
            ratio *= r["aotk"]["registers"] / max(1, r["triton"]["registers"])
        ratio **= 1 / max(1, len(mine))
        lines.append(f"{target}: geomean aotk/Triton registers {ratio:.2f}; {len(more)} of "
                     f"{len(mine)} builds use >10% more registers than Triton; "
                     f"{len(spill_only_aotk)} spill where Triton does not")
        for r in sorted(spill_only_aotk, key=lambda r: -r["aotk"]["spills"])[:10]:
            lines.append(f"  spills: {r['kernel']} ({r['aotk']['spills']} B, "
                         f"{r['aotk']['registers']} vs {r['triton']['registers']} regs)")
    return lines


LIBRARIES = {"liger": "liger-kernel", "fla": "flash-linear-attention (fla-core)"}


def recorded(paths) -> tuple:
    """([(kernel name, launch)], library) of files bench/launches.py wrote (one library),
    each variant once."""
    from bench.launches import recorded_launches
    paths = [paths] if isinstance(paths, (str, pathlib.Path)) else list(paths)
    libraries = {json.loads(pathlib.Path(p).read_text())["library"] for p in paths}
    if len(libraries) != 1:
        raise SystemExit(f"--launches: files of one library, got {sorted(libraries)}")
    library = libraries.pop()
    if library == "liger":
        from tests.compat import liger
        ops = liger.load_ops(redirect=True)
    else:
        from tests.compat import fla
        ops = fla.load_ops(redirect=True)
    found = {}
    for path in paths:
        for name, launch in recorded_launches(path, ops):
            found.setdefault(launch.specialization(), (name, launch))
    return list(found.values()), library


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="bench/results/registers")
    parser.add_argument("--targets", default="sm_90,sm_80")
    parser.add_argument("--library", choices=["liger", "fla"], default="liger")
    parser.add_argument("--launches", nargs="+", default=None, metavar="FILE.json",
                        help="the launches bench/launches.py recorded on a GPU (one library; "
                             "several files: the parts of one recording)")
    args = parser.parse_args(argv)
    import triton
    launches = None
    if args.launches:
        launches, args.library = recorded(args.launches)
    rows = measure(args.targets.split(","), args.library, launches)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "registers.json").write_text(json.dumps(
        {"triton": triton.__version__, "rows": rows}, indent=1, sort_keys=True))
    table = ["| kernel | target | aotk regs | aotk spills | Triton regs | Triton spills |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        a, t = r["aotk"], r["triton"]
        table.append(f"| {r['kernel']} | {r['target']} | {a.get('registers', a.get('error'))} | "
                     f"{a.get('spills', '')} | {t.get('registers', t.get('error'))} | "
                     f"{t.get('spills', '')} |")
    lines = summary(rows)
    source = f"launches recorded in {', '.join(args.launches)}" if args.launches else \
        "the launches of the CPU test cases"
    (out / "registers.md").write_text(
        f"# Registers and spills, {LIBRARIES[args.library]}, aotk vs Triton "
        f"{triton.__version__}\n\nOver {source}.\n\n"
        + "\n".join(f"- {line}" for line in lines) + "\n\n" + "\n".join(table) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
