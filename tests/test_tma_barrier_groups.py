"""TMA loops with several dots: one mbarrier per stage for each group of tiles
(``pipeline_shape.barrier_groups``), each group waited for just before the dot that first
reads it, so the first dot starts when its own tiles have landed (liger's SwiGLU MLP)."""
import re

import pytest

import aotk
import aotk.language as tl
from aotk.passes.pipeline_shape import barrier_groups


@aotk.jit
def _gated_pair(x_ptr, wg_ptr, wu_ptr, out_ptr, M, N, K, BLOCK_M: tl.constexpr,
                BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """out = silu(x @ wg.T) * (x @ wu.T): x [M, K], wg and wu [N, K], all row-major, read
    through descriptors (liger's SwiGLU forward in miniature)."""
    x_desc = tl.make_tensor_descriptor(x_ptr, [M, K], [K, 1], [BLOCK_M, BLOCK_K])
    wg_desc = tl.make_tensor_descriptor(wg_ptr, [N, K], [K, 1], [BLOCK_N, BLOCK_K])
    wu_desc = tl.make_tensor_descriptor(wu_ptr, [N, K], [K, 1], [BLOCK_N, BLOCK_K])
    row, col = tl.program_id(0) * BLOCK_M, tl.program_id(1) * BLOCK_N
    gate = tl.zeros((BLOCK_M, BLOCK_N), tl.float32)
    up = tl.zeros((BLOCK_M, BLOCK_N), tl.float32)
    for k in range(0, K, BLOCK_K):
        x = x_desc.load([row, k])
        gate = tl.dot(x, tl.trans(wg_desc.load([col, k])), gate)
        up = tl.dot(x, tl.trans(wu_desc.load([col, k])), up)
    out = gate * tl.sigmoid(gate) * up
    rows = row + tl.arange(0, BLOCK_M)[:, None]
    cols = col + tl.arange(0, BLOCK_N)[None, :]
    tl.store(out_ptr + rows * N + cols, out, mask=(rows < M) & (cols < N))


def _signature(dtype: str) -> str:
    return f"*{dtype}:16, *{dtype}:16, *{dtype}:16, *fp32:16, i32, i32, i32:16"


BLOCKS = {"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 64}


def _armed_bytes(ptx: str) -> list:
    """The byte counts the ``mbarrier.arrive.expect_tx`` instructions arm, in order."""
    moved = dict(re.findall(r"mov\.[bu]32\s+(%r\d+), (\d+);", ptx))
    return [int(moved.get(operand, operand)) for operand in re.findall(
        r"mbarrier\.arrive\.expect_tx\.shared::cta\.b64\s+_, \[%r\d+\], (%r\d+|\d+);", ptx)]


# fp32: 80 KB a stage, two stages fit.
@pytest.mark.parametrize("dtype, element_bytes, stages", [("fp16", 2, 3), ("fp32", 4, 2)])
def test_each_dot_waits_for_its_own_tiles(dtype, element_bytes, stages):
    compiled = aotk.compile(_gated_pair, _signature(dtype), BLOCKS, num_warps=4,
                            num_stages=stages, target="sm_90")
    ptx = compiled.ptx
    assert ptx.count("wgmma.mma_async") > 0 and "cp.async.bulk.tensor" in ptx
    # Two groups (x and wg for the first dot, wu for the second), an mbarrier a stage each.
    assert ptx.count("mbarrier.init.shared::cta.b64") == 2 * stages
    assert ptx.count("mbarrier.inval.shared::cta.b64") == 2 * stages
    # Each trip's copies arm both groups' mbarriers, with the bytes of their own tiles.
    x_bytes = 64 * 64 * element_bytes
    w_bytes = 128 * 64 * element_bytes
    armed = _armed_bytes(ptx)
    assert armed == [x_bytes + w_bytes, w_bytes] * stages   # the prologue's trips, the loop's
    # The loop alone waits: for the first group, then the first dot's wgmma, then for the
    # second group, then the second dot's.
    waits = [m.start() for m in re.finditer(r"mbarrier\.try_wait\.parity", ptx)]
    mmas = [m.start() for m in re.finditer(r"wgmma\.mma_async", ptx)]
    assert len(waits) == 2
    first_dot = [m for m in mmas if waits[0] < m < waits[1]]
    assert first_dot and len(first_dot) * 2 == len(mmas) and all(m > waits[0] for m in mmas)
    assert compiled.metadata["spills"] == 0


def test_one_dot_keeps_one_mbarrier_per_stage():
    @aotk.jit
    def single(x_ptr, w_ptr, out_ptr, M, N, K, BLOCK: tl.constexpr):
        x_desc = tl.make_tensor_descriptor(x_ptr, [M, K], [K, 1], [BLOCK, BLOCK])
        w_desc = tl.make_tensor_descriptor(w_ptr, [N, K], [K, 1], [BLOCK, BLOCK])
        row, col = tl.program_id(0) * BLOCK, tl.program_id(1) * BLOCK
        acc = tl.zeros((BLOCK, BLOCK), tl.float32)
        for k in range(0, K, BLOCK):
            acc = tl.dot(x_desc.load([row, k]), tl.trans(w_desc.load([col, k])), acc)
        rows = row + tl.arange(0, BLOCK)[:, None]
        cols = col + tl.arange(0, BLOCK)[None, :]
        tl.store(out_ptr + rows * N + cols, acc, mask=(rows < M) & (cols < N))

    ptx = aotk.compile(single, "*fp16:16, *fp16:16, *fp32:16, i32, i32, i32:16",
                       {"BLOCK": 64}, num_warps=4, num_stages=3, target="sm_90").ptx
    assert ptx.count("mbarrier.init.shared::cta.b64") == 3
    assert len(re.findall(r"mbarrier\.try_wait\.parity", ptx)) == 1
    assert _armed_bytes(ptx) == [2 * 64 * 64 * 2] * 3


@pytest.mark.parametrize("operands, groups", [
    ([[(0, False), (1, True)], [(0, False), (2, True)]], [0, 0, 1]),   # SwiGLU: x, wg | wu
    ([[(0, False), (1, True)], [(0, False), (1, True)]], [0, 0]),      # both dots, same tiles
    ([[None, (0, True)], [(1, False), (2, True)]], [0, 1, 1]),         # A from registers
    ([[(0, False), (1, True)], [None, None], [(2, False), (0, True)]], [0, 0, 1]),
])
def test_loads_go_with_the_first_dot_that_reads_them(operands, groups):
    assert barrier_groups(operands, len(groups)) == groups


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "float32"])
@pytest.mark.parametrize("m, n, k, stages", [(192, 256, 512, 3), (100, 200, 128, 2),
                                             (64, 128, 64, 3), (130, 129, 1024, 4)])
def test_gated_pair_matches_torch(dtype, m, n, k, stages):
    """Ragged M and N (TMA fills the boxes past the edge with zeros), one trip (the
    prologue's copies alone) and many; fp32 runs on tf32 wgmma."""
    torch = pytest.importorskip("torch")
    torch_dtype = getattr(torch, dtype)
    generator = torch.Generator(device="cuda").manual_seed(m * n + k)
    x = torch.randn(m, k, device="cuda", dtype=torch_dtype, generator=generator)
    wg = torch.randn(n, k, device="cuda", dtype=torch_dtype, generator=generator) / k ** 0.5
    wu = torch.randn(n, k, device="cuda", dtype=torch_dtype, generator=generator) / k ** 0.5
    out = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float32)
    grid = ((m + 63) // 64, (n + 127) // 128)
    _gated_pair[grid](x, wg, wu, out, m, n, k, num_warps=4, num_stages=stages, **BLOCKS)
    gate = x.double() @ wg.double().T
    want = (torch.nn.functional.silu(gate) * (x.double() @ wu.double().T)).float()
    tolerance = 2e-2 if dtype == "float32" else 3e-2   # tf32 / fp16 operands
    torch.testing.assert_close(out, want, atol=tolerance, rtol=tolerance)


@aotk.jit
def _attention(q_ptr, k_ptr, v_ptr, out_ptr, N_CTX, sm_scale, HEAD_DIM: tl.constexpr,
               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """softmax(q @ k.T * sm_scale) @ v for one head, [N_CTX, HEAD_DIM] row-major each, k and
    v read through descriptors: the loop's first dot reads k, the second v (its p @ v
    group left in flight into the next trip, retired by that trip's first dot)."""
    k_desc = tl.make_tensor_descriptor(k_ptr, [N_CTX, HEAD_DIM], [HEAD_DIM, 1],
                                       [BLOCK_N, HEAD_DIM])
    v_desc = tl.make_tensor_descriptor(v_ptr, [N_CTX, HEAD_DIM], [HEAD_DIM, 1],
                                       [BLOCK_N, HEAD_DIM])
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    dims = tl.arange(0, HEAD_DIM)
    q = tl.load(q_ptr + rows[:, None] * HEAD_DIM + dims[None, :])
    m_i = tl.full((BLOCK_M,), float("-inf"), tl.float32)
    l_i = tl.zeros((BLOCK_M,), tl.float32)
    acc = tl.zeros((BLOCK_M, HEAD_DIM), tl.float32)
    for start in range(0, N_CTX, BLOCK_N):
        qk = tl.dot(q, tl.trans(k_desc.load([start, 0]))) * sm_scale
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        p = tl.exp(qk - m_new[:, None])
        alpha = tl.exp(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(tl.float16), v_desc.load([start, 0]))
        m_i = m_new
    out = acc / l_i[:, None]
    tl.store(out_ptr + rows[:, None] * HEAD_DIM + dims[None, :], out)


ATTENTION = "*fp16:16, *fp16:16, *fp16:16, *fp32:16, i32:16, fp32"


def test_attention_waits_for_v_before_p_at_v():
    ptx = aotk.compile(_attention, ATTENTION, {"HEAD_DIM": 64, "BLOCK_M": 64, "BLOCK_N": 64},
                       num_warps=4, num_stages=3, target="sm_90").ptx
    assert "cp.async.bulk.tensor" in ptx and "wgmma.mma_async" in ptx
    assert ptx.count("mbarrier.init.shared::cta.b64") == 2 * 3
    assert _armed_bytes(ptx) == [64 * 64 * 2, 64 * 64 * 2] * 3
    waits = [m.start() for m in re.finditer(r"mbarrier\.try_wait\.parity", ptx)]
    mmas = [m.start() for m in re.finditer(r"wgmma\.mma_async", ptx)]
    assert len(waits) == 2
    assert any(waits[0] < m < waits[1] for m in mmas) and any(m > waits[1] for m in mmas)


@pytest.mark.gpu
@pytest.mark.parametrize("n_ctx, stages", [(64, 3), (128, 2), (1024, 3), (2048, 4)])
def test_attention_matches_torch(n_ctx, stages):
    torch = pytest.importorskip("torch")
    generator = torch.Generator(device="cuda").manual_seed(n_ctx)
    q, k, v = (torch.randn(n_ctx, 64, device="cuda", dtype=torch.float16, generator=generator)
               for _ in range(3))
    out = torch.full((n_ctx, 64), float("nan"), device="cuda", dtype=torch.float32)
    _attention[(n_ctx // 64,)](q, k, v, out, n_ctx, 0.125, HEAD_DIM=64, BLOCK_M=64,
                               BLOCK_N=64, num_warps=4, num_stages=stages)
    want = torch.softmax(q.float() @ k.float().T * 0.125, dim=-1) @ v.float()
    torch.testing.assert_close(out, want, atol=2e-2, rtol=1e-2)
