"""int8 dots in pipelined loops, on liger's int8 x int2 matmul shape (128x256x64 tiles on 8
warps, K = 4096): the A tiles arrive by cp.async although the inner loop's A pointer goes
on into the next outer trip (``passes.pipeline`` carries an unshifted copy of it); on sm_90
the dot runs on wgmma (s8 x s8 -> s32, as Triton 3.8 does), its B unpacked in registers
and stored K-major by the threads in 16-byte vectors. Compiled without a GPU (PTX, ptxas
registers and spills), run on the interpreter against numpy, and (marked ``gpu``) launched
against numpy."""
import numpy as np
import pytest

import aotk
import aotk.language as tl


@aotk.jit
def int2_matmul(a_ptr, b_ptr, c_ptr, M, N, K: tl.constexpr, BLOCK_M: tl.constexpr,
                BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """C = A @ W, W [K, N] in {-1, 0, 1} packed four rows a byte: packed[r, n] holds
    W[r + i * K / 4, n] + 1 in bits 2i..2i+1 (liger's experimental mm_int8int2)."""
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    offs_am = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_bn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N   # B's bytes one load each
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_am[:, None] * K + offs_k[None, :]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.int32)
    for i in range(4):
        b_ptrs = b_ptr + offs_k[:, None] * N + offs_bn[None, :]
        for j in range(0, tl.cdiv(K // 4, BLOCK_K)):
            k = i * tl.cdiv(K // 4, BLOCK_K) + j
            a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_K, other=0)
            packed = tl.load(b_ptrs, mask=offs_k[:, None] < K, other=0)
            b = (packed & (3 << (2 * i))) >> (2 * i)
            acc += tl.dot(a, b.to(tl.int8) - tl.full((1,), 1, dtype=tl.int8),
                          out_dtype=tl.int32)
            a_ptrs += BLOCK_K
            b_ptrs += BLOCK_K * N
    offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    tl.store(c_ptr + offs_cm[:, None] * N + offs_cn[None, :], acc,
             mask=(offs_cm[:, None] < M) & (offs_cn[None, :] < N))


SIGNATURE = "*i8:16, *u8:16, *i32:16, i32, i32"
BLOCKS = dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=64)


def _compile(target, K=4096):
    return aotk.compile(int2_matmul, SIGNATURE, dict(K=K, **BLOCKS), num_warps=8,
                        num_stages=3, target=target)


@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
def test_the_inner_loop_copies_a_with_cp_async(target):
    """Before, the inner loop was not pipelined at all (its A pointer is read after it) and
    A came by ld.global.v4; now 2 cp.async of 16 bytes per thread per trip."""
    ptx = _compile(target).ptx
    assert "cp.async.cg.shared.global" in ptx and "cp.async.wait_group 1;" in ptx
    assert "ld.global.v4" not in ptx


def test_int8_dots_run_on_wgmma_with_b_stored_k_major():
    """sm_90: two m64n256k32 s8 wgmmas per trip (one per warpgroup's 64 rows), B's column of
    64 bytes per thread stored as 4 st.shared.v4.b32 into its K-major tile instead of 64
    byte stores and 128 byte loads of mma.sync fragments; 32 bytes spilled instead of 420
    (liger's own kernel: none instead of 476, as Triton 3.8)."""
    compiled = _compile("sm_90")
    ptx = compiled.ptx
    assert ptx.count("wgmma.mma_async.sync.aligned.m64n256k32.s32.s8.s8") == 2
    assert "mma.sync" not in ptx and "ld.shared.b8" not in ptx and "st.shared.b8" not in ptx
    assert ptx.count("st.shared.v4.b32") >= 4
    assert compiled.metadata["spills"] <= 64


def _inputs(rng, M, N, K):
    a = rng.integers(-128, 128, (M, K)).astype(np.int8)
    weights = rng.integers(-1, 2, (K, N)).astype(np.int32)
    quarters = (weights + 1).reshape(4, K // 4, N)
    packed = sum(quarters[i] << (2 * i) for i in range(4)).astype(np.uint8)
    return a, packed, (a.astype(np.int64) @ weights).astype(np.int32)


def test_the_interpreter_matches_numpy(monkeypatch):
    monkeypatch.setenv("AOTK_INTERPRET", "1")
    M, N, K = 20, 48, 128
    a, packed, expected = _inputs(np.random.default_rng(0), M, N, K)
    c = np.zeros((M, N), np.int32)
    int2_matmul[(1, 1)](a, packed, c, M, N, K=K, BLOCK_M=32, BLOCK_N=64, BLOCK_K=32)
    np.testing.assert_array_equal(c, expected)


@pytest.mark.gpu
def test_the_gpu_matches_numpy():
    """Edge tiles in M and N (wrapped loads, masked stores) and 16 inner trips, so the
    stages wrap and the pipeline drains before each outer trip."""
    torch = pytest.importorskip("torch")
    M, N, K = 200, 384, 4096
    a, packed, expected = _inputs(np.random.default_rng(0), M, N, K)
    c = torch.full((M, N), -7, dtype=torch.int32, device="cuda")
    grid = (-(-M // BLOCKS["BLOCK_M"]), -(-N // BLOCKS["BLOCK_N"]))
    int2_matmul[grid](torch.from_numpy(a).cuda(), torch.from_numpy(packed).cuda(), c, M, N,
                      K=K, **BLOCKS, num_warps=8, num_stages=3)
    torch.cuda.synchronize()
    np.testing.assert_array_equal(c.cpu().numpy(), expected)
