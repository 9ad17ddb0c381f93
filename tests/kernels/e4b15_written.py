"""float8e4b15 kernels written against Triton's API (``import triton``): the GPU test runs
them once under Triton and once under aotk (the import redirection) and compares the bits."""
import triton
import triton.language as tl
from triton.language.extra import cuda


@triton.jit
def to_e4b15(x_ptr, codes_ptr, n, BLOCK: tl.constexpr, BY_NAME: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    if BY_NAME:
        y = cuda.convert_custom_float8_sm70(x, tl.float8e4b15)
    else:
        y = x.to(tl.float8e4b15)
    tl.store(codes_ptr + offs, y.to(tl.uint8, bitcast=True), mask=mask)


@triton.jit
def from_e4b15(codes_ptr, half_ptr, float_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    codes = tl.load(codes_ptr + offs, mask=mask).to(tl.float8e4b15, bitcast=True)
    tl.store(half_ptr + offs, codes.to(tl.float16), mask=mask)
    tl.store(float_ptr + offs, cuda.convert_custom_float8_sm80(codes, tl.float32), mask=mask)


@triton.jit
def dot_e4b15(a_ptr, b_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    """A [M, K] @ B [K, N], both e4b15 codes: Triton upcasts both operands to fp16."""
    rm, rn, rk = tl.arange(0, M), tl.arange(0, N), tl.arange(0, K)
    a = tl.load(a_ptr + rm[:, None] * K + rk[None, :]).to(tl.float8e4b15, bitcast=True)
    b = tl.load(b_ptr + rk[:, None] * N + rn[None, :]).to(tl.float8e4b15, bitcast=True)
    tl.store(out_ptr + rm[:, None] * N + rn[None, :], tl.dot(a, b))
