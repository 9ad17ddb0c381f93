"""Autotuning ahead of time, measured: examples/tuned's three matmuls tuned by `aotk tune` and
built into a library, against cuBLAS (torch.matmul) and Triton's own JIT autotune, in one run
on one GPU: the tutorial matmul over its eight configs (Triton autotunes the same eight);
the descriptor matmul of examples/kernels/matmul_descriptor_autotuned.py over its six
(Triton autotunes the four that run programs alone: its num_ctas=2 splits a program over a
cluster instead, and WARP_SPECIALIZE stays off on its side); and the descriptor matmul with
its last wave split along K (matmul_descriptor_tail_autotuned.py: alone, producer warp,
pairs; Triton runs the first).

    PYTHONPATH=. python3 bench/tuning.py [--out DIR]

1. `aotk tune examples/tuned/aotk.toml` (timed; the tuning file it writes is copied to --out);
2. `aotk build` of that manifest (no GPU needed; the winners plus the fallback);
3. for each kernel, at every tuned size (512^3 ... 8192^3, 3000^3, 4095^3, 5120x1000x3000):
   outputs checked against torch.matmul before any time is kept, then CUDA-event medians of
   queued launches, the implementations taking turns, for the library (its dispatch picks
   the config), Triton's @triton.autotune (tuned on its first call, not timed) and cuBLAS.
   Writes tuning.json and tuning.md, prints the table.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from bench.harness import write_report  # noqa: E402

from timing import KERNELS, time_interleaved, triton_port  # noqa: E402

MANIFEST = ROOT / "examples" / "tuned" / "aotk.toml"


def _aotk(*args, env):
    """Runs `aotk ARGS`; on failure its error output ends the bench (not a bare exit code)."""
    done = subprocess.run([sys.executable, "-m", "aotk", *args], text=True,
                          capture_output=True, env=env, cwd=ROOT)
    if done.returncode:
        sys.exit(f"aotk {' '.join(args)} failed ({done.returncode}):\n{done.stdout}"
                 f"{done.stderr}")
    return done


def _tutorial(library, triton):
    """(aotk call, Triton call) for the tutorial matmul: its library entry, and Triton's
    @triton.autotune over the same eight configs."""
    module = triton_port(KERNELS / "matmul.py")
    from matmul_autotuned import CONFIGS
    tuned = triton.autotune(
        configs=[triton.Config(dict(c.kwargs), num_warps=c.num_warps, num_stages=c.num_stages)
                 for c in CONFIGS], key=["M", "N", "K"])(module.matmul_kernel)

    def run_aotk(a, b, c, m, n, k):
        library.matmul(a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                       n, 1)

    def run_triton(a, b, c, m, n, k):
        tuned[lambda meta: (triton.cdiv(m, meta["BLOCK_SIZE_M"]) *
                            triton.cdiv(n, meta["BLOCK_SIZE_N"]),)](
            a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), n, 1,
            ACTIVATION="")
    return run_aotk, run_triton, tuned, library.matmul.select, lambda m, n, k: True


def _descriptor(library, triton):
    """(aotk call, Triton call) for the descriptor matmul: its library entry, and Triton's
    @triton.autotune over the configs that run programs alone (its device-side descriptors
    in scratch memory from the allocator set here)."""
    import torch
    module = triton_port(KERNELS / "matmul_descriptor_split.py")
    from matmul_descriptor_autotuned import CONFIGS
    triton.set_allocator(lambda size, alignment, stream:
                         torch.empty(size, device="cuda", dtype=torch.int8))
    tuned = triton.autotune(
        configs=[triton.Config({**c.kwargs, "WARP_SPECIALIZE": False}, num_warps=c.num_warps,
                               num_stages=c.num_stages)
                 for c in CONFIGS if c.num_ctas == 1], key=["M", "N", "K"])(
        module.matmul_descriptor_split_kernel)

    def run_aotk(a, b, c, m, n, k):
        library.matmul_descriptor(a, b, c, m, n, k, k, n, n)

    def run_triton(a, b, c, m, n, k):
        tuned[lambda meta: (triton.cdiv(m, meta["BLOCK_SIZE_M"]) *
                            triton.cdiv(n, meta["BLOCK_N1"] + meta["BLOCK_N2"]),)](
            a, b, c, m, n, k, k, n, n)

    def triton_runs(m, n, k):
        # Triton's device-side descriptors need 16-byte row strides, which Triton does not
        # check: at 4095 its results are wrong (98 % of the elements, measured); not timed.
        return k % 8 == 0 and n % 8 == 0
    return run_aotk, run_triton, tuned, library.matmul_descriptor.select, triton_runs


def _tail(library, triton):
    """(aotk call, Triton call) for the descriptor matmul with its last wave split along K:
    its library entry, and Triton's @triton.autotune over the config that runs programs
    alone without a producer warp; both get the wave, splits and buffers of tail_plan."""
    import torch
    module = triton_port(KERNELS / "matmul_descriptor_tail.py")
    from matmul_descriptor_tail import tail_plan
    from matmul_descriptor_tail_autotuned import CONFIGS
    wave = torch.cuda.get_device_properties(0).multi_processor_count
    triton.set_allocator(lambda size, alignment, stream:
                         torch.empty(size, device="cuda", dtype=torch.int8))
    tuned = triton.autotune(
        configs=[triton.Config(dict(c.kwargs), num_warps=c.num_warps, num_stages=c.num_stages)
                 for c in CONFIGS if c.num_ctas == 1 and not c.kwargs["WARP_SPECIALIZE"]],
        key=["M", "N", "K"], reset_to_zero=["counters"])(module.matmul_descriptor_tail_kernel)
    buffers = {}

    def plan(m, n, k):
        if (m, n, k) not in buffers:
            p = tail_plan(m, n, k, wave)
            buffers[m, n, k] = (p, torch.empty(p["workspace"], device="cuda"),
                                torch.zeros(p["counters"], device="cuda", dtype=torch.int32))
        return buffers[m, n, k]

    def run_aotk(a, b, c, m, n, k):
        p, workspace, counters = plan(m, n, k)
        library.matmul_tail(a, b, c, workspace, counters, m, n, k, k, n, n, wave, p["splits"])

    def run_triton(a, b, c, m, n, k):
        p, workspace, counters = plan(m, n, k)
        tuned[(p["grid"],)](a, b, c, workspace, counters, m, n, k, k, n, n, wave, p["splits"])

    def select(a, b, c, m, n, k, *strides):
        p, workspace, counters = plan(m, n, k)
        return library.matmul_tail.select(a, b, c, workspace, counters, m, n, k, *strides,
                                          wave, p["splits"])

    def triton_runs(m, n, k):
        return k % 8 == 0 and n % 8 == 0    # as for the descriptor matmul
    return run_aotk, run_triton, tuned, select, triton_runs


SIDES = {"matmul": _tutorial, "matmul_descriptor": _descriptor, "matmul_tail": _tail}


def _measure(name, side, point) -> dict:
    """One row: both sides' outputs checked, then the three timed in turns (Triton only
    where it can run the kernel: its times are None elsewhere)."""
    import torch
    run_aotk, run_triton, tuned, select, triton_runs = side
    m, n, k = point["M"], point["N"], point["K"]
    a = torch.randn((m, k), device="cuda", dtype=torch.float16)
    b = torch.randn((k, n), device="cuda", dtype=torch.float16)
    c_aotk, c_triton = (torch.empty((m, n), device="cuda", dtype=torch.float16)
                        for _ in range(2))
    expected = torch.matmul(a, b)
    calls = {"aotk": (lambda: run_aotk(a, b, c_aotk, m, n, k), c_aotk),
             "triton": (lambda: run_triton(a, b, c_triton, m, n, k), c_triton)}
    if not triton_runs(m, n, k):
        del calls["triton"]
    for side_name, (call, got) in calls.items():
        call()    # Triton tunes here
        torch.cuda.synchronize()
        torch.testing.assert_close(got, expected, atol=0.5, rtol=0.05,
                                   msg=lambda text, s=side_name: f"{name} {s} {point}: {text}")
    times = time_interleaved({**{side_name: call for side_name, (call, _) in calls.items()},
                              "cublas": lambda: torch.matmul(a, b)})
    times.setdefault("triton", None)
    return {"kernel": name, "M": m, "N": n, "K": k,
            **{f"{side_name}_ms": t for side_name, t in times.items()},
            "aotk_tflops": 2 * m * n * k / times["aotk"] / 1e9,
            "vs_cublas": times["cublas"] / times["aotk"],
            "vs_triton": times["triton"] and times["triton"] / times["aotk"],
            "aotk_variant": str(select(a, b, c_aotk, m, n, k, *_strides(name, a, b, n))),
            "triton_config": str(tuned.best_config) if "triton" in calls else
            "not run: strides not 16-byte multiples"}


def _strides(name, a, b, n) -> tuple:
    """The scalar arguments after (M, N, K) of each kernel's library entry."""
    if name == "matmul":
        return (a.stride(0), a.stride(1), b.stride(0), b.stride(1), n, 1)
    return (a.stride(0), b.stride(0), n)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "bench" / "results"))
    args = parser.parse_args(argv)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    import torch
    import triton

    import aotk
    from aotk.buildsys.manifest import load_manifest
    work = pathlib.Path(tempfile.mkdtemp(prefix="aotk-tuning-"))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "AOTK_CACHE_DIR": str(work / "cache")}
    started = time.perf_counter()
    tuned = _aotk("tune", str(MANIFEST), env=env)
    tune_s = time.perf_counter() - started
    print(tuned.stdout, flush=True)
    tuning_file = MANIFEST.with_name("aotk.tuning.json")
    shutil.copy(tuning_file, out / "aotk.tuning.json")
    _aotk("build", str(MANIFEST), "-o", str(work / "lib"), env=env)
    library = aotk.load(work / "lib" / "libtuned.so")

    sys.path.insert(0, str(KERNELS))
    rows = []
    for kernel in load_manifest(MANIFEST).kernels:
        side = SIDES[kernel.name](library, triton)
        for point in kernel.tune.points:
            rows.append(_measure(kernel.name, side, point))
            print(json.dumps(rows[-1]), flush=True)
    document = {"gpu": torch.cuda.get_device_name(), "triton": triton.__version__,
                "torch": torch.__version__, "aotk_tune_s": tune_s, "rows": rows}
    write_report(out, "tuning", document, markdown(document))


def _figure(value, digits=4) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def markdown(document) -> str:
    lines = [f"# examples/tuned's matmuls tuned ahead of time, {document['gpu']}", "",
             f"`aotk tune` over the kernels' configs at their sizes took "
             f"{document['aotk_tune_s']:.1f} s. Ratios > 1: aotk faster. Triton "
             f"{document['triton']} autotunes the tutorial matmul's 8 configs and the "
             "descriptor matmul's 4 that run programs alone, and the split-tail matmul's plain "
             "config (JIT).", "",
             "| kernel | M x N x K | aotk ms | TFLOP/s | Triton ms | cuBLAS ms | vs cuBLAS "
             "| vs Triton | aotk variant | Triton config |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in document["rows"]:
        lines.append(f"| {r.get('kernel', 'matmul')} | {r['M']}x{r['N']}x{r['K']} | "
                     f"{r['aotk_ms']:.4f} | {r['aotk_tflops']:.1f} | {_figure(r['triton_ms'])} | "
                     f"{r['cublas_ms']:.4f} | {r['vs_cublas']:.3f} | "
                     f"{_figure(r['vs_triton'], 3)} | "
                     f"{r['aotk_variant']} | {r['triton_config']} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
