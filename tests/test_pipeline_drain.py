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
from aotk.ir.signature import Signature
from tests.kernels.pipeline_shapes import matmul_fp32_out_kernel as matmul_fp32_out


TILES = dict(BM=128, BN=128, BK=64, ADD_TILE=False)


@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
@pytest.mark.parametrize("output", ["fp32", "fp16"])
def test_the_drain_comes_before_the_epilogue_touches_shared_memory(target, output):
    """An fp16 C is converted through shared memory after the loop; an fp32 C is stored
    from the accumulator's fragments (``layout_demands._store``) and touches none."""
    signature = Signature.parse(f"*fp16:16, *fp16:16, *fp32:16, *{output}:16, i32:16, "
                                "i32:16, i32:16", matmul_fp32_out.runtime_names)
    ptx = aotk.compile(matmul_fp32_out, signature, constants=TILES, num_warps=8,
                       num_stages=3, target=target).asm["ptx"]
    lines = ptx.splitlines()
    last_copy = max(i for i, line in enumerate(lines) if "cp.async.cg" in line)
    drain = [i for i, line in enumerate(lines) if "cp.async.wait_group 0" in line]
    after_loop = [i for i, line in enumerate(lines) if i > last_copy and "st.shared" in line]
    assert drain
    if output == "fp32":
        assert after_loop == []
    else:
        assert after_loop, "expected an epilogue through shared memory"
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
        matmul_fp32_out[grid](a, b, None, c, M, N, K, **TILES, num_warps=8, num_stages=3)
        torch.cuda.synchronize()
        torch.testing.assert_close(c, expected, rtol=1e-2, atol=1e-2)
    assert np.isfinite(c.cpu().numpy()).all()
