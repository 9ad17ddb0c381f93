"""Tier-1 kernels shared by the interpreter tests (against numpy references) and the GPU
tests (against the interpreter). Each ``Case`` builds its inputs, launches, and names the
arrays the kernel writes."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

import aotk
import aotk.language as tl
from examples.kernels.add import add_kernel
from examples.kernels.copy2d import copy2d_kernel


@dataclass
class Case:
    name: str
    kernel: object
    make_args: object              # rng -> dict of launch arguments (numpy arrays, scalars)
    grid: object                   # tuple, or callable(args) -> tuple
    constants: dict
    outputs: tuple                 # names of arrays the kernel writes
    reference: object = None       # args -> {output: expected array}
    exact: bool = True             # integer-exact outputs (else compare with tolerance)
    rtol: float = 1e-6
    views: dict = field(default_factory=dict)   # arg -> slice applied to build a view
    num_warps: int = 4             # compiled and launched with these warps

    def launch_grid(self, args):
        return self.grid(args) if callable(self.grid) else self.grid


# --- kernels --------------------------------------------------------------------------

@aotk.jit
def binary_ops_kernel(a_ptr, b_ptr, out_ptr, n, OP: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    a = tl.load(a_ptr + offs, mask=mask, other=1)
    b = tl.load(b_ptr + offs, mask=mask, other=1)
    if OP == "add":
        r = a + b
    elif OP == "sub":
        r = a - b
    elif OP == "mul":
        r = a * b
    elif OP == "floordiv":
        r = a // b
    elif OP == "mod":
        r = a % b
    elif OP == "truediv":
        r = a / b
    elif OP == "and":
        r = a & b
    elif OP == "or":
        r = a | b
    elif OP == "xor":
        r = a ^ b
    elif OP == "shl":
        r = a << b
    elif OP == "shr":
        r = a >> b
    elif OP == "min":
        r = tl.minimum(a, b)
    elif OP == "max":
        r = tl.maximum(a, b)
    elif OP == "lt":
        r = a < b
    elif OP == "eq":
        r = a == b
    else:
        tl.static_assert(False, "unknown op")
    tl.store(out_ptr + offs, r, mask=mask)


@aotk.jit
def scalar_promotion_kernel(x_ptr, out_ptr, s, BLOCK: tl.constexpr, LITERAL: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.store(out_ptr + offs, (x + s) * LITERAL)


@aotk.jit
def constexpr_division_kernel(out_ptr, A: tl.constexpr, B: tl.constexpr):
    # Constexpr-only: Python rounding. Tensor: C rounding.
    offs = tl.arange(0, 4)
    a = tl.full([4], A, tl.int32)
    python_q = A // B
    python_r = A % B
    tl.store(out_ptr + offs, tl.where(offs == 0, python_q, tl.where(offs == 1, python_r,
                                      tl.where(offs == 2, a // B, a % B))))


@aotk.jit
def cast_kernel(x_ptr, out_ptr, n, TO: tl.constexpr, BITCAST: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x.to(TO, bitcast=BITCAST), mask=mask)


@aotk.jit
def roundtrip_kernel(x_ptr, out_ptr, n, VIA: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x.to(VIA).to(tl.float32), mask=mask)


@aotk.jit
def math_kernel(x_ptr, out_ptr, n, FN: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=1.0)
    if FN == "exp":
        r = tl.exp(x)
    elif FN == "exp2":
        r = tl.exp2(x)
    elif FN == "log":
        r = tl.log(x)
    elif FN == "log2":
        r = tl.log2(x)
    elif FN == "sqrt":
        r = tl.sqrt(x)
    elif FN == "rsqrt":
        r = tl.rsqrt(x)
    elif FN == "sin":
        r = tl.sin(x)
    elif FN == "cos":
        r = tl.cos(x)
    elif FN == "abs":
        r = tl.abs(x)
    elif FN == "floor":
        r = tl.floor(x)
    elif FN == "ceil":
        r = tl.ceil(x)
    elif FN == "sigmoid":
        r = tl.sigmoid(x)
    elif FN == "fma":
        r = tl.fma(x, x, x)
    elif FN == "clamp":
        r = tl.clamp(x, 0.5, 2.0)
    elif FN == "erf":
        r = tl.erf(x)
    elif FN == "sqrt_rn":
        r = tl.sqrt_rn(x)
    else:
        r = -x
    tl.store(out_ptr + offs, r, mask=mask)


@aotk.jit
def shift_right_kernel(x_ptr, y_ptr, out_ptr, BLOCK: tl.constexpr):
    """x >> y with operands of different types (Triton: x's own signedness picks the kind)."""
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs) >> tl.load(y_ptr + offs))


def _shift_right_case(x_dtype, y_dtype):
    """Signed x by unsigned y: the operands promote to the unsigned type, and the shift is
    still arithmetic (Triton's rule, which test_core's test_shift_op checks)."""
    bits = max(np.dtype(x_dtype).itemsize, np.dtype(y_dtype).itemsize) * 8
    out_dtype = np.dtype(f"uint{bits}")

    def make_args(rng):
        info = np.iinfo(x_dtype)
        return {"x_ptr": rng.integers(info.min, info.max, 256, endpoint=True).astype(x_dtype),
                "y_ptr": rng.integers(0, bits, 256).astype(y_dtype),
                "out_ptr": np.zeros(256, out_dtype)}

    def reference(args):
        signed = np.dtype(f"int{bits}")
        shifted = args["x_ptr"].astype(signed) >> args["y_ptr"].astype(signed)
        return {"out_ptr": shifted.astype(out_dtype)}
    return Case(f"shr-{np.dtype(x_dtype).name}-by-{np.dtype(y_dtype).name}", shift_right_kernel,
                make_args, (1,), {"BLOCK": 256}, ("out_ptr",), reference)


@aotk.jit
def nan_min_max_kernel(a_ptr, b_ptr, out_ptr, FUNC: tl.constexpr, PROPAGATE: tl.constexpr,
                       BLOCK: tl.constexpr):
    """tl.minimum / maximum / clamp with propagate_nan (Triton's test_propagate_nan)."""
    offs = tl.arange(0, BLOCK)
    a, b = tl.load(a_ptr + offs), tl.load(b_ptr + offs)
    mode = getattr(tl.PropagateNan, PROPAGATE)
    if FUNC == "clamp":
        r = tl.clamp(a, -tl.abs(b), tl.abs(b), propagate_nan=mode)
    else:
        r = getattr(tl, FUNC)(a, b, propagate_nan=mode)
    tl.store(out_ptr + offs, r)


def _nan_min_max_case(func, propagate, dtype):
    def make(rng):
        a, b = (rng.standard_normal(64).astype(dtype) for _ in range(2))
        a[::3] = np.nan
        b[1::4] = np.nan
        return {"a_ptr": a, "b_ptr": b, "out_ptr": np.zeros(64, dtype)}

    def reference(args):
        a, b = args["a_ptr"], args["b_ptr"]
        if func == "clamp":
            low, high = -np.abs(b), np.abs(b)
            r = np.minimum(np.maximum(a, low), high) if propagate == "ALL" else \
                np.fmin(np.fmax(a, low), high)
        else:
            numpy_name = {"minimum": ("fmin", "minimum"), "maximum": ("fmax", "maximum")}[func]
            r = getattr(np, numpy_name[propagate == "ALL"])(a, b)
        return {"out_ptr": r.astype(dtype)}
    return Case(f"{func}-propagate-nan-{propagate.lower()}-{np.dtype(dtype).name}",
                nan_min_max_kernel, make, (1,),
                {"FUNC": func, "PROPAGATE": propagate, "BLOCK": 64}, ("out_ptr",), reference)


@aotk.jit
def outer_kernel(x_ptr, y_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    y = tl.load(y_ptr + offs)
    # x is needed both as a column and (summed) as a row: one load, two layouts.
    tl.store(out_ptr + offs[:, None] * BLOCK + offs[None, :], x[:, None] * y[None, :] + x[None, :])


@aotk.jit
def where_other_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=-1.0)
    y = tl.where(x > 0.5, x, tl.zeros_like(x) + 0.25)
    tl.store(out_ptr + offs, y)


@aotk.jit
def grid_kernel(out_ptr):
    pid_x = tl.program_id(0)
    pid_y = tl.program_id(1)
    linear = pid_y * tl.num_programs(0) + pid_x
    tl.store(out_ptr + linear, linear * 10 + tl.num_programs(1))


@aotk.jit
def bool_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    flags = tl.load(x_ptr + offs, mask=mask, other=0)
    tl.store(out_ptr + offs, ~flags | (offs % 3 == 0), mask=mask)


@aotk.jit
def unary_int_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.store(out_ptr + offs, tl.abs(-x) + (~x) + tl.cdiv(x, 4))


# --- cases ----------------------------------------------------------------------------

N = 1000   # not a multiple of any block: every case has a masked tail


def _pair(dtype, low, high, zero_free=False):
    def make(rng):
        a = rng.integers(low, high, N).astype(dtype) if np.dtype(dtype).kind in "iu" else \
            rng.uniform(low, high, N).astype(dtype)
        b = rng.integers(low, high, N).astype(dtype) if np.dtype(dtype).kind in "iu" else \
            rng.uniform(low, high, N).astype(dtype)
        if zero_free:
            b[b == 0] = 1
        return a, b
    return make


def _c_div(a, b):
    q = np.abs(a.astype(np.int64)) // np.abs(b.astype(np.int64))
    return (q * np.sign(a.astype(np.int64)) * np.sign(b.astype(np.int64))).astype(a.dtype)


def _c_mod(a, b):
    return (a.astype(np.int64) - _c_div(a, b).astype(np.int64) * b.astype(np.int64)).astype(a.dtype)


def _binary_case(op, dtype, low, high, reference, out_dtype=None, zero_free=False, exact=True,
                 b_range=None):
    def make_args(rng):
        a, b = _pair(dtype, low, high, zero_free)(rng)
        if b_range is not None:
            b = rng.integers(b_range[0], b_range[1], N).astype(dtype)
        return {"a_ptr": a, "b_ptr": b, "out_ptr": np.zeros(N, out_dtype or dtype), "n": N}
    return Case(f"{op}-{np.dtype(dtype).name}", binary_ops_kernel, make_args,
                (4,), {"OP": op, "BLOCK": 256}, ("out_ptr",),
                lambda args: {"out_ptr": reference(args["a_ptr"], args["b_ptr"])
                              .astype(out_dtype or dtype)}, exact=exact)


def _wrap(fn):
    def run(a, b):
        with np.errstate(all="ignore"):
            return fn(a, b)
    return run


CASES = [
    Case("add-fp32", add_kernel,
         lambda rng: {"x_ptr": rng.standard_normal(N, np.float32),
                      "y_ptr": rng.standard_normal(N, np.float32),
                      "out_ptr": np.zeros(N, np.float32), "n": N},
         (4,), {"BLOCK": 256}, ("out_ptr",),
         lambda a: {"out_ptr": a["x_ptr"] + a["y_ptr"]}),
    Case("add-unaligned-views", add_kernel,
         lambda rng: {"x_ptr": rng.standard_normal(N + 1, np.float32)[1:],
                      "y_ptr": rng.standard_normal(N + 3, np.float32)[3:],
                      "out_ptr": np.zeros(N + 1, np.float32)[1:], "n": N},
         (8,), {"BLOCK": 128}, ("out_ptr",),
         lambda a: {"out_ptr": a["x_ptr"] + a["y_ptr"]}),
    _binary_case("add", np.int8, -128, 128, _wrap(lambda a, b: a + b)),
    _binary_case("mul", np.int8, -128, 128, _wrap(lambda a, b: a * b)),
    _binary_case("sub", np.uint16, 0, 65536, _wrap(lambda a, b: a - b)),
    _binary_case("floordiv", np.int32, -1000, 1000, _c_div, zero_free=True),
    _binary_case("mod", np.int32, -1000, 1000, _c_mod, zero_free=True),
    _binary_case("floordiv", np.uint32, 0, 2**32, lambda a, b: a // b, zero_free=True),
    _binary_case("mod", np.int64, -10**12, 10**12, _c_mod, zero_free=True),
    _binary_case("truediv", np.int32, -1000, 1000, lambda a, b: a / b, np.float32,
                 zero_free=True, exact=False),
    _binary_case("mod", np.float32, -100, 100, np.fmod, exact=False),
    _binary_case("and", np.int16, -2**15, 2**15, lambda a, b: a & b),
    _binary_case("or", np.uint8, 0, 256, lambda a, b: a | b),
    _binary_case("xor", np.int64, -2**62, 2**62, lambda a, b: a ^ b),
    _binary_case("shl", np.int32, -2**20, 2**20, _wrap(lambda a, b: a << b), b_range=(0, 31)),
    _binary_case("shr", np.int32, -2**30, 2**30, lambda a, b: a >> b, b_range=(0, 31)),
    _binary_case("shr", np.uint32, 0, 2**32, lambda a, b: a >> b, b_range=(0, 31)),
    *[_nan_min_max_case(func, propagate, dtype) for func in ("minimum", "maximum", "clamp")
      for propagate in ("NONE", "ALL") for dtype in (np.float32, np.float16)],
    _shift_right_case(np.int8, np.uint8),
    _shift_right_case(np.int8, np.uint32),
    _shift_right_case(np.int32, np.uint32),
    _shift_right_case(np.int64, np.uint64),
    _binary_case("min", np.int32, -1000, 1000, np.minimum),
    _binary_case("max", np.uint64, 0, 2**63, np.maximum),
    _binary_case("max", np.float16, -10, 10, np.maximum),
    _binary_case("add", np.float16, -10, 10, lambda a, b: a + b),
    _binary_case("mul", np.float64, -10, 10, lambda a, b: a * b),
    _binary_case("lt", np.int32, -5, 5, lambda a, b: a < b, np.bool_),
    _binary_case("eq", np.float32, -2, 2, lambda a, b: a == b, np.bool_),
    # (int8 tensor + i32 runtime scalar) is int32; the literal 3 does not widen it.
    Case("promotion-int8-plus-runtime-i32", scalar_promotion_kernel,
         lambda rng: {"x_ptr": np.arange(-64, 64, dtype=np.int8),
                      "out_ptr": np.zeros(128, np.int32), "s": 100},
         (1,), {"BLOCK": 128, "LITERAL": 3}, ("out_ptr",),
         lambda a: {"out_ptr": (a["x_ptr"].astype(np.int32) + 100) * 3}),
    # (uint8, 3) -> uint8: wraps at 256 before the store widens it.
    Case("promotion-uint8-literal-stays-uint8", scalar_promotion_kernel,
         lambda rng: {"x_ptr": np.arange(128, 256, dtype=np.uint8),
                      "out_ptr": np.zeros(128, np.uint8), "s": np.uint8(1)},
         (1,), {"BLOCK": 128, "LITERAL": 3}, ("out_ptr",),
         lambda a: {"out_ptr": ((a["x_ptr"].astype(np.int64) + 1) * 3 % 256).astype(np.uint8)}),
    # (int8, 1.5): the float literal's kind is higher: fp32.
    Case("promotion-int8-float-literal", scalar_promotion_kernel,
         lambda rng: {"x_ptr": np.arange(-64, 64, dtype=np.int8),
                      "out_ptr": np.zeros(128, np.float32), "s": np.int8(2)},
         (1,), {"BLOCK": 128, "LITERAL": 1.5}, ("out_ptr",),
         lambda a: {"out_ptr": ((a["x_ptr"].astype(np.int32) + 2).astype(np.int8)
                                .astype(np.float32) * 1.5)}),
    Case("constexpr-vs-tensor-division", constexpr_division_kernel,
         lambda rng: {"out_ptr": np.zeros(4, np.int32)},
         (1,), {"A": -7, "B": 2}, ("out_ptr",),
         lambda a: {"out_ptr": np.array([-4, 1, -3, -1], np.int32)}),
    Case("cast-fp32-to-int32-truncates", cast_kernel,
         lambda rng: {"x_ptr": rng.uniform(-1000, 1000, N).astype(np.float32),
                      "out_ptr": np.zeros(N, np.int32), "n": N},
         (4,), {"TO": tl.int32, "BITCAST": False, "BLOCK": 256}, ("out_ptr",),
         lambda a: {"out_ptr": np.trunc(a["x_ptr"]).astype(np.int32)}),
    Case("cast-int32-to-bool", cast_kernel,
         lambda rng: {"x_ptr": rng.integers(-2, 3, N).astype(np.int32),
                      "out_ptr": np.zeros(N, np.bool_), "n": N},
         (4,), {"TO": tl.int1, "BITCAST": False, "BLOCK": 256}, ("out_ptr",),
         lambda a: {"out_ptr": a["x_ptr"] != 0}),
    Case("bitcast-fp32-to-int32", cast_kernel,
         lambda rng: {"x_ptr": rng.standard_normal(N).astype(np.float32),
                      "out_ptr": np.zeros(N, np.int32), "n": N},
         (4,), {"TO": tl.int32, "BITCAST": True, "BLOCK": 256}, ("out_ptr",),
         lambda a: {"out_ptr": a["x_ptr"].view(np.int32)}),
    Case("cast-int16-to-uint8-wraps", cast_kernel,
         lambda rng: {"x_ptr": rng.integers(-2**15, 2**15, N).astype(np.int16),
                      "out_ptr": np.zeros(N, np.uint8), "n": N},
         (4,), {"TO": tl.uint8, "BITCAST": False, "BLOCK": 256}, ("out_ptr",),
         lambda a: {"out_ptr": a["x_ptr"].astype(np.uint8)}),
    Case("cast-uint8-to-fp16", cast_kernel,
         lambda rng: {"x_ptr": rng.integers(0, 256, N).astype(np.uint8),
                      "out_ptr": np.zeros(N, np.float16), "n": N},
         (4,), {"TO": tl.float16, "BITCAST": False, "BLOCK": 256}, ("out_ptr",),
         lambda a: {"out_ptr": a["x_ptr"].astype(np.float16)}),
    Case("roundtrip-fp32-via-bf16", roundtrip_kernel,
         lambda rng: {"x_ptr": np.concatenate([np.array([1.00390625, 1.01171875, -3.0e38, 0.1],
                                                       np.float32),
                                              rng.standard_normal(N - 4).astype(np.float32)]),
                      "out_ptr": np.zeros(N, np.float32), "n": N},
         (4,), {"VIA": tl.bfloat16, "BLOCK": 256}, ("out_ptr",),
         lambda a: {"out_ptr": _round_bf16(a["x_ptr"])}),
    Case("roundtrip-fp32-via-fp16", roundtrip_kernel,
         lambda rng: {"x_ptr": rng.standard_normal(N).astype(np.float32) * 100,
                      "out_ptr": np.zeros(N, np.float32), "n": N},
         (4,), {"VIA": tl.float16, "BLOCK": 256}, ("out_ptr",),
         lambda a: {"out_ptr": a["x_ptr"].astype(np.float16).astype(np.float32)}),
    Case("copy2d-strided", copy2d_kernel,
         lambda rng: {"src": rng.standard_normal((50, 70)).astype(np.float32),
                      "dst": np.zeros((50, 96), np.float32), "M": 50, "N": 70,
                      "stride_src": 70, "stride_dst": 96},
         (4, 3), {"BLOCK_M": 16, "BLOCK_N": 32}, ("dst",),
         lambda a: {"dst": np.pad(a["src"], ((0, 0), (0, 26)))}),
    Case("outer-product-two-layouts", outer_kernel,
         lambda rng: {"x_ptr": rng.standard_normal(32).astype(np.float32),
                      "y_ptr": rng.standard_normal(32).astype(np.float32),
                      "out_ptr": np.zeros(32 * 32, np.float32)},
         (1,), {"BLOCK": 32}, ("out_ptr",),
         lambda a: {"out_ptr": (a["x_ptr"][:, None] * a["y_ptr"][None, :]
                                + a["x_ptr"][None, :]).ravel()}, exact=False),
    Case("where-with-other", where_other_kernel,
         lambda rng: {"x_ptr": rng.uniform(0, 1, 64).astype(np.float32),
                      "out_ptr": np.zeros(64, np.float32), "n": 40},
         (1,), {"BLOCK": 64}, ("out_ptr",),
         lambda a: {"out_ptr": np.where(np.arange(64) < 40,
                                        np.where(a["x_ptr"] > 0.5, a["x_ptr"], 0.25), 0.25)
                    .astype(np.float32)}),
    Case("program-id-2d-grid", grid_kernel,
         lambda rng: {"out_ptr": np.zeros(12, np.int32)},
         (4, 3), {}, ("out_ptr",),
         lambda a: {"out_ptr": (np.arange(12) * 10 + 3).astype(np.int32)}),
    Case("bool-load-store", bool_kernel,
         lambda rng: {"x_ptr": rng.integers(0, 2, 100).astype(np.bool_),
                      "out_ptr": np.zeros(100, np.bool_), "n": 100},
         (1,), {"BLOCK": 128}, ("out_ptr",),
         lambda a: {"out_ptr": ~a["x_ptr"] | (np.arange(100) % 3 == 0)}),
    Case("unary-int", unary_int_kernel,
         lambda rng: {"x_ptr": rng.integers(-1000, 1000, 64).astype(np.int32),
                      "out_ptr": np.zeros(64, np.int32)},
         (1,), {"BLOCK": 64}, ("out_ptr",),
         lambda a: {"out_ptr": np.abs(a["x_ptr"]) + ~a["x_ptr"] + _c_div(a["x_ptr"] + 3,
                                                                          np.full(64, 4, np.int32))}),
]

_MATH_REFERENCES = {
    "exp": (np.exp, (-5, 5)), "exp2": (np.exp2, (-5, 5)), "log": (np.log, (0.01, 100)),
    "log2": (np.log2, (0.01, 100)), "sqrt": (np.sqrt, (0, 100)),
    "rsqrt": (lambda x: 1 / np.sqrt(x), (0.01, 100)), "sin": (np.sin, (-10, 10)),
    "cos": (np.cos, (-10, 10)), "abs": (np.abs, (-5, 5)), "floor": (np.floor, (-5, 5)),
    "ceil": (np.ceil, (-5, 5)), "sigmoid": (lambda x: 1 / (1 + np.exp(-x)), (-8, 8)),
    "fma": (lambda x: x * x + x, (-3, 3)), "clamp": (lambda x: np.clip(x, 0.5, 2.0), (0, 3)),
    "erf": (np.vectorize(math.erf), (-3, 3)),
    "sqrt_rn": (np.sqrt, (0, 100)),
}
for _fn, (_ref, (_lo, _hi)) in _MATH_REFERENCES.items():
    for _dtype in (np.float32, np.float64):
        CASES.append(Case(
            f"math-{_fn}-{np.dtype(_dtype).name}", math_kernel,
            (lambda lo, hi, dt: lambda rng: {"x_ptr": rng.uniform(lo, hi, N).astype(dt),
                                             "out_ptr": np.zeros(N, dt), "n": N})(_lo, _hi, _dtype),
            (4,), {"FN": _fn, "BLOCK": 256}, ("out_ptr",),
            (lambda ref, dt: lambda a: {"out_ptr": ref(a["x_ptr"].astype(np.float64)).astype(dt)})(
                _ref, _dtype),
            exact=False, rtol=2e-6 if _dtype == np.float32 else 1e-12))
CASES.append(Case("math-exp-fp16", math_kernel,
                  lambda rng: {"x_ptr": rng.uniform(-3, 3, N).astype(np.float16),
                               "out_ptr": np.zeros(N, np.float16), "n": N},
                  (4,), {"FN": "exp", "BLOCK": 256}, ("out_ptr",),
                  lambda a: {"out_ptr": np.exp(a["x_ptr"].astype(np.float32)).astype(np.float16)},
                  exact=False, rtol=1e-3))


def _round_bf16(x: np.ndarray) -> np.ndarray:
    bits = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16
    return rounded.astype(np.uint32).view(np.float32)


def run_interpreter(case: Case, seed: int = 0) -> dict:
    """Launches ``case`` on numpy arrays; returns (args, {output: array})."""
    args = case.make_args(np.random.default_rng(seed))
    case.kernel[case.launch_grid(args)](**args, **case.constants)
    return args, {name: args[name] for name in case.outputs}
