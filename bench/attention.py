"""Fused attention forward (examples/kernels/attention.py) under aotk and Triton, same source
(Triton's by import swap) and same launch configuration, with torch's
scaled_dot_product_attention (flash / cuDNN backends) beside them; each output checked
against torch before it is timed.

    PYTHONPATH=. python3 bench/attention.py [--out DIR] [--seqs 1024,4096,16384]

Batch 4, 32 heads (Triton's tutorial benchmark), fp16, head dims 64 and 128, causal and not.
Time: bench/timing.time_interleaved (CUDA events, median of back-to-back launches, the
implementations taking turns). TFLOP/s count
the two matmuls, halved when causal. Writes attention.json and attention.md.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from bench.harness import write_report  # noqa: E402

from timing import KERNELS, time_interleaved, triton_port  # noqa: E402

BATCH, HEADS = 4, 32
# head dim -> (BLOCK_M, BLOCK_N, num_warps, num_stages): one configuration per head dim,
# run by both compilers.
CONFIGS = {64: (128, 64, 4, 3), 128: (128, 64, 8, 3)}


def _launcher(kernel, q, k, v, out, lse, sm_scale, causal, config):
    block_m, block_n, warps, stages = config
    z, h, n_ctx, head_dim = q.shape
    grid = (n_ctx // block_m, z * h)

    def launch():
        kernel[grid](q, k, v, out, lse, sm_scale, h, n_ctx, *q.stride()[:3], *k.stride()[:3],
                     *v.stride()[:3], *out.stride()[:3], HEAD_DIM=head_dim, BLOCK_M=block_m,
                     BLOCK_N=block_n, CAUSAL=causal, num_warps=warps, num_stages=stages)
    return launch


def run(seqs: list) -> dict:
    import torch
    import triton
    aotk_kernel = triton_port(KERNELS / "attention.py", use_triton=False).attention_fwd_kernel
    triton_kernel = triton_port(KERNELS / "attention.py").attention_fwd_kernel
    rows = []
    for head_dim, config in CONFIGS.items():
        for causal in (False, True):
            for n_ctx in seqs:
                generator = torch.Generator(device="cuda").manual_seed(0)
                q, k, v = (torch.randn((BATCH, HEADS, n_ctx, head_dim), generator=generator,
                                       device="cuda", dtype=torch.float16) for _ in range(3))
                sm_scale = head_dim ** -0.5
                expected = torch.nn.functional.scaled_dot_product_attention(
                    q, k, v, is_causal=causal, scale=sm_scale)
                row = {"head_dim": head_dim, "causal": causal, "n_ctx": n_ctx,
                       "config": dict(zip(("BLOCK_M", "BLOCK_N", "num_warps", "num_stages"),
                                          config))}
                flops = 4 * BATCH * HEADS * n_ctx * n_ctx * head_dim * (0.5 if causal else 1)
                launches = {}
                for name, kernel in (("aotk", aotk_kernel), ("triton", triton_kernel)):
                    out = torch.empty_like(q)
                    lse = torch.empty((BATCH * HEADS, n_ctx), device="cuda", dtype=torch.float32)
                    launch = launches[name] = _launcher(kernel, q, k, v, out, lse, sm_scale,
                                                        causal, config)
                    launch()
                    torch.cuda.synchronize()
                    row[f"{name}_matches_torch"] = bool(torch.allclose(out, expected, rtol=2e-2,
                                                                      atol=2e-2))
                launches["torch"] = lambda: torch.nn.functional.scaled_dot_product_attention(
                    q, k, v, is_causal=causal, scale=sm_scale)
                for name, ms in time_interleaved(launches).items():
                    row[f"{name}_ms"] = ms
                for name in ("aotk", "triton", "torch"):
                    row[f"{name}_tflops"] = flops / row[f"{name}_ms"] / 1e9
                row["triton_over_aotk"] = row["triton_ms"] / row["aotk_ms"]
                rows.append(row)
                print(json.dumps(row), flush=True)
    return {"gpu": torch.cuda.get_device_name(), "triton": triton.__version__,
            "torch": torch.__version__, "rows": rows}


def markdown(document: dict) -> str:
    lines = [f"# Fused attention forward, aotk vs Triton {document['triton']}, "
             f"{document['gpu']}", "",
             f"Batch {BATCH}, {HEADS} heads, fp16; same source and configuration on both "
             "sides; ratio = Triton time / aotk time (> 1: aotk faster).", "",
             "| head dim | causal | N_CTX | config | aotk TFLOP/s | Triton TFLOP/s | torch "
             "TFLOP/s | ratio | outputs match torch |", "|---|---|---|---|---|---|---|---|---|"]
    for r in document["rows"]:
        c = r["config"]
        lines.append(f"| {r['head_dim']} | {r['causal']} | {r['n_ctx']} | {c['BLOCK_M']}x"
                     f"{c['BLOCK_N']}, {c['num_warps']} warps, {c['num_stages']} stages | "
                     f"{r['aotk_tflops']:.1f} | {r['triton_tflops']:.1f} | "
                     f"{r['torch_tflops']:.1f} | {r['triton_over_aotk']:.3f} | "
                     f"{r['aotk_matches_torch']} / {r['triton_matches_torch']} |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="bench/results")
    parser.add_argument("--seqs", default="1024,4096,16384")
    args = parser.parse_args(argv)
    document = run([int(s) for s in args.seqs.split(",")])
    write_report(args.out, "attention", document, markdown(document))


if __name__ == "__main__":
    main()
