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

import numpy as np
import pytest

import aotk
import aotk.language as tl
from aotk import semantic
from aotk.backend import ptx as ptx_backend
from aotk.language.missing import NOT_PROVIDED

from tests.libdevice_groups import (
    ALL_GROUPS, APPROXIMATE_GROUPS, DIRECTED, EXACT_GROUPS, SHORT, Group, apply_functions,
    as_result, assert_same_bits, assert_within_ulps, interpret, launch_arrays, references)
from tests.libdevice_references import mpmath_module


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
        assert_same_bits(group, name, operands, got[row], as_result(expected[row], group.result))


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
    apply_functions[(1,)](*launch_arrays(group, device, out), FNS=group.functions,
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
