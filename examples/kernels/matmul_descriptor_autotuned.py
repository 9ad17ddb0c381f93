"""The descriptor matmul whose tile's columns are two accumulators
(matmul_descriptor_split.py) under @aotk.autotune: 128 x 256 and 128 x 192 tiles, each alone
and with producer warps shared by pairs of programs (WARP_SPECIALIZE, num_ctas=2: B's tiles
multicast), and 128 x 128 and 64 x 64 tiles for small shapes; tuned per (M, N, K)
(docs/tuning.md). examples/tuned builds it beside the tutorial matmul and bench/tuning.py
tunes and times both. BLOCK_SIZE_K is 64: one 128-byte swizzle panel, as TMA boxes need."""
import aotk
from matmul_descriptor_split import matmul_descriptor_split_kernel


def _config(m, n1, n2, warps, stages, pairs=False):
    return aotk.Config({"BLOCK_SIZE_M": m, "BLOCK_N1": n1, "BLOCK_N2": n2, "BLOCK_SIZE_K": 64,
                        "GROUP_SIZE_M": 8, "WARP_SPECIALIZE": pairs},
                       num_warps=warps, num_stages=stages, num_ctas=2 if pairs else 1)


CONFIGS = [_config(128, 128, 128, 8, 3), _config(128, 128, 128, 8, 3, pairs=True),
           _config(128, 128, 64, 8, 3), _config(128, 128, 64, 8, 3, pairs=True),
           _config(128, 64, 64, 4, 4), _config(64, 32, 32, 4, 4)]

matmul_descriptor_autotuned = aotk.autotune(configs=CONFIGS, key=["M", "N", "K"])(
    matmul_descriptor_split_kernel)
