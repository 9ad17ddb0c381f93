"""The PTX of every kernel the codegen tests compile, hashed: has a change kept it byte-identical?

    PYTHONPATH=. python bench/ptx_hashes.py --out /tmp/before.txt
    ... change the compiler ...
    PYTHONPATH=. python bench/ptx_hashes.py --out /tmp/after.txt --compare /tmp/before.txt

Runs the test files below under pytest, then compiles bench/compile_speed.py's cases for
sm_80 and sm_90 with num_stages 1 and 3, recording one line per compile that reaches LLVM
and ptxas: ``kernel arch sha256(ptx)[:16]``, in compile order (the tests run in a fixed
order, so two runs of the same compiler give the same file). With --compare, prints the
lines that differ and exits 1 if any do; the PTX of each hash is kept under OUT.d/ for
diffing. A change meant to speed the compiler up without changing its code must leave the
file as it was (a new test adds its own lines).
"""
from __future__ import annotations

import argparse
import difflib
import hashlib
import os
import pathlib
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent

TEST_FILES = [
    "test_codegen.py", "test_codegen_as_triton.py", "test_golden.py", "test_inline_asm.py",
    "test_sm75.py", "test_tma.py", "test_attention.py", "test_mma_reductions.py",
    "test_float8.py", "test_dot_scaled.py", "test_tile_layouts.py", "test_swizzle.py",
    "test_pipeline_shapes.py", "test_pipeline_drain.py", "test_pipeline_budget.py",
    "test_load_layouts.py", "test_reshape_layouts.py", "test_libdevice.py",
    "test_descriptors.py", "test_block_pointers.py", "test_atomics.py",
]


def record_to(path: str) -> None:
    """From now on, every compile of this process that runs LLVM and ptxas appends its
    line to ``path`` and keeps its PTX in ``path``.d/."""
    from aotk import compiler
    store = pathlib.Path(path + ".d")
    store.mkdir(parents=True, exist_ok=True)
    machine_code = compiler._machine_code

    def recorded(llvm_text, arch, name, *args, **kwargs):
        found = machine_code(llvm_text, arch, name, *args, **kwargs)
        ptx = found[1]
        digest = hashlib.sha256(ptx.encode()).hexdigest()[:16]
        (store / f"{digest}.ptx").write_text(ptx)
        with open(path, "a") as f:
            f.write(f"{name} {arch} {digest}\n")
        return found

    compiler._machine_code = recorded


def pytest_configure(config):
    """As a pytest plugin (``-p bench.ptx_hashes``): records to $AOTK_PTX_HASHES."""
    record_to(os.environ["AOTK_PTX_HASHES"])


def _compile_bench_cases() -> None:
    sys.path.insert(0, str(ROOT / "bench"))
    import aotk
    import compile_speed
    for target in ("sm_80", "sm_90"):
        for file, function, signature, constants, num_warps in compile_speed.CASES:
            for num_stages in (1, 3):
                kernel = compile_speed._load(file, function, False)
                aotk.compile(kernel, signature, constants=constants, num_warps=num_warps,
                             num_stages=num_stages, target=target)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="the hash file to write")
    parser.add_argument("--compare", help="a hash file written before the change")
    parser.add_argument("--bench-cases-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.bench_cases_only:   # the child process that compiles the bench cases
        record_to(args.out)
        _compile_bench_cases()
        return 0
    out = pathlib.Path(args.out)
    out.unlink(missing_ok=True)
    env = {**os.environ, "AOTK_PTX_HASHES": str(out),
           "AOTK_CACHE_DIR": tempfile.mkdtemp(prefix="aotk-ptx-hashes-"),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT),
                                                       os.environ.get("PYTHONPATH")]))}
    tests = [str(ROOT / "tests" / name) for name in TEST_FILES]
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                    "-p", "bench.ptx_hashes", *tests], cwd=ROOT, env=env, check=True)
    subprocess.run([sys.executable, __file__, "--out", str(out), "--bench-cases-only"],
                   cwd=ROOT, env=env, check=True)
    lines = out.read_text().splitlines()
    print(f"{len(lines)} compiles, {len(set(lines))} distinct: {out}")
    if not args.compare:
        return 0
    before = pathlib.Path(args.compare).read_text().splitlines()
    changed = [line for line in difflib.unified_diff(before, lines, lineterm="", n=0)
               if line[:1] in "+-" and line[:3] not in ("+++", "---")]
    print("\n".join(changed) or "identical")
    return 1 if changed else 0


if __name__ == "__main__":
    sys.exit(main())
