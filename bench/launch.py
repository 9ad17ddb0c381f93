"""Launch overhead on the GPU: C dispatch vs raw cuLaunchKernel, Python lib.add vs Triton.

    PYTHONPATH=. python3 bench/launch.py
Builds the root aotk.toml, compiles bench/launch_overhead.c against it, and times host cost
per call; the JIT launches of aotk and Triton side by side, for the 4-parameter add kernel
and a 31-parameter one (bench/launch_kernels.py) (the kernel is small, so calls queue faster than the GPU drains them only briefly;
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

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
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
    add = triton_port(KERNELS / "add.py", use_triton=False).add_kernel
    o.zero_()
    rows["python_aotk_jit_us"] = host_us(lambda: add[(1,)](x, y, o, small, BLOCK=1024))
    torch.cuda.synchronize()
    torch.testing.assert_close(o, x + y)
    many = triton_port(HERE / "launch_kernels.py", use_triton=False).many_arguments_kernel
    rows["python_aotk_jit_31_arguments_us"] = host_us(lambda: _many(many, x, o))
    torch.cuda.synchronize()
    torch.testing.assert_close(o[:1], x[:1] * 1e-3 + 24 + 1 + 4096 + 24)
    if importlib.util.find_spec("triton"):
        add = triton_port(KERNELS / "add.py").add_kernel
        o.zero_()
        rows["python_triton_jit_us"] = host_us(
            lambda: add[(1,)](x, y, o, small, BLOCK=1024))
        torch.cuda.synchronize()
        torch.testing.assert_close(o, x + y)
        many = triton_port(HERE / "launch_kernels.py").many_arguments_kernel
        rows["python_triton_jit_31_arguments_us"] = host_us(lambda: _many(many, x, o))
        rows["jit_ratio_add"] = rows["python_triton_jit_us"] / rows["python_aotk_jit_us"]
        rows["jit_ratio_31_arguments"] = rows["python_triton_jit_31_arguments_us"] / \
            rows["python_aotk_jit_31_arguments_us"]
    return rows


def _many(kernel, x, o):
    """One launch of launch_kernels.many_arguments_kernel, keywords as liger passes them."""
    kernel[(1,)](x, x, o, x, x, x, N=4096, HC=4, M=24, s0=24, s1=1, s2=4, s3=1, s4=4, s5=1,
                 s6=16, s7=4, s8=1, s9=0, s10=0, s11=0, s12=0, s13=1, g_ptr=x, h_ptr=x,
                 i_ptr=x, pre_eps=1e-3, sinkhorn_eps=1e-6, post_mult=2.0, TMAX=20,
                 STORE_HIST=False, num_warps=4)


def main():
    import aotk
    out = pathlib.Path(tempfile.mkdtemp(prefix="aotk-bench-"))
    print(json.dumps(measure(aotk.build(ROOT / "aotk.toml", out_dir=out).library), indent=2))


if __name__ == "__main__":
    main()
