"""``tl.extra.libdevice``: NVIDIA's libdevice functions by Triton's names. The rows of
aotk.semantic's MATH_FUNCTIONS, and the core math builtins libdevice also names; any other
name Triton has here is one clear error (``aotk.language.missing``)."""
from ..functions import (MATH_BUILTINS, abs, ceil, cos, exp, exp2, floor, fma, log, log2, rsqrt,
                         sin, sqrt)
from ..missing import module_getattr

# umulhi is tl.umulhi's row; libdevice calls its functions mulhi (signed or not, by type).
_LIBDEVICE_ROWS = {name: fn for name, fn in MATH_BUILTINS.items() if name != "umulhi"}
globals().update(_LIBDEVICE_ROWS)

__getattr__ = module_getattr(__name__, "tl.extra.libdevice")

__all__ = sorted(_LIBDEVICE_ROWS) + ["abs", "ceil", "cos", "exp", "exp2", "floor", "fma", "log",
                                   "log2", "rsqrt", "sin", "sqrt"]
