"""fla's kkt solve kernel alone, aotk against Triton, at fla's bench size (GPU).

    PYTHONPATH=. python3 bench/fla_kkt_solve.py [--warps 1,2,4] [--out DIR]

``chunk_gated_delta_rule_fwd_kkt_solve_kernel`` of fla-core (its gated delta rule's chunked
forward: beta * K @ K^T per 64-token chunk, then (I + A)^-1 by forward substitution) with
the inputs of ``tests.compat.fla.BENCH_SIZE`` (B=4, T=2048, H=8, K=128, bf16 keys; fp32
gates and betas), BK=64 and fla's Hopper tf32 solve dots, at each number of warps: fla's
autotuner picks 1 at this size, the others show how each compiler scales. Both sides'
kernels are fla's own source (loaded twice, ``tests.compat.fla``); their outputs are
compared first, then each is launched alone, the sides taking turns, and its GPU time read
from the torch profiler (``sides.kernel_gpu_us_in_turns``). This is what
bench/linear_attention.py times inside fla's op, without the op's other kernels and host
code. Writes fla_kkt_solve.json and .md under --out and prints the table last.
"""
from __future__ import annotations

import argparse
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from bench.harness import write_report  # noqa: E402

MODULE = "fla.ops.gated_delta_rule.chunk_fwd"
KERNEL = "chunk_gated_delta_rule_fwd_kkt_solve_kernel"
BT, BC, BK = 64, 16, 64


def kernels(module: str = MODULE, kernel: str = KERNEL) -> dict:
    """{side: the JIT function under fla's autotune and heuristics wrappers}: ``kernel`` of
    fla's ``module``, loaded once for aotk and once for Triton."""
    import triton
    from aotk.jit import JITFunction
    from tests.compat import fla
    found = {}
    for side, redirect, cls in (("aotk", True, JITFunction),
                                ("triton", False, triton.runtime.jit.JITFunction)):
        function = getattr(fla.load_ops(redirect)["modules"][module], kernel)
        while not isinstance(function, cls):
            function = function.fn
        found[side] = function
    return found


def inputs(device: str = "cuda") -> dict:
    """k (unit rows, bf16), cumulative log gates per chunk and betas, as fla's op makes them."""
    import torch
    import torch.nn.functional as F
    from tests.compat import fla
    B, T, H, K = (fla.BENCH_SIZE[n] for n in "BTHK")
    generator = torch.Generator().manual_seed(0)
    k = F.normalize(torch.randn(B, T, H, K, generator=generator), dim=-1).to(torch.bfloat16)
    g = F.logsigmoid(torch.randn(B, T // BT, BT, H, generator=generator)).cumsum(2)
    beta = torch.rand(B, T, H, generator=generator).sigmoid()
    return {"k": k.to(device), "g": g.reshape(B, T, H).to(device), "beta": beta.to(device),
            "B": B, "T": T, "H": H, "K": K}


def launcher(kernel, data: dict, out, warps: int):
    B, T, H, K = (data[n] for n in "BTHK")

    def launch():
        kernel[(T // BT, B * H)](data["k"], data["g"], data["beta"], out, None, None, T, H=H,
                                 HV=H, K=K, BT=BT, BC=BC, BK=BK, USE_G=True, IS_VARLEN=False,
                                 num_warps=warps, num_stages=3)
    return launch


def run(warps_list: list) -> list:
    import torch
    from sides import kernel_gpu_us_in_turns
    found, data = kernels(), inputs()
    rows = []
    for warps in warps_list:
        outs = {side: torch.zeros(data["B"], data["T"], data["H"], BT, device="cuda",
                                  dtype=torch.bfloat16) for side in found}
        runs = {side: launcher(found[side], data, outs[side], warps) for side in found}
        for run_side in runs.values():
            run_side()
        torch.cuda.synchronize()
        difference = float((outs["aotk"].float() - outs["triton"].float()).abs().max())
        scale = float(outs["triton"].float().abs().max()) or 1.0
        times = kernel_gpu_us_in_turns(runs, {KERNEL}, reps=40)
        aotk_us, triton_us = times["aotk"][KERNEL], times["triton"][KERNEL]
        rows.append({"num_warps": warps, "difference": difference / scale,
                     "aotk_us": aotk_us, "triton_us": triton_us,
                     "aotk_over_triton": aotk_us / triton_us})
    return rows


def markdown(document: dict) -> str:
    lines = [f"# fla's kkt solve alone, aotk vs Triton {document['triton']}, {document['gpu']}",
             "", "B=4, T=2048, H=8, K=128, BK=64; GPU time per launch (torch profiler, the "
             "sides in turns, 40 launches each). Ratio < 1: aotk faster.", "",
             "| num_warps | aotk us | Triton us | aotk / Triton | max difference |",
             "|---|---|---|---|---|"]
    for r in document["rows"]:
        lines.append(f"| {r['num_warps']} | {r['aotk_us']:.2f} | {r['triton_us']:.2f} | "
                     f"{r['aotk_over_triton']:.3f} | {r['difference']:.1e} |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warps", default="1,2,4")
    parser.add_argument("--out", default="bench/results/fla_kkt_solve")
    args = parser.parse_args(argv)
    import torch
    import triton
    rows = run([int(w) for w in args.warps.split(",")])
    document = {"gpu": torch.cuda.get_device_name(), "triton": triton.__version__, "rows": rows}
    write_report(args.out, "fla_kkt_solve", document, markdown(document))


if __name__ == "__main__":
    main()
