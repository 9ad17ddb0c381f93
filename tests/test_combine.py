"""tl.reduce / tl.associative_scan with combine functions: the kir they build, the PTX they
lower to, and compile errors that name the line at fault. (Their results are checked by the
cases of tests/kernels/combine.py, run by test_semantics, test_codegen and test_gpu.)"""
import pathlib

import pytest

import aotk
import aotk.language as tl
from aotk.ir import types as T
from tests.kernels.combine import (_larger_with_index, _maximum, reduce_combine_kernel,
                                   scan_combine_kernel)

I32_PTR = T.PointerType(T.int32)
SOURCE_LINES = pathlib.Path(__file__).read_text().splitlines()


def _line_of(marker: str) -> int:
    """1-based line of this file holding ``# error: marker``."""
    return next(i for i, text in enumerate(SOURCE_LINES, 1) if text.endswith(f"# error: {marker}"))


@aotk.jit
def _first_only(a1, b1, a2, b2):
    return a1 + a2


@aotk.jit
def _widening(a, b):
    return (a + b).to(tl.float32)


def _plain_python(a, b):
    return a + b


@aotk.jit
def bad_combine_kernel(x_ptr, out_ptr, CASE: tl.constexpr):
    offs = tl.arange(0, 16)
    x = tl.load(x_ptr + offs)
    if CASE == "count":
        a, b = tl.reduce((x, offs), 0, _first_only)  # error: count
        tl.store(out_ptr, a + b)
    elif CASE == "dtype":
        tl.store(out_ptr + offs, tl.associative_scan(x, 0, _widening))  # error: dtype
    elif CASE == "plain":
        tl.store(out_ptr, tl.reduce(x, 0, _plain_python))  # error: plain
    elif CASE == "shapes":
        v, i = tl.reduce((x, tl.arange(0, 32)), 0, _larger_with_index)  # error: shapes
        tl.store(out_ptr, v + i)
    elif CASE == "scan-axis":
        grid = x[:, None] + offs[None, :]
        tl.store(out_ptr + offs, tl.cumsum(grid, axis=2))  # error: scan-axis
    else:
        tl.store(out_ptr + offs, tl.associative_scan(x, 1, _maximum))  # error: scan-axis-1d


@pytest.mark.parametrize("case, fragment", [
    ("count", "returns 1 value(s), but tl.reduce combines 2 input(s)"),
    ("dtype", "returns float32 for input 0, which is int32"),
    ("plain", "must be an @aotk.jit function"),
    ("shapes", "must have one shape"),
    ("scan-axis", "scan axis 2 is out of range for a 2-d block"),
    ("scan-axis-1d", "scan axis 1 is out of range for a 1-d block"),
])
def test_errors_name_the_line(case, fragment):
    with pytest.raises(aotk.CompilationError) as info:
        bad_combine_kernel.kir({"x_ptr": I32_PTR, "out_ptr": I32_PTR}, {}, {"CASE": case})
    message = str(info.value)
    assert f"test_combine.py:{_line_of(case)}:" in message, message
    assert fragment in message, message


def test_kir_holds_the_combine_region():
    text = str(reduce_combine_kernel.kir({"x_ptr": I32_PTR, "out_ptr": I32_PTR, "out2_ptr": I32_PTR,
                                          "M": T.int32, "N": T.int32}, {},
                                         {"OP": "argmax", "AXIS": 1, "BLOCK_M": 16, "BLOCK_N": 32}))
    header = next(line for line in text.splitlines() if "= reduce [" in line)
    assert "combine=custom" in header and ": i32[16], i32[16] {" in header
    assert "^(%" in text and "yield %" in text


@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
def test_custom_reduce_and_scan_use_warp_shuffles(target):
    signature = "*i32:16, *i32:16, *i32:16, i32, i32"
    reduced = aotk.compile(reduce_combine_kernel, signature,
                           {"OP": "argmax", "AXIS": 1, "BLOCK_M": 4, "BLOCK_N": 1024},
                           num_warps=8, target=target)
    assert "shfl.sync.bfly.b32" in reduced.ptx
    assert reduced.metadata["shared"] > 0   # the warps' partials meet in shared memory
    for reverse, mode in ((False, "up"), (True, "down")):
        scanned = aotk.compile(scan_combine_kernel, "*i32:16, " + signature,
                               {"OP": "recurrence", "AXIS": 1, "REVERSE": reverse, "BLOCK_M": 4,
                                "BLOCK_N": 1024}, num_warps=8, target=target)
        assert f"shfl.sync.{mode}.b32" in scanned.ptx
        assert scanned.metadata["spills"] == 0
