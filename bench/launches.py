"""The variants a kernel library's benchmark times, recorded on the GPU for bench/registers.py.

    PYTHONPATH=. python3 bench/launches.py --library liger|fla [--cases NAME,...]
                                           [--part K/N] --out FILE.json

For each case at the size bench/liger.py (or bench/linear_attention.py) times it, the
library's own host code runs under aotk twice on the GPU: the first call tunes its autotuned
kernels, the second is recorded (``aotk.record_launches``): the specializations the
benchmark's timed calls run, the chosen configs only. Writes one JSON document:
``{"library", "gpu", "launches": [...]}``, each launch once, with the cases that make it.
A launch is the kernel's name as bench/registers.py names it, its signature, constexprs,
num_warps and num_stages, readable, and the same signature and constexprs pickled
(``spec``): what ``aotk.compile`` takes back exactly (descriptor layouts, dtypes).

Then, without a GPU: ``python bench/registers.py --launches FILE.json`` compiles each with
aotk and Triton and compares registers and spills: issue 19's measure over the variants the
benchmark runs, where the launches of the CPU test cases are those of toy sizes.
"""
from __future__ import annotations

import argparse
import base64
import json
import pathlib
import pickle
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def launch_record(name: str, launch) -> dict:
    """One launch as the JSON document holds it."""
    return {"kernel": name, "signature": str(launch.signature),
            "constants": {k: repr(v) for k, v in sorted(launch.constants.items())},
            "num_warps": launch.num_warps, "num_stages": launch.num_stages,
            "spec": base64.b64encode(pickle.dumps((launch.signature, launch.constants)))
            .decode("ascii")}


def library_kernels(library: str, ops: dict) -> dict:
    """{name in bench/registers.py's tables: aotk kernel} of ``library``'s loaded ``ops``."""
    if library == "liger":
        from tests.compat import liger
        found, _ = liger.kernels(ops)
        return dict(found)
    from aotk.autotune import _Wrapper
    from aotk.jit import JITFunction
    kernels = {}
    for module in ops["modules"].values():
        for value in vars(module).values():
            while isinstance(value, _Wrapper):   # heuristics(autotune(jit)) -> the JIT
                value = value.fn
            if isinstance(value, JITFunction):
                module_name = value.fn.__module__.removeprefix("fla.ops.")
                kernels[f"{module_name}.{value.__name__}"] = value
    return kernels


def recorded_launches(path, ops: dict) -> list:
    """[(kernel name, aotk.launch.recording.Launch)] of a document this script wrote, the
    kernels found among ``ops`` (the library loaded through the redirection)."""
    from aotk.launch.recording import Launch
    document = json.loads(pathlib.Path(path).read_text())
    kernels = library_kernels(document["library"], ops)
    launches = []
    for record in document["launches"]:
        kernel = kernels.get(record["kernel"])
        if kernel is None:
            raise SystemExit(f"{path}: kernel {record['kernel']!r} is not in the installed "
                             f"{document['library']} (recorded with another version?)")
        signature, constants = pickle.loads(base64.b64decode(record["spec"]))
        launches.append((record["kernel"], Launch(kernel, (), signature, constants,
                                                  record["num_warps"], record["num_stages"])))
    return launches


def _cases(library: str, device: str):
    """[(case name, make: () -> run)] and the aotk ops: on "cuda" at the sizes the
    benchmark times, on "cpu" (the interpreter) at the test sizes."""
    import torch
    bench = device == "cuda"
    if library == "liger":
        from tests.compat import liger
        ops = liger.load_ops(redirect=True)

        def runner(case):
            inputs = case.make_inputs(device, bench)
            return lambda: case.run(ops, inputs)
        return [(case.name, lambda case=case: runner(case)) for case in liger.cases()], ops
    from tests.compat import fla
    ops = fla.load_ops(True)

    def fla_runner(case):
        inputs = fla.make_inputs(device, fla.BENCH_SIZE, torch.bfloat16) if bench else \
            fla.make_inputs(device)
        return lambda: case.run(ops, inputs)
    return [(case.name, lambda case=case: fla_runner(case)) for case in fla.cases()], ops


def record(library: str, wanted: set = frozenset(), part: str | None = None,
           device: str = "cuda", out: pathlib.Path | None = None) -> dict:
    """The document of ``library``'s cases (``wanted``, or those of ``part``), recorded on
    ``device``; written to ``out`` after each case, if given (a run cut short keeps what it
    recorded)."""
    import aotk
    import torch
    from bench.liger import part_of
    cases, ops = _cases(library, device)
    synchronize = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    if part:
        chosen = part_of([name for name, _ in cases], part)
        cases = [(name, make) for name, make in cases if name in chosen]
    names = {id(kernel): name for name, kernel in library_kernels(library, ops).items()}
    records: dict = {}
    document = {"library": library,
                "gpu": torch.cuda.get_device_name() if device == "cuda" else "interpreter",
                "launches": []}
    for case_name, make in cases:
        if wanted and case_name not in wanted:
            continue
        try:
            run = make()
            run()   # tunes
            synchronize()
            with aotk.record_launches() as launches:
                run()
            synchronize()
        except Exception as exc:   # noqa: BLE001 - reported, the other cases go on
            print(f"{case_name}: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}",
                  flush=True)
            continue
        for launch in launches:
            name = names.get(id(launch.kernel), launch.kernel.name)
            entry = records.setdefault(launch.specialization(), launch_record(name, launch))
            entry.setdefault("cases", [])
            if case_name not in entry["cases"]:
                entry["cases"].append(case_name)
        print(f"{case_name}: {len({launch.specialization() for launch in launches})} variants",
              flush=True)
        document["launches"] = list(records.values())
        if out is not None:
            out.write_text(json.dumps(document, indent=1))
    return document


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--library", choices=["liger", "fla"], required=True)
    parser.add_argument("--cases", default="")
    parser.add_argument("--part", default=None, metavar="K/N")
    parser.add_argument("--out", required=True)
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda",
                        help="cpu: the test sizes on the interpreter (AOTK_INTERPRET=1)")
    args = parser.parse_args(argv)
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    document = record(args.library, set(filter(None, args.cases.split(","))), args.part,
                      args.device, out)
    out.write_text(json.dumps(document, indent=1))
    print(f"{len(document['launches'])} variants -> {out}")


if __name__ == "__main__":
    main()
