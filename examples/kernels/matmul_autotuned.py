"""The tutorial matmul of matmul.py under @aotk.autotune: eight tile configurations (Triton's
tutorial list for fp16 on CUDA, plus two-warpgroup 128x256x64 and 128x128x64 tiles), tuned
per (M, N, K). A JIT launch measures them on its GPU; `aotk tune` measures them at the
manifest's points and `aotk build` dispatches on the result (docs/tuning.md)."""
import aotk
from matmul import matmul_kernel


def _config(m, n, k, warps, stages):
    return aotk.Config({"BLOCK_SIZE_M": m, "BLOCK_SIZE_N": n, "BLOCK_SIZE_K": k,
                        "GROUP_SIZE_M": 8}, num_warps=warps, num_stages=stages)


CONFIGS = [_config(128, 256, 64, 8, 3), _config(128, 128, 64, 8, 3),
           _config(64, 256, 32, 4, 4), _config(128, 128, 32, 4, 4),
           _config(128, 64, 32, 4, 4), _config(64, 128, 32, 4, 4),
           _config(128, 32, 32, 4, 4), _config(64, 32, 32, 2, 5)]

matmul_autotuned = aotk.autotune(configs=CONFIGS, key=["M", "N", "K"])(matmul_kernel)
