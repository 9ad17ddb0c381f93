"""``tl.math``: the math functions Triton keeps in ``triton.language.math``."""
from .functions import (abs, ceil, cos, div_rn, erf, exp, exp2, fdiv, floor, fma, log, log2,
                        rsqrt, sin, sqrt, sqrt_rn, umulhi)

__all__ = ["abs", "ceil", "cos", "div_rn", "erf", "exp", "exp2", "fdiv", "floor", "fma", "log",
           "log2", "rsqrt", "sin", "sqrt", "sqrt_rn", "umulhi"]
