"""Dots whose operands are other dots' results (fla's triangular solves, attention's p @ v):
``chained_dots_kernel`` computes c = a @ b, then c @ v (c as A) and w @ c (c as B), with c
in the operands' element type (16-bit, or fp32 multiplied as tf32)."""
import aotk
import aotk.language as tl


@aotk.jit
def chained_dots_kernel(a_ptr, b_ptr, v_ptr, w_ptr, left_ptr, right_ptr, N: tl.constexpr):
    n = tl.arange(0, N)
    tile = n[:, None] * N + n[None, :]
    a, b = tl.load(a_ptr + tile), tl.load(b_ptr + tile)
    c = tl.dot(a, b).to(a.dtype)
    tl.store(left_ptr + tile, tl.dot(c, tl.load(v_ptr + tile)))
    tl.store(right_ptr + tile, tl.dot(tl.load(w_ptr + tile), c))
