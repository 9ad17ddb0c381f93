"""``triton.runtime``'s names that kernel libraries import, for files loaded with ``import
triton`` giving aotk (``aotk.triton_imports``): ``autotuner`` (Autotuner, Heuristics, Config,
autotune, heuristics: a library may subclass Autotuner), ``jit`` (JITFunction, jit) and
``driver.active`` (the current GPU's target and properties)."""
from . import autotuner, driver, jit
from .autotuner import Autotuner, Config, Heuristics, autotune, heuristics
from .jit import JITFunction

__all__ = ["Autotuner", "Config", "Heuristics", "JITFunction", "autotune", "autotuner",
           "driver", "heuristics", "jit"]
