"""``tl.math``: the math functions Triton keeps in ``triton.language.math``."""
from .functions import (MATH_BUILTINS, abs, ceil, cos, exp, exp2, fdiv, floor, fma, log, log2,
                        rsqrt, sin, sqrt)

div_rn, erf, sqrt_rn, umulhi = (MATH_BUILTINS[name] for name in ("div_rn", "erf", "sqrt_rn",
                                                                 "umulhi"))

__all__ = ["abs", "ceil", "cos", "div_rn", "erf", "exp", "exp2", "fdiv", "floor", "fma", "log",
           "log2", "rsqrt", "sin", "sqrt", "sqrt_rn", "umulhi"]
