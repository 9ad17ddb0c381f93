"""Fused row softmax: one row per program, the whole row in one block.

``n_rows`` only sizes the grid (the library's C entry computes the grid from it)."""
import aotk
import aotk.language as tl


@aotk.jit
def softmax_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, n_rows, n_cols,
                   BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(in_ptr + row * in_row_stride + offs, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    numerator = tl.exp(x)
    denominator = tl.sum(numerator, axis=0)
    tl.store(out_ptr + row * out_row_stride + offs, numerator / denominator, mask=mask)
