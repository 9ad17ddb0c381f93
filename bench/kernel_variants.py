"""One liger kernel's code variants timed side by side: cubins built here, launched there.

    python bench/kernel_variants.py build CASE KERNEL --rows R --cols V --warps W
        [--constexpr NAME=VALUE ...] [--hint PARAM=16|1 ...] [--label L] [--triton] --out DIR
    python3 bench/kernel_variants.py time DIR...          (on the GPU: needs cupy)

``build`` (no GPU): the launch liger's own host code makes in the compatibility case CASE
(tests/compat/liger_cases_*.py, run on the interpreter) for the kernel whose name contains
KERNEL, with the constexprs, alignment hints and warps of the bench shape put over the test
shape's, compiled by this tree's aotk (``<label>.cubin``) and, with ``--triton``, by the
installed Triton (``triton.cubin``, its PTX through the same ptxas); ``spec.json`` says how
to launch them. Build from several trees (or with different options) into one DIR, one
label each, to compare code variants of one kernel.

``time``: every cubin of each DIR launched from one process with the same grid (one program
per row), block, dynamic shared memory and arguments: pointer parameters get buffers of
rows x cols elements (floats normal, scaled by 2; integers 0), ``*stride`` parameters the
row length (1 where hinted 1), ``n_cols`` the row length, ``eps`` 1e-10, other integers the
row length or what ``INTEGERS`` says, other floats 1.0; Triton's cubins without the integers
its launch specializes to 1 and with its two scratch pointers. Medians of CUDA-event-timed
launches; the buffers after one launch of each variant must match the first variant's.

This is what separates a code difference from everything else a whole-op benchmark
(bench/liger.py) includes, and it takes seconds of GPU time.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import re
import statistics
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

INTEGERS = {"n_non_ignore": "rows", "sum_non_ignore_weight": "rows", "ignore_index": -100,
            "vocab_start": 0}
FLOATS = {"eps": 1e-10, "label_smoothing": 0.0, "lse_square_scale": 0.0}


def _pairs(items, convert=int) -> dict:
    pairs = {}
    for item in items or ():
        name, _, value = item.partition("=")
        if not value:
            raise SystemExit(f"{item!r}: expected NAME=VALUE")
        pairs[name] = convert(value)
    return pairs


def _launch(case_name: str, kernel: str):
    """The first launch of a kernel whose name contains ``kernel`` in liger's case."""
    import aotk
    from tests.compat import liger
    ops = liger.load_ops(redirect=True)
    cases = [c for c in liger.cases() if c.name == case_name]
    if not cases:
        raise SystemExit(f"no liger case named {case_name!r}")
    with liger.interpreting(), aotk.record_launches() as launches:
        cases[0].run(ops, cases[0].make_inputs("cpu", False))
    found = [launch for launch in launches if kernel in launch.kernel.name]
    if not found:
        names = sorted({launch.kernel.name for launch in launches})
        raise SystemExit(f"case {case_name} launches no kernel named like {kernel!r}: {names}")
    return ops, found[0]


def build(args) -> None:
    import aotk
    from aotk.ir.signature import Signature
    from aotk.toolchain.ptxas import find_ptxas
    ops, launch = _launch(args.case, args.kernel)
    constants = {**launch.constants, **_pairs(args.constexpr)}
    hints = _pairs(args.hint)
    signature = Signature(tuple(p._replace(hint=hints.get(p.name, p.hint))
                                for p in launch.signature.parameters))
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    ptxas = find_ptxas().path
    compiled = aotk.compile(launch.kernel, signature, constants, args.warps,
                            launch.num_stages, target="sm_90")
    (out / f"{args.label}.ptx").write_text(compiled.ptx)
    subprocess.run([ptxas, "-arch=sm_90", str(out / f"{args.label}.ptx"), "-o",
                    str(out / f"{args.label}.cubin")], check=True)
    spec = {"kernel": launch.kernel.name, "rows": args.rows, "cols": args.cols,
            "warps": args.warps, "shared": 0,
            "params": [[p.name, p.type.short, p.hint] for p in signature.parameters]}
    print(f"{args.label}: {compiled.metadata['registers']} registers, "
          f"{compiled.metadata['spills']} B spilled")
    if args.triton:
        from aotk.buildsys.triton_side import triton_compile
        from tests.compat import liger
        found, _ = liger.kernels(ops)
        name = next(n for n, f in found.items() if f is launch.kernel)
        module, _, function = name.rpartition(".")
        triton_ops = liger.load_ops(redirect=False)
        kernel = triton_compile(getattr(triton_ops[module], function), signature, constants,
                                args.warps, launch.num_stages, "sm_90")
        # sm_90a's PTX is sm_90's here (no wgmma or setmaxnreg in a row kernel)
        (out / "triton.ptx").write_text(kernel.asm["ptx"].replace(".target sm_90a",
                                                                  ".target sm_90"))
        subprocess.run([ptxas, "-arch=sm_90", str(out / "triton.ptx"), "-o",
                        str(out / "triton.cubin")], check=True)
        spec["shared"] = kernel.metadata.shared
    spec_path = out / "spec.json"
    if spec_path.exists():
        spec["shared"] = max(spec["shared"], json.loads(spec_path.read_text())["shared"])
    spec_path.write_text(json.dumps(spec, indent=1) + "\n")


def launch_arguments(spec: dict, buffers: dict, triton: bool) -> tuple:
    """The arguments of one launch, in the kernel's parameter order (the module docstring
    says which value each kind of parameter gets); ``buffers``: name -> device array."""
    import numpy as np
    rows, cols = spec["rows"], spec["cols"]
    values = []
    for name, type_, hint in spec["params"]:
        if type_.startswith("*"):
            values.append(buffers[name])
        elif triton and hint == 1:
            continue   # Triton specializes an integer that is 1 away
        elif type_.startswith(("i", "u")):
            value = 1 if hint == 1 else INTEGERS.get(name, cols)
            values.append(np.int32(rows if value == "rows" else value))
        else:
            values.append(np.float32(FLOATS.get(name, 1.0)))
    if triton:
        values += [np.uint64(0), np.uint64(0)]   # global and profile scratch: none used
    return tuple(values)


def parameter_count(ptx: str) -> int:
    """How many parameters the PTX's kernel entry declares."""
    entry = ptx[ptx.index(".entry"):]
    return len(re.findall(r"\.param \.", entry[:entry.index(")")]))


def time_folder(folder: pathlib.Path) -> dict:
    import cupy as cp
    spec = json.loads((folder / "spec.json").read_text())
    rows, cols = spec["rows"], spec["cols"]
    random = cp.random.default_rng(0)
    buffers = {}
    for name, type_, _ in spec["params"]:
        if type_.startswith("*"):
            dtype = {"fp32": cp.float32, "fp16": cp.float16, "i64": cp.int64,
                     "i32": cp.int32}[type_[1:]]
            buffers[name] = (random.standard_normal(rows * cols, dtype=cp.float32) * 2
                             ).astype(dtype) if dtype in (cp.float32, cp.float16) \
                else cp.zeros(rows * cols, dtype=dtype)
    initial = {name: buffer.copy() for name, buffer in buffers.items()}
    times, reference = {}, None
    for cubin in sorted(folder.glob("*.cubin")):
        triton = cubin.stem == "triton"
        arguments = launch_arguments(spec, buffers, triton)
        expected = parameter_count(cubin.with_suffix(".ptx").read_text())
        if expected != len(arguments):
            raise SystemExit(f"{cubin}: {expected} parameters, {len(arguments)} arguments")
        function = cp.RawModule(path=str(cubin)).get_function(spec["kernel"])

        def launch():
            function((rows,), (32 * spec["warps"],), arguments,
                     shared_mem=max(spec["shared"], 2048))
        for name in buffers:
            buffers[name][...] = initial[name]
        launch()
        outputs = [buffers[name].copy() for name in buffers]
        if reference is None:
            reference = outputs
        elif any(not _close(a, b) for a, b in zip(outputs, reference)):
            raise SystemExit(f"{cubin}: its outputs differ from the first variant's")
        for _ in range(5):
            launch()
        samples = []
        for _ in range(25):
            start, end = cp.cuda.Event(), cp.cuda.Event()
            start.record()
            for _ in range(4):
                launch()
            end.record()
            end.synchronize()
            samples.append(cp.cuda.get_elapsed_time(start, end) * 1000 / 4)
        times[cubin.stem] = statistics.median(samples)
    return times


def _close(a, b) -> bool:
    import cupy as cp
    if a.dtype.kind == "f":
        return bool(cp.allclose(a, b, rtol=1e-4, atol=1e-5, equal_nan=True))
    return bool((a == b).all())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    make = commands.add_parser("build")
    make.add_argument("case")
    make.add_argument("kernel")
    make.add_argument("--rows", type=int, required=True)
    make.add_argument("--cols", type=int, required=True)
    make.add_argument("--warps", type=int, required=True)
    make.add_argument("--constexpr", action="append")
    make.add_argument("--hint", action="append")
    make.add_argument("--label", default="aotk")
    make.add_argument("--triton", action="store_true")
    make.add_argument("--out", required=True)
    timing = commands.add_parser("time")
    timing.add_argument("folders", nargs="+")
    args = parser.parse_args()
    if args.command == "build":
        build(args)
        return
    for folder in map(pathlib.Path, args.folders):
        times = time_folder(folder)
        triton = times.get("triton")
        print(f"{folder.name}: " + ", ".join(
            f"{label} {us:.1f} us" + (f" ({us / triton:.2f}x Triton)" if triton and
                                      label != "triton" else "")
            for label, us in times.items()), flush=True)


if __name__ == "__main__":
    main()
