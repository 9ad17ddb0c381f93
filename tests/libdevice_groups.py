"""The libdevice functions of tests/test_libdevice.py in groups (operand and result types,
inputs, an independent reference per element), the one kernel that runs a group, and the
comparisons: exact bits, or within a few ulps. In: nothing; out: ``EXACT_GROUPS``,
``APPROXIMATE_GROUPS``, ``interpret``, ``references``, ``assert_same_bits``,
``assert_within_ulps`` and the helpers the GPU tests share.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import aotk
import aotk.language as tl
from aotk import semantic

from tests.libdevice_references import (
    N, conversion_floats, conversion_integers, float_operands, integer_operands,
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
def apply_functions(a_ptr, b_ptr, c_ptr, d_ptr, out_ptr, FNS: tl.constexpr, ARITY: tl.constexpr,
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


def launch_arrays(group, operands, out):
    padded = list(operands) + [operands[0]] * (4 - len(operands))
    return padded + [out]


def interpret(group: Group, operands: list) -> np.ndarray:
    """The group's functions on the interpreter: one row of results per function."""
    size = operands[0].size
    out = np.zeros((len(group.functions), size), group.result)
    apply_functions[(1,)](*launch_arrays(group, operands, out), FNS=group.functions,
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


def as_result(values, dtype) -> np.ndarray:
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
