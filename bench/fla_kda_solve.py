"""KDA's inter-solve kernel alone, aotk against Triton, at fla's bench size (GPU).

    PYTHONPATH=. python3 bench/fla_kda_solve.py [--out DIR]

``chunk_kda_fwd_kernel_inter_solve_fused`` of fla-core (KDA's chunked forward: the
off-diagonal blocks of q k^T and k k^T over a K loop, then forward substitution on the
diagonal blocks, 14 trips each) with fla's configuration at ``tests.compat.fla.BENCH_SIZE``
(B=4, T=2048, H=HV=8, K=128; BT=64, BC=16, BK=32, one warp): bf16 q and k, fp32 gates
(cumulative within each chunk, scaled down as fla's are) and betas, and small fp32 diagonal
blocks (what the token-parallel kernel before it writes). Both sides' kernels are fla's own
source; their outputs are compared first, then each is launched alone, the sides taking
turns, and its GPU time read from the torch profiler (``sides.kernel_gpu_us_in_turns``).
Launched alone, its inputs are not in L2 as they are inside fla's op (bench/
linear_attention.py times it there). Writes fla_kda_solve.json and .md under --out and
prints the table last.
"""
from __future__ import annotations

import argparse
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from bench.harness import write_report  # noqa: E402

MODULE = "fla.ops.kda.chunk_intra"
KERNEL = "chunk_kda_fwd_kernel_inter_solve_fused"
BT, BC, BK = 64, 16, 32


def inputs(device: str = "cuda") -> dict:
    import torch
    import torch.nn.functional as F
    from tests.compat import fla
    B, T, H, K = (fla.BENCH_SIZE[n] for n in "BTHK")
    generator = torch.Generator().manual_seed(0)
    q = torch.randn(B, T, H, K, generator=generator).to(torch.bfloat16)
    k = (torch.randn(B, T, H, K, generator=generator) / K ** 0.5).to(torch.bfloat16)
    g = F.logsigmoid(torch.randn(B, T // BT, BT, H, K, generator=generator)).cumsum(2) / 8
    beta = torch.rand(B, T, H, generator=generator).sigmoid()
    diagonal = 0.05 * torch.randn(B, T, H, BC, generator=generator)
    return {"q": q.to(device), "k": k.to(device), "g": g.reshape(B, T, H, K).to(device),
            "beta": beta.to(device), "diagonal": diagonal.to(device),
            "B": B, "T": T, "H": H, "K": K}


def launcher(kernel, data: dict, outs: tuple):
    B, T, H, K = (data[n] for n in "BTHK")
    aqk, akk = outs

    def launch():
        kernel[(T // BT, B * H)](data["q"], data["k"], data["g"], data["beta"], aqk,
                                 data["diagonal"], akk, K ** -0.5, None, None, T, H=H, HV=H,
                                 K=K, BT=BT, BC=BC, NC=BT // BC, BK=BK, IS_VARLEN=False,
                                 USE_SAFE_GATE=False, num_warps=1, num_stages=3)
    return launch


def run() -> dict:
    import torch
    from fla_kkt_solve import kernels
    from sides import kernel_gpu_us_in_turns
    found, data = kernels(MODULE, KERNEL), inputs()
    shape = (data["B"], data["T"], data["H"], BT)
    outs = {side: (torch.zeros(shape, device="cuda", dtype=torch.bfloat16),
                   torch.zeros(shape, device="cuda", dtype=torch.float32)) for side in found}
    runs = {side: launcher(found[side], data, outs[side]) for side in found}
    for run_side in runs.values():
        run_side()
    torch.cuda.synchronize()
    differences = [float((outs["aotk"][i].float() - outs["triton"][i].float()).abs().max()) /
                   (float(outs["triton"][i].float().abs().max()) or 1.0) for i in (0, 1)]
    times = kernel_gpu_us_in_turns(runs, {KERNEL}, reps=40)
    aotk_us, triton_us = times["aotk"][KERNEL], times["triton"][KERNEL]
    return {"aotk_us": aotk_us, "triton_us": triton_us, "aotk_over_triton": aotk_us / triton_us,
            "difference_aqk": differences[0], "difference_akk": differences[1]}


def markdown(document: dict) -> str:
    r = document["row"]
    return "\n".join([
        f"# KDA's inter-solve kernel alone, aotk vs Triton {document['triton']}, "
        f"{document['gpu']}", "",
        "B=4, T=2048, H=8, K=128, BK=32, one warp; GPU time per launch (torch profiler, the "
        "sides in turns, 40 launches each). Ratio < 1: aotk faster.", "",
        "| aotk us | Triton us | aotk / Triton | max difference Aqk | max difference Akk |",
        "|---|---|---|---|---|",
        f"| {r['aotk_us']:.2f} | {r['triton_us']:.2f} | {r['aotk_over_triton']:.3f} | "
        f"{r['difference_aqk']:.1e} | {r['difference_akk']:.1e} |"]) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="bench/results/fla_kda_solve")
    args = parser.parse_args(argv)
    import torch
    import triton
    document = {"gpu": torch.cuda.get_device_name(), "triton": triton.__version__,
                "row": run()}
    write_report(args.out, "fla_kda_solve", document, markdown(document))


if __name__ == "__main__":
    main()
