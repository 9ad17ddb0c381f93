"""Row-wise argmax over rows of any length: a runtime loop over column blocks, a block
argmax per trip, and a runtime ``if`` that keeps the best (the first one on ties)."""
import aotk
import aotk.language as tl


@aotk.jit
def row_argmax_kernel(out_ptr, x_ptr, row_stride, n_rows, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    best_value = -float("inf")
    best_index = 0
    for off in range(0, n_cols, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * row_stride + cols, mask=cols < n_cols, other=-float("inf"))
        value, index = tl.max(x, axis=0, return_indices=True)
        if value > best_value:
            best_value = value
            best_index = index + off
    tl.store(out_ptr + row, best_index)
