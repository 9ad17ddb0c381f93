"""A dot loop that ``passes.pipeline`` leaves as it is says why, on the loop in the gir dump
(``not_pipelined=<reason> (line N)``): the first condition of ``rewrite.dot_operand_loads``
or ``pipeline_shape.analyze_loop`` it fails. Kernels like fla's chunked ones, whose loops
store each trip or scale a loaded tile before the dot, run unpipelined; the dump names the
op and its line."""
import inspect

import pytest

import aotk
import aotk.language as tl
from tests.kernels.dot import matmul_loop_kernel

MATMUL_SIGNATURE = "*fp16:16, *fp16:16, *fp16:16, i32:16, i32:16, i32:16"


@aotk.jit
def store_each_trip_kernel(a_ptr, b_ptr, c_ptr, K, BLOCK: tl.constexpr):
    """A K loop that stores its running sum every trip."""
    rows = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK, BLOCK], tl.float32)
    for k in range(0, K, BLOCK):
        a = tl.load(a_ptr + rows[:, None] * K + k + rows[None, :])
        b = tl.load(b_ptr + (k + rows[:, None]) * BLOCK + rows[None, :])
        acc = tl.dot(a, b, acc)
        tl.store(c_ptr + rows[:, None] * BLOCK + rows[None, :], acc)


@aotk.jit
def scaled_operand_kernel(a_ptr, b_ptr, c_ptr, K, BLOCK: tl.constexpr):
    """B is scaled after its load, A's tile is read by the dot and by a sum as well."""
    rows = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK, BLOCK], tl.float32)
    total = tl.zeros([BLOCK], tl.float32)
    for k in range(0, K, BLOCK):
        a = tl.load(a_ptr + rows[:, None] * K + k + rows[None, :])
        b = tl.load(b_ptr + (k + rows[:, None]) * BLOCK + rows[None, :])
        acc = tl.dot(a, b * 2, acc)
        total += tl.sum(a.to(tl.float32), 1)
    tl.store(c_ptr + rows[:, None] * BLOCK + rows[None, :], acc + total[:, None])


def _loop_line(gir: str) -> str:
    return next(line for line in gir.splitlines() if " = for [" in line)


def _line_of(kernel, text: str) -> int:
    lines, first = inspect.getsourcelines(kernel.fn)
    return first + next(i for i, line in enumerate(lines) if text in line)


@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
def test_a_loop_that_stores_each_trip_names_the_store(target):
    compiled = aotk.compile(store_each_trip_kernel, "*fp16:16, *fp16:16, *fp32:16, i32:16",
                            constants={"BLOCK": 64}, num_warps=4, target=target)
    line = _line_of(store_each_trip_kernel, "tl.store(")
    assert f"not_pipelined=its body has a store (line {line})" in _loop_line(compiled.asm["gir"])
    assert "cp.async" not in compiled.asm["ptx"]


@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
def test_a_loop_whose_operand_tile_is_read_twice_names_the_reader(target):
    compiled = aotk.compile(scaled_operand_kernel, "*fp16:16, *fp16:16, *fp32:16, i32:16",
                            constants={"BLOCK": 64}, num_warps=4, target=target)
    line = _line_of(scaled_operand_kernel, "total +=")
    assert f"not_pipelined=a dot operand's load is also read by a cast (line {line})" in \
        _loop_line(compiled.asm["gir"])


def test_a_pipelined_loop_has_no_reason():
    compiled = aotk.compile(matmul_loop_kernel, MATMUL_SIGNATURE,
                            constants={"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32},
                            num_warps=4, num_stages=3, target="sm_80")
    assert "not_pipelined" not in compiled.asm["gir"]
    assert "cp.async" in compiled.asm["ptx"]
