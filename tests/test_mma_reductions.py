"""Reductions of a dot's result in the dot's accumulator layout
(``passes.mma_residency``, ``backend.reduce`` over ``Mma`` fragments): along rows
the four lanes of a quad and the warps along N combine, along columns the eight lane
groups and the warps along M. Checked on the layouts the compiler picks (no CPU can run
the code), on the interpreter against numpy, and (marked gpu) against torch for both axes,
on mma.sync and wgmma warp arrangements."""
import numpy as np
import pytest

import aotk
import aotk.language as tl


@aotk.jit
def dot_then_reduce(a_ptr, b_ptr, rows_ptr, columns_ptr, M: tl.constexpr, N: tl.constexpr,
                    K: tl.constexpr):
    m, n, k = tl.arange(0, M), tl.arange(0, N), tl.arange(0, K)
    a = tl.load(a_ptr + m[:, None] * K + k[None, :])
    b = tl.load(b_ptr + k[:, None] * N + n[None, :])
    c = tl.dot(a, b)
    tl.store(rows_ptr + m, tl.max(c, 1))
    tl.store(columns_ptr + n, tl.sum(c * 0.5, 0))


SIGNATURE = "*fp16:16, *fp16:16, *fp32:16, *fp32:16"
SHAPES = [(64, 64, 32, 4), (128, 64, 32, 8), (64, 128, 32, 4)]


@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_the_reductions_stay_in_the_accumulator_layout(target, shape):
    m, n, k, warps = shape
    compiled = aotk.compile(dot_then_reduce, SIGNATURE, dict(M=m, N=n, K=k), num_warps=warps,
                            num_stages=1, target=target)
    reductions = [line for line in compiled.gir.splitlines() if " = reduce [" in line]
    assert len(reductions) == 2
    assert all("#mma0.slice" in line and "(home)" in line for line in reductions)
    assert compiled.metadata["spills"] == 0


def test_the_interpreter_matches_numpy(monkeypatch):
    monkeypatch.setenv("AOTK_INTERPRET", "1")
    rng = np.random.default_rng(0)
    a = rng.standard_normal((64, 32)).astype(np.float16)
    b = rng.standard_normal((32, 64)).astype(np.float16)
    rows, columns = np.zeros(64, np.float32), np.zeros(64, np.float32)
    dot_then_reduce[(1,)](a, b, rows, columns, M=64, N=64, K=32)
    c = a.astype(np.float32) @ b.astype(np.float32)
    np.testing.assert_allclose(rows, c.max(1), rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(columns, (c * 0.5).sum(0), rtol=1e-3, atol=1e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_the_gpu_matches_torch(shape):
    torch = pytest.importorskip("torch")
    m, n, k, warps = shape
    generator = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn((m, k), generator=generator, device="cuda", dtype=torch.float16)
    b = torch.randn((k, n), generator=generator, device="cuda", dtype=torch.float16)
    rows = torch.full((m,), float("nan"), device="cuda")
    columns = torch.full((n,), float("nan"), device="cuda")
    dot_then_reduce[(1,)](a, b, rows, columns, M=m, N=n, K=k, num_warps=warps, num_stages=1)
    c = a.float() @ b.float()
    torch.testing.assert_close(rows, c.max(1).values, rtol=1e-3, atol=1e-3)
    torch.testing.assert_close(columns, (c * 0.5).sum(0), rtol=1e-3, atol=1e-2)
