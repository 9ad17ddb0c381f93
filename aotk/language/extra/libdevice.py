"""``tl.extra.libdevice``: NVIDIA's libdevice functions by Triton's names: the rows of
aotk.semantic's ALL_MATH_FUNCTIONS (tl.math's functions and libdevice's own: directed
rounding, conversions, bit casts, integer helpers, special functions), and the core math
builtins libdevice also names (but exp: libdevice's own ``__nv_expf``, where tl.exp is
Triton's approximation). Every name Triton's libdevice module has is here; a name it
lacks is an AttributeError (``aotk.language.missing``)."""
from ..functions import (MATH_BUILTINS, abs, ceil, cos, exp2, floor, fma, log, log2, rsqrt, sin,
                         sqrt)
from ..missing import module_getattr

# umulhi is tl.umulhi's row; libdevice calls its functions mulhi (signed or not, by type).
_LIBDEVICE_ROWS = {name: fn for name, fn in MATH_BUILTINS.items() if name != "umulhi"}
globals().update(_LIBDEVICE_ROWS)

__getattr__ = module_getattr(__name__, "tl.extra.libdevice")

__all__ = sorted(_LIBDEVICE_ROWS) + ["abs", "ceil", "cos", "exp2", "floor", "fma", "log",
                                   "log2", "rsqrt", "sin", "sqrt"]
