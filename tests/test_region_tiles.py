"""backend.operand_tiles: a tile that several dots read is reserved by the region that
computes it, from that region's start to its last reader: the tiles of nested ``if``s
(fla's KDA computes each chunk's in its own) do not add up. Checked on the compiled shared
memory and on the GPU against numpy."""
import numpy as np
import pytest

import aotk
import aotk.language as tl


@aotk.jit
def _chunks(x_ptr, z_ptr, y_ptr, out_ptr, n, CHUNKS: tl.constexpr):
    """Each chunk's B (a scaled transpose of y) is read by two dots in its own ``if``."""
    o = tl.arange(0, 16)
    tile = o[:, None] * 16 + o[None, :]
    x, z, y = tl.load(x_ptr + tile), tl.load(z_ptr + tile), tl.load(y_ptr + tile)
    t = tl.trans(y)
    first, second = tl.dot(x, t), tl.dot(z, t)
    if CHUNKS >= 2 and n > 1:
        t2 = tl.trans(y * 2.0)
        first = tl.dot(x, t2, first)
        second = tl.dot(z, t2, second)
        if CHUNKS >= 3 and n > 2:
            t3 = tl.trans(y * 3.0)
            first = tl.dot(x, t3, first)
            second = tl.dot(z, t3, second)
    tl.store(out_ptr + tile, first + 2.0 * second)


SIGNATURE = "*fp16:16, *fp16:16, *fp16:16, *fp32:16, i32"


@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
def test_nested_chunks_reuse_the_shared_memory_of_the_one_before(target):
    """The third chunk's tile goes where the second's was (its readers are done by then):
    three chunks take what two take."""
    shared = {chunks: aotk.compile(_chunks, SIGNATURE, constants={"CHUNKS": chunks},
                                   num_warps=1, target=target).metadata["shared"]
              for chunks in (2, 3)}
    assert shared[3] == shared[2] > 0


def _expected(x, z, y, n, chunks):
    x32, z32 = x.astype(np.float32), z.astype(np.float32)
    first = second = 0
    for k in (1.0, 2.0, 3.0)[:min(n, chunks)]:
        t = (y * np.float16(k)).astype(np.float32).T
        first, second = first + x32 @ t, second + z32 @ t
    return first + 2.0 * second


@pytest.mark.gpu
@pytest.mark.parametrize("n", [1, 2, 3])
def test_the_chunks_on_the_gpu_match_numpy(n):
    import torch
    rng = np.random.default_rng(n)
    x, z, y = (rng.standard_normal((16, 16)).astype(np.float16) for _ in range(3))
    out = torch.zeros((16, 16), device="cuda", dtype=torch.float32)
    _chunks[(1,)](*(torch.from_numpy(v).cuda() for v in (x, z, y)), out, n, CHUNKS=3,
                  num_warps=1)
    torch.cuda.synchronize()
    np.testing.assert_allclose(out.cpu().numpy(), _expected(x, z, y, n, 3), rtol=1e-2,
                               atol=5e-2)
