"""matmul_descriptor_tail.py (the last partial wave split along K) under @aotk.autotune: its
128 x 256 tile alone, with a producer warp, and with producer warps shared by pairs of
programs (num_ctas=2); tuned per (M, N, K) in examples/tuned (docs/tuning.md), where the
manifest's tune.arguments give the wave (the SM count), the splits and the buffers as
tail_plan does (the counters zeroed: `fill = "zeros"`). ``reset_to_zero`` zeroes them before
each measured launch, as Triton's autotuner does, for JIT launches too."""
import aotk
from matmul_descriptor_tail import matmul_descriptor_tail_kernel


def _config(producer=False, pairs=False):
    return aotk.Config({"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 64,
                        "GROUP_SIZE_M": 8, "FIXUP_ROWS": 32, "WARP_SPECIALIZE": producer},
                       num_warps=8, num_stages=3, num_ctas=2 if pairs else 1)


CONFIGS = [_config(), _config(producer=True), _config(producer=True, pairs=True)]

matmul_descriptor_tail_autotuned = aotk.autotune(
    configs=CONFIGS, key=["M", "N", "K"], reset_to_zero=["counters"])(
    matmul_descriptor_tail_kernel)
