"""A pipelined loop's last copies land before anything after it uses shared memory.

Past the end of the K loop the pipeline still issues copies (zero-filled by their masks) into
its stages; the loop's results may then be converted to another layout through the same
shared memory. The drain (``cp.async.wait_group 0`` and a barrier) must come first: before
it did not when the epilogue stored the fp32 accumulator itself, and a few outputs read as
zero on an H200.
"""
import numpy as np
import pytest

import aotk
import aotk.language as tl
from aotk.ir.signature import Signature


@aotk.jit
def matmul_fp32_out(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr,
                    BK: tl.constexpr):
    rows = tl.program_id(0) * BM + tl.arange(0, BM)
    cols = tl.program_id(1) * BN + tl.arange(0, BN)
    inner = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rows[:, None] * K + (k + inner)[None, :])
        b = tl.load(b_ptr + (k + inner)[:, None] * N + cols[None, :])
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rows[:, None] * N + cols[None, :], acc)


TILES = dict(BM=128, BN=128, BK=64)


@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
def test_the_drain_comes_before_the_epilogue_touches_shared_memory(target):
    signature = Signature.parse("*fp16:16, *fp16:16, *fp32:16, i32:16, i32:16, i32:16",
                                matmul_fp32_out.runtime_names)
    ptx = aotk.compile(matmul_fp32_out, signature, constants=TILES, num_warps=8,
                       num_stages=3, target=target).asm["ptx"]
    lines = ptx.splitlines()
    last_copy = max(i for i, line in enumerate(lines) if "cp.async.cg" in line)
    drain = [i for i, line in enumerate(lines) if "cp.async.wait_group 0" in line]
    after_loop = [i for i, line in enumerate(lines) if i > last_copy and "st.shared" in line]
    assert drain and after_loop, "expected a pipelined loop and an epilogue through shared"
    assert drain[0] < after_loop[0]


@pytest.mark.gpu
def test_on_the_gpu_every_output_is_right_run_after_run():
    torch = pytest.importorskip("torch")
    M, N, K = 384, 256, 1024
    generator = torch.Generator(device="cuda").manual_seed(0)
    a = (torch.randn(M, K, device="cuda", generator=generator) / 4).half()
    b = (torch.randn(K, N, device="cuda", generator=generator) / 4).half()
    expected = a.float() @ b.float()
    grid = (M // TILES["BM"], N // TILES["BN"])
    for _ in range(200):
        c = torch.full((M, N), float("nan"), device="cuda")
        matmul_fp32_out[grid](a, b, c, M, N, K, **TILES, num_warps=8, num_stages=3)
        torch.cuda.synchronize()
        torch.testing.assert_close(c, expected, rtol=1e-2, atol=1e-2)
    assert np.isfinite(c.cpu().numpy()).all()
