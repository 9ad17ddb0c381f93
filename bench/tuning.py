"""Autotuning ahead of time, measured: the tutorial matmul tuned by `aotk tune` and built
into a library, against cuBLAS (torch.matmul) and Triton's own JIT autotune over the same
eight configs, in one run on one GPU.

    PYTHONPATH=. python3 bench/tuning.py [--out DIR]

1. `aotk tune examples/tuned/aotk.toml` (timed; the tuning file it writes is copied to --out);
2. `aotk build` of that manifest (no GPU needed; the winners plus the fallback);
3. at every tuned size (512^3 ... 8192^3, 3000^3, 4095^3, 5120x1000x3000): outputs checked
   against torch.matmul before any time is kept, then CUDA-event medians of queued launches
   for the library (its dispatch picks the config), Triton's @triton.autotune (tuned on its
   first call, not timed) and cuBLAS. Writes tuning.json and tuning.md, prints the table.
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

from timing import KERNELS, time_interleaved, triton_port  # noqa: E402

MANIFEST = ROOT / "examples" / "tuned" / "aotk.toml"


def _aotk(*args, env):
    return subprocess.run([sys.executable, "-m", "aotk", *args], check=True, text=True,
                          capture_output=True, env=env, cwd=ROOT)


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

    module = triton_port(KERNELS / "matmul.py")
    sys.path.insert(0, str(KERNELS))
    from matmul_autotuned import CONFIGS
    triton_tuned = triton.autotune(
        configs=[triton.Config(dict(c.kwargs), num_warps=c.num_warps, num_stages=c.num_stages)
                 for c in CONFIGS], key=["M", "N", "K"])(module.matmul_kernel)

    rows = []
    for point in load_manifest(MANIFEST).kernels[0].tune.points:
        m, n, k = point["M"], point["N"], point["K"]
        a = torch.randn((m, k), device="cuda", dtype=torch.float16)
        b = torch.randn((k, n), device="cuda", dtype=torch.float16)
        c_aotk, c_triton = (torch.empty((m, n), device="cuda", dtype=torch.float16)
                            for _ in range(2))
        strides = (a.stride(0), a.stride(1), b.stride(0), b.stride(1), n, 1)

        def run_aotk():
            library.matmul(a, b, c_aotk, m, n, k, *strides)

        def run_triton():
            triton_tuned[lambda meta: (triton.cdiv(m, meta["BLOCK_SIZE_M"]) *
                                       triton.cdiv(n, meta["BLOCK_SIZE_N"]),)](
                a, b, c_triton, m, n, k, *strides, ACTIVATION="")

        def run_cublas():
            torch.matmul(a, b)
        expected = torch.matmul(a, b)
        run_aotk()
        run_triton()    # Triton tunes here
        torch.cuda.synchronize()
        for name, got in (("aotk", c_aotk), ("triton", c_triton)):
            torch.testing.assert_close(got, expected, atol=0.5, rtol=0.05,
                                       msg=lambda text, name=name: f"{name} {point}: {text}")
        times = time_interleaved({"aotk": run_aotk, "triton": run_triton,
                                  "cublas": run_cublas})
        select = library.matmul.select(a, b, c_aotk, m, n, k, *strides)
        rows.append({"M": m, "N": n, "K": k, **{f"{name}_ms": t for name, t in times.items()},
                     "aotk_tflops": 2 * m * n * k / times["aotk"] / 1e9,
                     "vs_cublas": times["cublas"] / times["aotk"],
                     "vs_triton": times["triton"] / times["aotk"],
                     "aotk_variant": str(select),
                     "triton_config": str(triton_tuned.best_config)})
        print(json.dumps(rows[-1]), flush=True)
    document = {"gpu": torch.cuda.get_device_name(), "triton": triton.__version__,
                "torch": torch.__version__, "aotk_tune_s": tune_s, "rows": rows}
    (out / "tuning.json").write_text(json.dumps(document, indent=1))
    (out / "tuning.md").write_text(markdown(document))
    print(markdown(document))


def markdown(document) -> str:
    lines = [f"# The tutorial matmul tuned ahead of time, {document['gpu']}", "",
             f"`aotk tune` over 8 configs at {len(document['rows'])} sizes took "
             f"{document['aotk_tune_s']:.1f} s. Ratios > 1: aotk faster. Triton "
             f"{document['triton']} autotunes the same 8 configs (JIT).", "",
             "| M x N x K | aotk ms | TFLOP/s | Triton ms | cuBLAS ms | vs cuBLAS | vs Triton "
             "| aotk variant | Triton config |", "|---|---|---|---|---|---|---|---|---|"]
    for r in document["rows"]:
        lines.append(f"| {r['M']}x{r['N']}x{r['K']} | {r['aotk_ms']:.4f} | "
                     f"{r['aotk_tflops']:.1f} | {r['triton_ms']:.4f} | {r['cublas_ms']:.4f} | "
                     f"{r['vs_cublas']:.3f} | {r['vs_triton']:.3f} | {r['aotk_variant']} | "
                     f"{r['triton_config']} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
