"""Matmuls whose K loop may have a producer warp (``tl.range(..., warp_specialize=True)``),
the operand tiles through tensor descriptors: tests/test_warp_specialize.py compiles and runs
them, tests/test_runtime_fake_driver.py builds them into a library (``pairs_manifest``,
``tuned_manifest``)."""
from pathlib import Path

import aotk
import aotk.language as tl

MANIFEST = """
[library]
name = "{library}"
targets = {targets}

[[kernel]]
name = "matmul"
source = "{source}"
function = "{function}"
signature = "*fp16:16, *fp16:16, *fp16:16, i32:8, i32:8, i32:8"
grid = ["cdiv(M, BLOCK_M)", "cdiv(N, BLOCK_N)"]
specialize = "none"
{options}constants = {{ BLOCK_M = 128, BLOCK_N = 128, BLOCK_K = 64, PRODUCER = true }}
"""


def pairs_manifest(num_ctas: int = 2) -> str:
    """An aotk.toml building ``matmul`` with a producer warp for sm_80 and sm_90, its
    programs in pairs (num_ctas = 2) or as ``num_ctas`` says."""
    return MANIFEST.format(library="pairs", targets='["sm_80", "sm_90"]',
                           source=Path(__file__).resolve(), function="matmul",
                           options=f"num_warps = 8\nnum_ctas = {num_ctas}\n")


def tuned_manifest() -> str:
    """An aotk.toml for sm_90 building ``matmul_tuned``, an @autotune of ``matmul`` that a
    project writes to kernels/tuned.py beside it (its configs give num_warps and num_ctas)."""
    return MANIFEST.format(library="tunedpairs", targets='["sm_90"]', source="kernels/tuned.py",
                           function="matmul_tuned", options="")


@aotk.jit
def matmul(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
           BLOCK_K: tl.constexpr, PRODUCER: tl.constexpr):
    """c = a @ b, the operand tiles through descriptors, one program per output tile."""
    a_desc = tl.make_tensor_descriptor(a_ptr, [M, K], [K, 1], [BLOCK_M, BLOCK_K])
    b_desc = tl.make_tensor_descriptor(b_ptr, [K, N], [N, 1], [BLOCK_K, BLOCK_N])
    c_desc = tl.make_tensor_descriptor(c_ptr, [M, N], [N, 1], [BLOCK_M, BLOCK_N])
    row = tl.program_id(0) * BLOCK_M
    col = tl.program_id(1) * BLOCK_N
    acc = tl.zeros((BLOCK_M, BLOCK_N), tl.float32)
    for k in tl.range(0, tl.cdiv(K, BLOCK_K), warp_specialize=PRODUCER):
        acc = tl.dot(a_desc.load([row, k * BLOCK_K]), b_desc.load([k * BLOCK_K, col]), acc)
    c_desc.store([row, col], acc.to(tl.float16))


@aotk.jit
def matmul_halves(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  BLOCK_K: tl.constexpr, PRODUCER: tl.constexpr):
    """The same product with the tile's columns in two accumulators: two dots a trip."""
    HALF: tl.constexpr = BLOCK_N // 2
    a_desc = tl.make_tensor_descriptor(a_ptr, [M, K], [K, 1], [BLOCK_M, BLOCK_K])
    b_desc = tl.make_tensor_descriptor(b_ptr, [K, N], [N, 1], [BLOCK_K, HALF])
    c_desc = tl.make_tensor_descriptor(c_ptr, [M, N], [N, 1], [BLOCK_M, HALF])
    row = tl.program_id(0) * BLOCK_M
    col = tl.program_id(1) * BLOCK_N
    left = tl.zeros((BLOCK_M, HALF), tl.float32)
    right = tl.zeros((BLOCK_M, HALF), tl.float32)
    for k in tl.range(0, tl.cdiv(K, BLOCK_K), warp_specialize=PRODUCER):
        a = a_desc.load([row, k * BLOCK_K])
        left = tl.dot(a, b_desc.load([k * BLOCK_K, col]), left)
        right = tl.dot(a, b_desc.load([k * BLOCK_K, col + HALF]), right)
    c_desc.store([row, col], left.to(tl.float16))
    c_desc.store([row, col + HALF], right.to(tl.float16))
