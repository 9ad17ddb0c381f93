"""The math functions of tl.math and tl.extra.libdevice (aotk.semantic's MATH_FUNCTIONS), one
Case per function and operand type: the interpreter against numpy / Python's math, ptxas,
and the GPU's libdevice against the interpreter.

Shared by the interpreter, ptxas and GPU tests.
"""
from __future__ import annotations

import math

import numpy as np

import aotk
import aotk.language as tl
from aotk import semantic
from tests.kernels.elementwise import Case

N = 256


@aotk.jit
def libdevice_kernel(x_ptr, y_ptr, out_ptr, FN: tl.constexpr, BINARY: tl.constexpr):
    offs = tl.arange(0, 256)
    x = tl.load(x_ptr + offs)
    function = tl.math.umulhi if FN == "umulhi" else getattr(tl.extra.libdevice, FN)
    if BINARY:
        result = function(x, tl.load(y_ptr + offs))
    else:
        result = function(x)
    tl.store(out_ptr + offs, result)


def _vectorized(function):
    return lambda *arrays: np.frompyfunc(function, len(arrays), 1)(*arrays).astype(np.float64)


def _half_away(x):
    return np.where(x >= 0, np.floor(x + 0.5), np.ceil(x - 0.5))


def _inverse_erf(y):
    # Bisection on math.erf: slow, independent of the interpreter's formula.
    low, high = -6.0, 6.0
    for _ in range(200):
        middle = (low + high) / 2
        low, high = (middle, high) if math.erf(middle) < y else (low, middle)
    return (low + high) / 2


# name -> (reference on float64 operands, (low, high) of x, (low, high) of y or None)
FLOAT_FUNCTIONS = {
    "erf": (_vectorized(math.erf), (-3, 3), None),
    "erfc": (_vectorized(math.erfc), (-3, 3), None),
    "erfinv": (_vectorized(_inverse_erf), (-0.99, 0.99), None),
    "tanh": (np.tanh, (-5, 5), None), "exp10": (lambda x: 10.0 ** x, (-3, 3), None),
    "log10": (np.log10, (0.01, 100), None), "log1p": (np.log1p, (-0.9, 10), None),
    "expm1": (np.expm1, (-3, 3), None), "sinh": (np.sinh, (-5, 5), None),
    "cosh": (np.cosh, (-5, 5), None), "tan": (np.tan, (-1.4, 1.4), None),
    "asin": (np.arcsin, (-0.99, 0.99), None), "acos": (np.arccos, (-0.99, 0.99), None),
    "atan": (np.arctan, (-10, 10), None), "asinh": (np.arcsinh, (-10, 10), None),
    "acosh": (np.arccosh, (1.01, 10), None), "atanh": (np.arctanh, (-0.99, 0.99), None),
    "cbrt": (np.cbrt, (-100, 100), None), "rcbrt": (lambda x: 1 / np.cbrt(x), (0.1, 100), None),
    "lgamma": (_vectorized(math.lgamma), (0.1, 20), None),
    "tgamma": (_vectorized(math.gamma), (0.1, 10), None),
    "round": (_half_away, "halves", None), "trunc": (np.trunc, "halves", None),
    "rint": (np.round, "halves", None), "nearbyint": (np.round, "halves", None),
    "sinpi": (lambda x: np.sin(np.pi * x), (-1, 1), None),
    "cospi": (lambda x: np.cos(np.pi * x), (-1, 1), None),
    "normcdf": (_vectorized(lambda x: (1 + math.erf(x / math.sqrt(2))) / 2), (-4, 4), None),
    "sqrt_rn": (np.sqrt, (0, 100), None), "rcp_rn": (lambda x: 1 / x, (0.1, 10), None),
    "pow": (np.power, (0.5, 3), (-2, 2)), "atan2": (np.arctan2, (-5, 5), (-5, 5)),
    "hypot": (np.hypot, (-5, 5), (-5, 5)), "copysign": (np.copysign, (-5, 5), (-5, 5)),
    "fmod": (np.fmod, (-10, 10), (0.5, 3)), "fdim": (lambda x, y: np.maximum(x - y, 0),
                                                     (-5, 5), (-5, 5)),
    "remainder": (_vectorized(math.remainder), (-10, 10), (0.5, 3)),
    "nextafter": ("native", (-5, 5), (-5, 5)),
    "div_rn": (np.divide, (-10, 10), (0.5, 3)), "add_rn": (np.add, (-10, 10), (-10, 10)),
    "sub_rn": (np.subtract, (-10, 10), (-10, 10)), "mul_rn": (np.multiply, (-10, 10), (-10, 10)),
    "rsqrt_rn": (lambda x: 1 / np.sqrt(x), (0.1, 100), None),
    "fast_expf": (np.exp, (-5, 5), None), "fast_logf": (np.log, (0.1, 10), None),
    "fast_sinf": (np.sin, (-3, 3), None), "fast_cosf": (np.cos, (-3, 3), None),
    "fast_tanf": (np.tan, (-1, 1), None), "fast_exp10f": (lambda x: 10.0 ** x, (-2, 2), None),
    "fast_log2f": (np.log2, (0.1, 10), None), "fast_log10f": (np.log10, (0.1, 10), None),
    "fast_powf": (np.power, (0.5, 2), (-2, 2)), "fast_dividef": (np.divide, (-10, 10), (0.5, 3)),
}
# The fast approximations are compared with a tolerance of their own.
APPROXIMATE = {"fast_expf", "fast_logf", "fast_sinf", "fast_cosf", "fast_tanf", "fast_exp10f",
               "fast_log2f", "fast_log10f", "fast_powf", "fast_dividef"}


def _float_case(name, dtype):
    reference, x_range, y_range = FLOAT_FUNCTIONS[name]

    def draw(rng, bounds):
        if bounds == "halves":
            return (rng.integers(-40, 40, N) / 4).astype(dtype)   # many exact .5 and .25
        return rng.uniform(*bounds, N).astype(dtype)

    def make(rng):
        return {"x_ptr": draw(rng, x_range),
                "y_ptr": draw(rng, y_range) if y_range else np.zeros(N, dtype),
                "out_ptr": np.zeros(N, dtype)}

    def expected(args):
        if reference == "native":   # nextafter steps by the operand type's own ulp
            return {"out_ptr": np.nextafter(args["x_ptr"], args["y_ptr"])}
        operands = [args["x_ptr"].astype(np.float64)]
        if y_range:
            operands.append(args["y_ptr"].astype(np.float64))
        return {"out_ptr": np.asarray(reference(*operands)).astype(dtype)}
    rtol = 1e-5 if name in APPROXIMATE else (2e-6 if dtype == np.float32 else 1e-12)
    return Case(f"libdevice-{name}-{np.dtype(dtype).name}", libdevice_kernel, make, (1,),
                {"FN": name, "BINARY": y_range is not None}, ("out_ptr",), expected, False, rtol)


def _classification_case(name, dtype):
    reference = {"isnan": np.isnan, "isinf": np.isinf, "signbit": np.signbit,
                 "finitef": np.isfinite, "isfinited": np.isfinite}[name]

    def make(rng):
        x = rng.standard_normal(N).astype(dtype)
        x[::5], x[1::7], x[2::11], x[3::13] = np.nan, np.inf, -np.inf, -0.0
        return {"x_ptr": x, "y_ptr": np.zeros(N, dtype), "out_ptr": np.zeros(N, np.int32)}
    return Case(f"libdevice-{name}-{np.dtype(dtype).name}", libdevice_kernel, make, (1,),
                {"FN": name, "BINARY": False}, ("out_ptr",),
                lambda args: {"out_ptr": (reference(args["x_ptr"]) != 0).astype(np.int32)})


def _high_product(a, b, signed):
    bits = a.dtype.itemsize * 8
    wrap = (lambda v: int(v)) if signed else (lambda v: int(v) % (1 << bits))
    high = [(wrap(x) * wrap(y)) >> bits for x, y in zip(a, b)]
    return np.array([h % (1 << bits) for h in high], dtype=np.uint64).astype(
        a.dtype.str.replace("i", "u")).view(a.dtype)


def _bit_function(name, values):
    bits = values.dtype.itemsize * 8
    unsigned = [int(v) % (1 << bits) for v in values]
    if name == "clz":
        return np.array([bits - u.bit_length() for u in unsigned], np.int32)
    if name == "popc":
        return np.array([bin(u).count("1") for u in unsigned], np.int32)
    if name == "ffs":
        return np.array([(u & -u).bit_length() for u in unsigned], np.int32)
    reversed_values = [int(format(u, f"0{bits}b")[::-1], 2) for u in unsigned]
    return np.array(reversed_values, np.uint64).astype(values.dtype.str.replace("i", "u")) \
        .view(values.dtype)


def _integer_case(name, dtype):
    info = np.iinfo(dtype)

    def make(rng):
        draw = lambda: rng.integers(info.min, info.max, N, endpoint=True, dtype=dtype)  # noqa: E731
        out_dtype = np.int32 if name in ("clz", "popc", "ffs") else dtype
        return {"x_ptr": draw(), "y_ptr": draw(), "out_ptr": np.zeros(N, out_dtype)}

    def expected(args):
        x, y = args["x_ptr"], args["y_ptr"]
        if name in ("umulhi", "mulhi"):
            return {"out_ptr": _high_product(x, y, signed=name == "mulhi" and info.min < 0)}
        return {"out_ptr": _bit_function(name, x)}
    return Case(f"libdevice-{name}-{np.dtype(dtype).name}", libdevice_kernel, make, (1,),
                {"FN": name, "BINARY": name in ("umulhi", "mulhi")}, ("out_ptr",), expected)


_NUMPY = {"fp32": np.float32, "fp64": np.float64, "i32": np.int32, "u32": np.uint32,
          "i64": np.int64, "u64": np.uint64}

CASES = []
for _name, _row in semantic.MATH_FUNCTIONS.items():
    for _operand in _row.operands:
        if _name in FLOAT_FUNCTIONS:
            CASES.append(_float_case(_name, _NUMPY[_operand]))
        elif _row.result == "i32" and _operand.startswith("fp"):
            CASES.append(_classification_case(_name, _NUMPY[_operand]))
        else:
            CASES.append(_integer_case(_name, _NUMPY[_operand]))
