"""Copy: dst[i] = src[i] over n elements, BLOCK per program."""
import aotk
import aotk.language as tl


@aotk.jit
def copy_kernel(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst + offs, tl.load(src + offs, mask=mask), mask=mask)
