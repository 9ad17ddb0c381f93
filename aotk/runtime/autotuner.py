"""``triton.runtime.autotuner``: aotk's autotuning wrappers under Triton's module name."""
from ..autotune import AutotuneError, Autotuner, Config, Heuristics, autotune, heuristics

__all__ = ["AutotuneError", "Autotuner", "Config", "Heuristics", "autotune", "heuristics"]
