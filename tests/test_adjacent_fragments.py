"""backend.mma: a dot that reads the resident tile the dot before it read (the same way, in
the same block) takes that dot's fragments instead of loading them again (fla's k k^T
blocks: two dots of one transposed k tile, one after the other). Checked on the PTX
(ldmatrix counts) and on the GPU against numpy."""
import numpy as np
import pytest

import aotk
import aotk.language as tl


@aotk.jit
def _two_dots_one_tile(x_ptr, z_ptr, y_ptr, out_ptr, BETWEEN: tl.constexpr):
    """``t``, the transpose of y, is B of two dots; with BETWEEN a third dot of another
    B comes between them."""
    o = tl.arange(0, 16)
    tile = o[:, None] * 16 + o[None, :]
    x, z, y = tl.load(x_ptr + tile), tl.load(z_ptr + tile), tl.load(y_ptr + tile)
    t = tl.trans(y)
    first = tl.dot(x, t)
    if BETWEEN:
        first += tl.dot(z, tl.trans(x))
    second = tl.dot(z, t)
    tl.store(out_ptr + tile, first + 2.0 * second)


SIGNATURE = "*fp16:16, *fp16:16, *fp16:16, *fp32:16"


def _ldmatrix_count(between: bool, target: str) -> int:
    compiled = aotk.compile(_two_dots_one_tile, SIGNATURE, constants={"BETWEEN": between},
                            num_warps=1, target=target)
    return sum("ldmatrix" in line for line in compiled.ptx.splitlines())


@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
def test_the_second_dot_takes_the_first_ones_fragments(target):
    """One warp, 16 x 16 fp16: a dot loads A with one ldmatrix.x4 and B (two 8-column
    tiles) with one (4 for two dots); the second dot of t loads only its A (3). With the
    dot of z and x's transpose between them, the second dot takes z's fragments from it
    but loads t again (2 + 2 + 1), where each would load both (6)."""
    assert _ldmatrix_count(False, target) == 3
    assert _ldmatrix_count(True, target) == 5


@pytest.mark.gpu
@pytest.mark.parametrize("between", [False, True])
def test_the_two_dots_on_the_gpu_match_numpy(between):
    import torch
    rng = np.random.default_rng(int(between))
    x, z, y = (rng.standard_normal((16, 16)).astype(np.float16) for _ in range(3))
    out = torch.zeros((16, 16), device="cuda", dtype=torch.float32)
    _two_dots_one_tile[(1,)](*(torch.from_numpy(v).cuda() for v in (x, z, y)), out,
                             BETWEEN=between, num_warps=1)
    torch.cuda.synchronize()
    x32, z32, y32 = (v.astype(np.float32) for v in (x, z, y))
    expected = x32 @ y32.T + 2.0 * (z32 @ y32.T)
    if between:
        expected += z32 @ x32.T
    np.testing.assert_allclose(out.cpu().numpy(), expected, rtol=1e-2, atol=1e-2)
