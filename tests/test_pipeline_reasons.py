"""A dot loop that ``passes.pipeline`` leaves as it is says why, on the loop in the gir dump
(``not_pipelined=<reason> (line N)``): the first condition of ``rewrite.dot_operand_loads``
or ``pipeline_shape.analyze_loop`` it fails, naming the op and its line where there is
one. Loops that store each trip or scale a loaded tile before the dot (fla's chunked
ones) are pipelined (tests/test_pipeline_staged_loads.py); one that stores through an
address the pass cannot trace to a kernel argument is not."""
import inspect
import re

import pytest

import aotk
import aotk.language as tl
from tests.kernels.dot import matmul_loop_kernel

MATMUL_SIGNATURE = "*fp16:16, *fp16:16, *fp16:16, i32:16, i32:16, i32:16"


@aotk.jit
def store_through_a_select_kernel(a_ptr, b_ptr, c_ptr, d_ptr, K, BLOCK: tl.constexpr):
    """A K loop that stores its running sum every trip, into c or d by rows."""
    rows = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK, BLOCK], tl.float32)
    tile = rows[:, None] * BLOCK + rows[None, :]
    for k in range(0, K, BLOCK):
        a = tl.load(a_ptr + rows[:, None] * K + k + rows[None, :])
        b = tl.load(b_ptr + (k + rows[:, None]) * BLOCK + rows[None, :])
        acc = tl.dot(a, b, acc)
        tl.store(tl.where(rows[:, None] < 32, c_ptr + tile, d_ptr + tile), acc)


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
def test_a_loop_that_stores_through_an_untraced_address_says_so(target):
    compiled = aotk.compile(store_through_a_select_kernel,
                            "*fp16:16, *fp16:16, *fp32:16, *fp32:16, i32:16",
                            constants={"BLOCK": 64}, num_warps=4, target=target)
    assert "not_pipelined=it stores or updates memory through an address that is not a " \
        "kernel argument's" in _loop_line(compiled.asm["gir"])
    assert "cp.async" not in compiled.asm["ptx"]


@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
def test_a_tile_read_twice_is_copied_ahead_and_read_back(target):
    compiled = aotk.compile(scaled_operand_kernel, "*fp16:16, *fp16:16, *fp32:16, i32:16",
                            constants={"BLOCK": 64}, num_warps=4, target=target)
    gir = compiled.asm["gir"]
    assert "pipeline=0" in _loop_line(gir)
    # a (read by the dot and a sum) and b (scaled) are read back from their stages.
    assert len(re.findall(r"= load \[[^\]]*staged=", gir)) == 2
    assert "ld.global" not in compiled.asm["ptx"]


def test_a_pipelined_loop_has_no_reason():
    compiled = aotk.compile(matmul_loop_kernel, MATMUL_SIGNATURE,
                            constants={"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32},
                            num_warps=4, num_stages=3, target="sm_80")
    assert "not_pipelined" not in compiled.asm["gir"]
    assert "cp.async" in compiled.asm["ptx"]
