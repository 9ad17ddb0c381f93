"""Launch overhead on the GPU: C dispatch vs raw cuLaunchKernel, Python lib.add vs Triton.

    PYTHONPATH=. python3 bench/launch.py
Builds the root aotk.toml, compiles bench/launch_overhead.c against it, and times host cost
per call (the kernel is small, so calls queue faster than the GPU drains them only briefly;
each figure is the best of several rounds).
"""
from __future__ import annotations

import importlib.util
import json
import os
import pathlib
import subprocess
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from timing import KERNELS, ROOT, host_us, triton_port  # noqa: E402


def measure(library_path: pathlib.Path) -> dict:
    """Launch cost figures for the library at ``library_path`` (built from the root manifest)."""
    import torch

    import aotk
    out = library_path.parent
    lib = aotk.load(library_path)
    n = 1 << 20
    # The variant examples_add picks for aligned 2^20 elements: BLOCK=1024 aligned (index 2).
    assert lib.add.select(16, 32, 48, n) == "add[BLOCK=1024] aligned"
    fatbin = out / ".aotk" / "examples" / "examples_fatbin_2.fatbin"
    binary = out / "launch_overhead"
    cuda_home = os.environ.get("CUDA_HOME", "/usr/local/cuda")
    subprocess.run(["cc", "-O2", str(ROOT / "bench" / "launch_overhead.c"), "-I", str(out),
                    "-I", f"{cuda_home}/include", "-L", str(out), "-lexamples",
                    f"-Wl,-rpath,{out}", "-lcuda", "-o", str(binary)], check=True)
    c_result = subprocess.run([str(binary), str(fatbin), "add_kernel", "500"],
                              capture_output=True, text=True, check=True).stdout
    figures = dict(line.split() for line in c_result.strip().splitlines())
    small = 1024   # one program: the GPU keeps up, the host is what gets timed
    x = torch.randn(small, device="cuda")
    y = torch.randn(small, device="cuda")
    o = torch.empty(small, device="cuda")
    rows = {"c_raw_us": float(figures["raw_us"]), "c_aotk_us": float(figures["aotk_us"]),
            "c_ratio": float(figures["ratio"]),
            "python_lib_add_us": host_us(lambda: lib.add(x, y, o, small))}
    torch.cuda.synchronize()
    torch.testing.assert_close(o, x + y)
    if importlib.util.find_spec("triton"):
        add = triton_port(KERNELS / "add.py").add_kernel
        o.zero_()
        rows["python_triton_jit_us"] = host_us(
            lambda: add[(1,)](x, y, o, small, BLOCK=1024))
        torch.cuda.synchronize()
        torch.testing.assert_close(o, x + y)
    return rows


def main():
    import aotk
    out = pathlib.Path(tempfile.mkdtemp(prefix="aotk-bench-"))
    print(json.dumps(measure(aotk.build(ROOT / "aotk.toml", out_dir=out).library), indent=2))


if __name__ == "__main__":
    main()
