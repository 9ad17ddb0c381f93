"""tl.extra.libdevice beyond tl.math (aotk.semantic's LIBDEVICE_FUNCTIONS): every name of
Triton's libdevice module, typed as Triton types it, lowered to its ``__nv_`` call, and run by
the interpreter with the GPU's result.

The interpreter is checked against references written here independently of it: exact
rational arithmetic rounded by a quantum-and-remainder rule (directed rounding,
conversions), struct packing (bit casts), Python integers (integer helpers), mpmath
(approximations, within a few float64 ulps). The GPU tests compare the GPU with the
interpreter: bit for bit for the exact functions, within libdevice's stated error for the
approximations.
"""
from __future__ import annotations

import ast
import importlib.util
import os
import re
from dataclasses import dataclass

import numpy as np
import pytest

import aotk
import aotk.language as tl
from aotk import semantic
from aotk.backend import ptx as ptx_backend
from aotk.language.missing import NOT_PROVIDED

from tests.libdevice_references import (
    N, conversion_floats, conversion_integers, float_operands, integer_operands, mpmath_module,
    reference_bessel_order, reference_bit_cast, reference_conversion, reference_exponent,
    reference_integer, reference_rounded, reference_special, special_floats, wrap_integer)

N_APPROXIMATE = 128         # per approximate group (mpmath references are slow)
DIRECTED = semantic.DIRECTED_ROUNDINGS
ROUNDINGS = semantic.LIBDEVICE_ROUNDINGS
NUMPY = {"fp32": np.float32, "fp64": np.float64, "i32": np.int32, "u32": np.uint32,
         "i64": np.int64, "u64": np.uint64}
SHORT = {np.dtype(v): k for k, v in NUMPY.items()}


# ---------------------------------------------------------------------------------------
# One kernel for every group: out[i, :] = FNS[i](operands...)
# ---------------------------------------------------------------------------------------

@aotk.jit
def _apply(a_ptr, b_ptr, c_ptr, d_ptr, out_ptr, FNS: tl.constexpr, ARITY: tl.constexpr,
           N: tl.constexpr):
    offs = tl.arange(0, N)
    for i in tl.static_range(len(FNS)):
        function = getattr(tl.extra.libdevice, FNS[i])
        if ARITY == 1:
            result = function(tl.load(a_ptr + offs))
        elif ARITY == 2:
            result = function(tl.load(a_ptr + offs), tl.load(b_ptr + offs))
        elif ARITY == 3:
            result = function(tl.load(a_ptr + offs), tl.load(b_ptr + offs),
                              tl.load(c_ptr + offs))
        else:
            result = function(tl.load(a_ptr + offs), tl.load(b_ptr + offs),
                              tl.load(c_ptr + offs), tl.load(d_ptr + offs))
        tl.store(out_ptr + i * N + offs, result)


@dataclass
class Group:
    """Functions sharing operand and result types, the inputs they run on, and the
    reference of one element: ``reference(name, *python_values) -> value``."""
    name: str
    functions: tuple
    operands: tuple             # numpy dtype of each operand
    result: type
    make: object                # rng -> list of arrays, one per operand
    reference: object
    exact: bool = True
    ulps: float = 0             # approximations: allowed error, in ulps of the result type
    atol: float = 0.0           # ... plus this (absolute: Bessel functions near their zeros)


def _launch_arrays(group, operands, out):
    padded = list(operands) + [operands[0]] * (4 - len(operands))
    return padded + [out]


def interpret(group: Group, operands: list) -> np.ndarray:
    """The group's functions on the interpreter: one row of results per function."""
    size = operands[0].size
    out = np.zeros((len(group.functions), size), group.result)
    _apply[(1,)](*_launch_arrays(group, operands, out), FNS=group.functions,
                 ARITY=len(group.operands), N=size)
    return out


def references(group: Group, operands: list) -> np.ndarray:
    rows = []
    for name in group.functions:
        values = [group.reference(name, *(v.item() for v in element))
                  for element in zip(*operands)]
        rows.append(np.array(values, dtype=object))
    return np.array(rows, dtype=object)


# ---------------------------------------------------------------------------------------
# The groups
# ---------------------------------------------------------------------------------------

def _rounded_groups():
    groups = []
    for short, dtype in (("fp32", np.float32), ("fp64", np.float64)):
        for arity, operations in ((2, ("add", "sub", "mul", "div")), (1, ("rcp", "sqrt")),
                                  (3, ("fma",))):
            modes = DIRECTED + (("rn",) if arity == 3 else ())
            functions = tuple(f"{op}_{mode}" for op in operations for mode in modes)
            groups.append(Group(f"rounded-{short}-{arity}", functions, (dtype,) * arity, dtype,
                                lambda rng, d=dtype, a=arity: float_operands(rng, d, a),
                                reference_rounded(dtype)))
    return groups


def _conversion_groups():
    by_types = {}
    for name, (operand, result) in semantic.LIBDEVICE_CONVERSIONS.items():
        by_types.setdefault((operand, result), []).append(name)
    groups = []
    for (operand, result), names in by_types.items():
        source = NUMPY[operand]
        make = (lambda rng, d=source: [conversion_floats(rng, d)]) if operand.startswith("fp") \
            else (lambda rng, d=source: [conversion_integers(rng, d)])
        groups.append(Group(f"conversion-{operand}-{result}",
                            tuple(f"{name}_{mode}" for name in names for mode in ROUNDINGS),
                            (source,), NUMPY[result], make,
                            lambda name, x: reference_conversion(name, x)))
    groups.append(Group("int2double", ("int2double_rn",), (np.int32,), np.float64,
                        lambda rng: integer_operands(rng, np.int32, 1), lambda name, x: float(x)))
    groups.append(Group("uint2double", ("uint2double_rn",), (np.uint32,), np.float64,
                        lambda rng: integer_operands(rng, np.uint32, 1), lambda name, x: float(x)))
    return groups


def _bit_cast_groups():
    groups = []
    for name, (operand, result) in semantic.LIBDEVICE_BIT_CASTS.items():
        dtype = NUMPY[operand]
        make = (lambda rng, d=dtype: [float_operands(rng, d, 1)[0]]) if operand.startswith("fp") \
            else (lambda rng, d=dtype: integer_operands(rng, d, 1))
        groups.append(Group(f"bits-{name}", (name,), (dtype,), NUMPY[result], make,
                            reference_bit_cast))
    groups.append(Group("bits-hiloint2double", ("hiloint2double",), (np.int32, np.int32),
                        np.float64, lambda rng: integer_operands(rng, np.int32, 2),
                        reference_bit_cast))
    return groups


def _integer_groups():
    return [
        Group("integer-i32", ("mul24", "hadd", "rhadd"), (np.int32, np.int32), np.int32,
              lambda rng: integer_operands(rng, np.int32, 2), reference_integer(True)),
        Group("integer-u32", ("mul24", "hadd", "rhadd"), (np.uint32, np.uint32), np.uint32,
              lambda rng: integer_operands(rng, np.uint32, 2), reference_integer(False)),
        Group("sad-i32", ("sad",), (np.int32, np.int32, np.uint32), np.int32,
              lambda rng: integer_operands(rng, np.int32, 2) + integer_operands(rng, np.uint32, 1),
              reference_integer(True)),
        Group("sad-u32", ("sad",), (np.uint32,) * 3, np.uint32,
              lambda rng: integer_operands(rng, np.uint32, 3), reference_integer(False)),
        Group("byte_perm", ("byte_perm",), (np.int32,) * 3, np.int32,
              lambda rng: integer_operands(rng, np.int32, 3), reference_integer(True)),
    ]


def _exponent_groups():
    groups = []
    for short, dtype in (("fp32", np.float32), ("fp64", np.float64)):
        reference = reference_exponent(dtype)
        some_floats = lambda rng, d=dtype: [float_operands(rng, d, 1)[0]]   # noqa: E731
        exponents = np.array([0, 1, -1, 2 ** 31 - 1, -2 ** 31, 2000, -2000, 5000, -5000, 130,
                              -150, 1100, -1075], np.int32)
        groups += [
            Group(f"integral-{short}", ("llrint", "llround"), (dtype,), np.int64,
                  lambda rng, d=dtype: [conversion_floats(rng, d)], reference),
            Group(f"ilogb-{short}", ("ilogb",), (dtype,), np.int32, some_floats, reference),
            Group(f"logb-{short}", ("logb",), (dtype,), dtype, some_floats, reference),
            Group(f"ldexp-{short}", ("ldexp", "scalbn"), (dtype, np.int32), dtype,
                  lambda rng, d=dtype, e=exponents: [
                      float_operands(rng, d, 1)[0],
                      np.concatenate([e, rng.integers(-300, 300, N - e.size)]).astype(np.int32)],
                  reference),
        ]
    groups.append(Group("saturatef", ("saturatef",), (np.float32,), np.float32,
                        lambda rng: [float_operands(rng, np.float32, 1)[0]],
                        reference_exponent(np.float32)))
    return groups


EXACT_GROUPS = (_rounded_groups() + _conversion_groups() + _bit_cast_groups()
                + _integer_groups() + _exponent_groups())


def _with_specials(values, dtype, extra=()):
    head = np.array(special_floats(dtype) + list(extra), dtype)
    return np.concatenate([head, values[:N_APPROXIMATE - head.size]]).astype(dtype)


def _approximate_groups():
    groups = []
    for short, dtype in (("fp32", np.float32), ("fp64", np.float64)):
        fp32 = dtype == np.float32
        # float64 computation rounded once: within an ulp of fp32; a few of fp64 (Bessel
        # functions: plus an absolute error near their zeros, and the order recurrences)
        close = 1 if fp32 else 4
        zeros = (2.404825557695773, 3.8317059702075125, 5.520078110286311, 0.8935769662791675)
        uniform = lambda low, high, d=dtype, extra=(): (   # noqa: E731
            lambda rng: [_with_specials(rng.uniform(low, high, N_APPROXIMATE), d, extra)])
        groups += [
            Group(f"bessel-{short}", ("j0", "j1", "y0", "y1"), (dtype,), dtype,
                  uniform(-40, 40, extra=zeros + (1e3, 12345.678)), reference_special, False,
                  close, 1e-16),
            Group(f"bessel-order-{short}", ("jn", "yn"), (np.int32, dtype), dtype,
                  lambda rng, d=dtype: [rng.integers(-1, 7, N_APPROXIMATE).astype(np.int32),
                                        _with_specials(rng.uniform(0, 40, N_APPROXIMATE), d,
                                                       (25.0, 100.0))],
                  reference_bessel_order(dtype), False, 1 if fp32 else 8, 1e-16),
            Group(f"bessel-i-{short}", ("cyl_bessel_i0", "cyl_bessel_i1"), (dtype,), dtype,
                  uniform(-100, 100, extra=(29.9, 30.1, 700.0)), reference_special, False,
                  close),
            # libdevice's own exp (tl.exp on fp32 is Triton's approximation instead)
            Group(f"exp-{short}", ("exp",), (dtype,), dtype,
                  uniform(-80, 80, extra=(-104.0, -87.5, 88.7, 89.0, 0.0, -0.0)),
                  reference_special, False, 2),
            Group(f"erfcx-{short}", ("erfcx",), (dtype,), dtype,
                  uniform(-10, 30, extra=(-30.0, 9.99, 10.0, 1e5)), reference_special, False,
                  close),
            Group(f"erfcinv-{short}", ("erfcinv",), (dtype,), dtype,
                  uniform(0, 2, extra=(1e-30, 1e-10, 2.0, 2.5, 1 - 1e-7)), reference_special,
                  False, close),
            Group(f"normcdfinv-{short}", ("normcdfinv",), (dtype,), dtype,
                  uniform(0, 1, extra=(1e-30, 1e-10, 0.999999, 1.5)), reference_special,
                  False, close),
        ]
        for arity, names in ((2, ("rhypot",)), (3, ("norm3d", "rnorm3d")),
                             (4, ("norm4d", "rnorm4d"))):
            groups.append(Group(
                f"norm{arity}-{short}", names, (dtype,) * arity, dtype,
                lambda rng, d=dtype, a=arity: [
                    np.concatenate([float_operands(rng, d, 2)[k % 2][:225],
                                    (rng.standard_normal(31) * 10.0 ** rng.uniform(-30, 30, 31))
                                    ]).astype(d)
                    for k in range(a)],
                reference_special, False, close))
    return groups


APPROXIMATE_GROUPS = _approximate_groups()
ALL_GROUPS = EXACT_GROUPS + APPROXIMATE_GROUPS


# ---------------------------------------------------------------------------------------
# Comparisons
# ---------------------------------------------------------------------------------------

def _unsigned_bits(dtype):
    return {4: np.uint32, 8: np.uint64}[np.dtype(dtype).itemsize]


def _as_result(values, dtype) -> np.ndarray:
    """Reference values (Python numbers) in the result dtype: integers wrapped to its width
    (libdevice's uint conversions are declared signed, as Triton declares them)."""
    if np.issubdtype(dtype, np.integer):
        bits, signed = np.dtype(dtype).itemsize * 8, np.issubdtype(dtype, np.signedinteger)
        return np.array([wrap_integer(int(v), bits, signed) for v in values], dtype)
    return np.array([float(v) for v in values], np.float64).astype(dtype)


def _describe(group, name, operands, index, got, expected):
    inputs = ", ".join(repr(a[index].item()) for a in operands)
    return f"{name}({inputs}) = {got[index]!r}, expected {expected[index]!r}"


def assert_same_bits(group, name, operands, got, expected):
    """Equal bit for bit (signed zeros apart), NaN where NaN is expected (any payload)."""
    if np.issubdtype(got.dtype, np.floating):
        nan = np.isnan(expected)
        same = (np.isnan(got) == nan) & (nan | (got.view(_unsigned_bits(got.dtype))
                                                == expected.view(_unsigned_bits(got.dtype))))
    else:
        same = got == expected
    wrong = np.flatnonzero(~same)
    assert wrong.size == 0, f"{group.name}: {wrong.size} wrong, e.g. " + "; ".join(
        _describe(group, name, operands, i, got, expected) for i in wrong[:5])


def assert_within_ulps(group, name, operands, got, expected, ulps, atol):
    """|got - expected| within ``ulps`` of the result type's ulp at expected, plus ``atol``;
    NaN and infinities exactly where expected."""
    with np.errstate(all="ignore"):     # infinities and NaN are compared apart
        exact = np.asarray(expected, np.float64)
        rounded = exact.astype(got.dtype)
        special = ~np.isfinite(rounded)
        spacing = np.spacing(np.abs(rounded).astype(got.dtype)).astype(np.float64)
        error = np.abs(got.astype(np.float64) - exact)
        close = np.where(special, (got == rounded) | (np.isnan(got) & np.isnan(rounded)),
                         error <= ulps * spacing + atol)
    wrong = np.flatnonzero(~close)
    assert wrong.size == 0, f"{group.name}: {wrong.size} off, e.g. " + "; ".join(
        _describe(group, name, operands, i, got, rounded) for i in wrong[:5])


# ---------------------------------------------------------------------------------------
# Tests: coverage and typing
# ---------------------------------------------------------------------------------------

def _triton_libdevice_table() -> dict:
    """Triton's libdevice module, read (not imported): name -> {operand dtypes: (symbol,
    result dtype)}, in aotk's short type names."""
    spec = importlib.util.find_spec("triton")
    if spec is None or spec.origin is None:
        pytest.skip("triton is not installed")
    path = os.path.join(os.path.dirname(spec.origin), "language", "extra", "cuda",
                        "libdevice.py")
    short = {"fp32": "fp32", "fp64": "fp64", "int32": "i32", "uint32": "u32", "int64": "i64",
             "uint64": "u64"}
    table = {}
    for function in ast.parse(open(path).read()).body:
        if not isinstance(function, ast.FunctionDef):
            continue
        for node in ast.walk(function):
            if isinstance(node, ast.Dict):
                for key, value in zip(node.keys, node.values):
                    if isinstance(key, ast.Tuple) and isinstance(value, ast.Tuple):
                        operands = tuple(short[e.args[0].value] for e in key.elts)
                        table.setdefault(function.name, {})[operands] = (
                            value.elts[0].value, short[value.elts[1].args[0].value])
    return table


def test_every_triton_libdevice_function_has_tritons_symbol_and_types():
    from aotk.backend.math import LIBDEVICE
    table = _triton_libdevice_table()
    assert set(table) <= set(tl.extra.libdevice.__all__)
    checked = 0
    for name, signatures in table.items():
        if name not in semantic.ALL_MATH_FUNCTIONS:
            continue    # a core builtin (exp, floor, ...)
        row = semantic.ALL_MATH_FUNCTIONS[name]
        for operands, (symbol, result) in signatures.items():
            if name == "pow" and operands[1] == "i32":
                continue    # aotk's pow promotes an int exponent (powf); Triton calls powi
            signature = operands[0] if len(set(operands)) == 1 else tuple(operands)
            assert signature in row.operands, (name, operands)
            assert LIBDEVICE[name][signature] == symbol, (name, operands)
            assert row.result_type(signature) == result, (name, operands)
            checked += 1
    assert checked > 250


def test_nothing_of_libdevice_is_missing_and_cuda_libdevice_is_the_same():
    assert NOT_PROVIDED["aotk.language.extra.libdevice"] == ()
    for name in semantic.LIBDEVICE_FUNCTIONS:
        assert getattr(tl.extra.cuda.libdevice, name) is getattr(tl.extra.libdevice, name)
        assert name in tl.extra.cuda.libdevice.__all__
    with pytest.raises(AttributeError, match="has no attribute 'no_such_function'"):
        tl.extra.libdevice.no_such_function   # noqa: B018


def test_every_new_function_and_signature_is_tested_here():
    tested = {(name, semantic.operand_signature(semantic_type(d) for d in group.operands))
              for group in ALL_GROUPS for name in group.functions}
    tested.add(("rcp64h", "fp64"))    # test_rcp64h_is_a_coarse_reciprocal_...
    wanted = {(name, signature) for name, row in semantic.LIBDEVICE_FUNCTIONS.items()
              for signature in row.operands}
    assert wanted == tested


def semantic_type(dtype):
    from aotk.ir import types as T
    return T.DTYPE_BY_SHORT[SHORT[np.dtype(dtype)]]


@aotk.jit
def _typed(x_ptr, y_ptr, z_ptr, out_ptr, FN: tl.constexpr, LITERAL: tl.constexpr):
    offs = tl.arange(0, 16)
    x, y, z = tl.load(x_ptr + offs), tl.load(y_ptr + offs), tl.load(z_ptr + offs)
    function = getattr(tl.extra.libdevice, FN)
    if LITERAL == "second":
        result = function(x, 3)
    elif LITERAL == "first":
        result = function(2, y)
    elif LITERAL == "three":
        result = function(x, y, z)
    else:
        result = function(x, y)
    tl.store(out_ptr + offs, result)


def _result_type(fn, literal, *types):
    signature = ", ".join(f"*{t}:16" for t in types) + ", *fp64:16"
    listing = str(aotk.compile(_typed, signature, {"FN": fn, "LITERAL": literal},
                               target="sm_80").kir)
    line = next(l for l in listing.splitlines() if f"math [function={fn}]" in l)
    return line.split(" : ")[1].split("[")[0]


@pytest.mark.parametrize("fn, literal, types, result", [
    ("ldexp", "second", ("fp32", "fp32", "fp32"), "fp32"),    # x * 2**3: the literal is i32
    ("ldexp", "none", ("fp64", "i32", "fp32"), "fp64"),
    ("jn", "first", ("fp32", "fp64", "fp32"), "fp64"),        # the order first, then x
    ("sad", "three", ("i32", "i32", "u32"), "i32"),           # (i32, i32, u32) as Triton's
    ("sad", "three", ("u32", "u32", "u32"), "u32"),
    ("hiloint2double", "none", ("i32", "i32", "i32"), "fp64"),
    ("norm3d", "three", ("fp32", "fp32", "fp32"), "fp32"),
    ("fma_rz", "three", ("fp64", "fp64", "fp64"), "fp64"),
])
def test_libdevice_typing(fn, literal, types, result):
    assert _result_type(fn, literal, *types) == result


@pytest.mark.parametrize("fn, literal, types, message", [
    ("ldexp", "none", ("fp32", "i64", "fp32"),
     r"tl.ldexp takes operands of types \(fp32, i32\) or \(fp64, i32\), got \(float32, int64\)"),
    ("sad", "three", ("i32", "i32", "i32"),
     r"tl.sad takes operands of types \(i32, i32, u32\) or \(u32, u32, u32\)"),
    ("hadd", "none", ("i64", "i64", "i64"),
     r"tl.hadd needs i32 or u32 operands, got int64; cast with .to\(tl.int32\)"),
    ("uint2float_rz", "none", ("i32", "i32", "i32"), "arity"),
])
def test_libdevice_typing_errors(fn, literal, types, message):
    if message == "arity":
        message = "uint2float_rz.* takes 1 positional argument but 2 were given"
    with pytest.raises(aotk.CompilationError, match=message):
        _result_type(fn, literal, *types)


# ---------------------------------------------------------------------------------------
# Tests: the interpreter against the references
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("group", EXACT_GROUPS, ids=lambda g: g.name)
def test_interpreter_is_exact(group):
    operands = group.make(np.random.default_rng(0))
    got = interpret(group, operands)
    expected = references(group, operands)
    for row, name in enumerate(group.functions):
        assert_same_bits(group, name, operands, got[row], _as_result(expected[row], group.result))


@pytest.mark.parametrize("group", APPROXIMATE_GROUPS, ids=lambda g: g.name)
def test_interpreter_approximations_within_a_few_ulps(group):
    mpmath_module()
    operands = group.make(np.random.default_rng(0))
    got = interpret(group, operands)
    expected = references(group, operands)
    for row, name in enumerate(group.functions):
        assert_within_ulps(group, name, operands, got[row], expected[row], group.ulps,
                           group.atol)


def test_rcp64h_is_a_coarse_reciprocal_flushing_subnormals():
    x = np.array([3.0, -7.0, 1e-300, 1e300, 0.0, -0.0, np.inf, np.nan, 5e-324, 1e-310,
                  1.7e308, 0.1, -1e-5, 123456.789, 2.0, 0.75], np.float64)
    group = Group("rcp64h", ("rcp64h",), (np.float64,), np.float64, None, None)
    got = interpret(group, [x])[0]
    with np.errstate(all="ignore"):
        exact = 1 / x
    tiny = np.finfo(np.float64).tiny
    normal = np.isfinite(exact) & (np.abs(exact) > tiny) & (np.abs(x) > tiny)
    assert np.all(np.abs(got[normal] / exact[normal] - 1) < 2.0 ** -19)
    assert np.all((got.view(np.uint64) & np.uint64(0xFFFFFFFF)) == 0)   # the low word is zero
    assert got[4] == np.inf and got[5] == -np.inf and got[6] == 0 and np.isnan(got[7])
    assert got[8] == np.inf and got[9] == np.inf      # subnormal inputs are flushed to zero
    assert got[10] == 0                                # as are subnormal results


# ---------------------------------------------------------------------------------------
# Tests: GPU code
# ---------------------------------------------------------------------------------------

_TYPE_INDEX = {"fp32": 0, "fp64": 1, "i32": 2, "u32": 3, "i64": 4, "u64": 5}
_LLVM_TYPES = {"fp32": "float", "fp64": "double", "i32": "i32", "u32": "i32", "i64": "i64",
               "u64": "i64"}


@aotk.jit
def _every_call(f32_ptr, f64_ptr, i32_ptr, u32_ptr, i64_ptr, u64_ptr, out_ptr,
                CALLS: tl.constexpr, N: tl.constexpr):
    """out[i, :] = CALLS[i][0](operands of the types CALLS[i][1] names), as float64."""
    offs = tl.arange(0, N)
    values = (tl.load(f32_ptr + offs), tl.load(f64_ptr + offs), tl.load(i32_ptr + offs),
              tl.load(u32_ptr + offs), tl.load(i64_ptr + offs), tl.load(u64_ptr + offs))
    for i in tl.static_range(len(CALLS)):
        function = getattr(tl.extra.libdevice, CALLS[i][0])
        kinds: tl.constexpr = CALLS[i][1]
        if len(kinds) == 1:
            result = function(values[kinds[0]])
        elif len(kinds) == 2:
            result = function(values[kinds[0]], values[kinds[1]])
        elif len(kinds) == 3:
            result = function(values[kinds[0]], values[kinds[1]], values[kinds[2]])
        else:
            result = function(values[kinds[0]], values[kinds[1]], values[kinds[2]],
                              values[kinds[3]])
        tl.store(out_ptr + i * N + offs, result.to(tl.float64))


def _operand_kinds(row, signature):
    return list(signature) if isinstance(signature, tuple) else [signature] * row.arity


def _ptx_instruction(name: str) -> str | None:
    """The PTX instruction a directed-rounding function must become (rd is PTX's rm, ru
    its rp); None where the name has no directed rounding."""
    stem, _, mode = name.rpartition("_")
    if mode not in DIRECTED or not stem:
        return None
    ptx_mode = {"rz": "rz", "rd": "rm", "ru": "rp"}[mode]
    if stem in semantic.ROUNDED_ARITHMETIC:
        # fp32 flushes denormals (libdevice's __CUDA_FTZ reflects to 1, as in Triton); fp64
        # has no .ftz: the caller checks both
        return f"{stem}.{ptx_mode}.ftz.f32"
    operand, _ = semantic.LIBDEVICE_CONVERSIONS[stem]
    ptx_type = {"fp32": "f32", "fp64": "f64", "i32": "s32", "u32": "u32", "i64": "s64",
                "u64": "u64"}
    target = {"int": "s32", "uint": "u32", "ll": "s64", "ull": "u64", "float": "f32",
              "double": "f64"}[stem.split("2")[1]]
    rounding = ptx_mode + "i" if target[0] in "su" else ptx_mode
    # A float operand of fp32, or an fp32 result rounded from fp64, flushes denormals
    # (__CUDA_FTZ = 1, as in Triton); integers have none to flush.
    ftz = ".ftz" if operand == "fp32" or (target == "f32" and operand == "fp64") else ""
    return f"cvt.{rounding}{ftz}.{target}.{ptx_type[operand]}"


@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
def test_every_function_compiles_to_its_libdevice_call(target, monkeypatch):
    """All of LIBDEVICE_FUNCTIONS in one kernel: the LLVM module before libdevice is linked
    calls each __nv_ symbol with the LLVM types of its signature, ptxas takes the result,
    and the directed roundings reach PTX as instructions of that rounding."""
    from aotk.backend.math import LIBDEVICE
    modules = []
    emit = ptx_backend.emit_ptx
    monkeypatch.setattr(ptx_backend, "emit_ptx",
                        lambda text, *args, **kwargs: modules.append(text) or
                        emit(text, *args, **kwargs))
    calls, expected = [], set()
    for name, row in semantic.LIBDEVICE_FUNCTIONS.items():
        for signature in row.operands:
            kinds = _operand_kinds(row, signature)
            calls.append((name, tuple(_TYPE_INDEX[k] for k in kinds)))
            expected.add((LIBDEVICE[name][signature], _LLVM_TYPES[row.result_type(signature)],
                          tuple(_LLVM_TYPES[k] for k in kinds)))
    compiled = aotk.compile(_every_call, "*fp32:16, *fp64:16, *i32:16, *u32:16, *i64:16, "
                            "*u64:16, *fp64:16", {"CALLS": tuple(calls), "N": 32},
                            target=target, num_warps=1)
    assert compiled.cubin[:4] == b"\x7fELF"
    found = {(symbol, result, tuple(re.findall(r"(\w+) %", arguments)))
             for result, symbol, arguments in re.findall(
                 r'call (\w+) @"?(__nv_\w+)"?\(([^)]*)\)', modules[-1])}
    assert expected <= found, sorted(expected - found)[:5]
    for name, row in semantic.LIBDEVICE_FUNCTIONS.items():
        instruction = _ptx_instruction(name)
        if instruction and row.operands == ("fp32", "fp64"):
            assert instruction in compiled.ptx, name
            assert instruction.replace(".ftz.f32", ".f64") in compiled.ptx, name
        elif instruction:
            assert instruction in compiled.ptx, (name, instruction)


# ---------------------------------------------------------------------------------------
# Tests: the GPU against the interpreter
# ---------------------------------------------------------------------------------------

def _run_on_gpu(torch, group, operands):
    device = [torch.from_numpy(np.ascontiguousarray(a)).cuda() for a in operands]
    out = torch.from_numpy(np.zeros((len(group.functions), operands[0].size),
                                    group.result)).cuda()
    _apply[(1,)](*_launch_arrays(group, device, out), FNS=group.functions,
                 ARITY=len(group.operands), N=operands[0].size)
    return out.cpu().numpy()


def flushed_somewhere(values, dtype=np.float32) -> np.ndarray:
    """Where ``values`` (of any dtype) hold an fp32 subnormal: an input or result that the
    GPU's flush-to-zero (libdevice's __CUDA_FTZ = 1, Triton's default) turns into a zero."""
    values = np.asarray(values)
    if values.dtype != dtype:
        return np.zeros(values.shape, bool)
    magnitude = np.abs(values)
    return (magnitude > 0) & (magnitude < np.finfo(dtype).tiny)


def _keep(group, operands, expected):
    """Where the interpreter (numpy: no flush, like Triton's interpreter) and the GPU agree
    by construction: no fp32 operand and no fp32 result is subnormal. Those elements are
    compared against Triton on the GPU instead (tests/test_libdevice_triton.py)."""
    flushed = flushed_somewhere(expected)
    for operand in operands:
        flushed = flushed | flushed_somewhere(operand)
    return ~flushed


def _assert_every_row(group, check):
    """``check(row, name)`` for every function of the group; one failure lists them all
    (a group's functions fail independently: the first alone hides the rest)."""
    failures = []
    for row, name in enumerate(group.functions):
        try:
            check(row, name)
        except AssertionError as error:
            failures.append(str(error).split("\n")[0])
    assert not failures, "\n".join(failures)


@pytest.mark.gpu
@pytest.mark.parametrize("group", EXACT_GROUPS, ids=lambda g: g.name)
def test_gpu_matches_interpreter_bit_for_bit(group):
    torch = pytest.importorskip("torch")
    operands = group.make(np.random.default_rng(1))
    expected = interpret(group, operands)
    got = _run_on_gpu(torch, group, operands)

    def check(row, name):
        keep = _keep(group, operands, expected[row])
        assert_same_bits(group, name, [o[keep] for o in operands], got[row][keep],
                         expected[row][keep])
    _assert_every_row(group, check)


@pytest.mark.gpu
@pytest.mark.parametrize("group", APPROXIMATE_GROUPS, ids=lambda g: g.name)
def test_gpu_approximations_match_interpreter_within_libdevice_error(group):
    """libdevice's stated bounds are a few ulps (fp32 Bessel functions: 2.2e-6 absolute for
    |x| < 8, norms 2 ulps ...): 16 ulps, plus 1e-5 (fp32) / 1e-12 (fp64) absolute for the
    Bessel functions near their zeros."""
    torch = pytest.importorskip("torch")
    operands = group.make(np.random.default_rng(1))
    expected = interpret(group, operands)
    got = _run_on_gpu(torch, group, operands)
    bessel = "bessel" in group.name and "bessel-i" not in group.name
    atol = (1e-5 if group.result == np.float32 else 1e-12) if bessel else 0.0

    def check(row, name):
        keep = _keep(group, operands, np.asarray(expected[row], group.result))
        assert_within_ulps(group, name, [o[keep] for o in operands], got[row][keep],
                           expected[row][keep], 16, atol)
    _assert_every_row(group, check)
