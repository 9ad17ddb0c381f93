"""A dot operand computed in another dot's accumulator fragments is read from those
registers (``backend.mma.a_in_registers`` / ``b_in_registers``), not stored and read back:
16-bit A are the accumulator's pairs, 16-bit B and tf32 A and B are gathered within each
lane quad with shuffles. Checked on the PTX (no CPU can run it), on the interpreter against
numpy and (marked gpu) against torch, at the warp arrangements where the path applies and
where it does not."""
import re

import numpy as np
import pytest

import aotk
import aotk.language as tl
from tests.kernels.chained_dots import chained_dots_kernel

DTYPES = {"fp16": np.float16, "bf16": None, "fp32": np.float32}


def _signature(dtype: str) -> str:
    return ", ".join([f"*{dtype}:16"] * 4 + ["*fp32:16"] * 2)


@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_one_warp_reads_the_chained_operand_from_its_registers(dtype, target):
    """At one warp c = a @ b feeds c @ v as A and w @ c as B from its registers: only a, b,
    v and w are read from shared memory (four ldmatrix for 16x16 tiles, not six), and the
    quad gathers are shuffles."""
    compiled = aotk.compile(chained_dots_kernel, _signature(dtype), {"N": 16}, num_warps=1,
                            target=target)
    assert compiled.ptx.count("ldmatrix") == 4
    assert "shfl.sync.idx" in compiled.ptx
    assert compiled.metadata["spills"] == 0


@pytest.mark.parametrize("dtype", list(DTYPES))
def test_warps_along_both_axes_still_stage_the_operand(dtype):
    """4 warps over a 64x64 tile split both M and N on sm_80: no warp holds all of K for
    its rows or columns, so c goes through shared memory as before (no shuffles)."""
    compiled = aotk.compile(chained_dots_kernel, _signature(dtype), {"N": 64}, num_warps=4,
                            target="sm_80")
    assert "shfl.sync.idx" not in compiled.ptx
    assert len(re.findall(r"mma\.sync", compiled.ptx)) > 0


@aotk.jit
def _one_operand_two_dots_kernel(a_ptr, b_ptr, v_ptr, w_ptr, out_ptr, N: tl.constexpr,
                                 TWICE: tl.constexpr):
    offs = tl.arange(0, N)
    tile = offs[:, None] * N + offs[None, :]
    c = tl.dot(tl.load(a_ptr + tile), tl.load(b_ptr + tile))
    out = tl.dot(c, tl.load(v_ptr + tile))
    if TWICE:
        out += tl.dot(c, tl.load(w_ptr + tile))
    tl.store(out_ptr + tile, out)


def test_two_dots_reading_one_register_operand_gather_it_once():
    """fla's block merges read one inverse block as the A of two dots: its tf32 fragments
    are gathered by shuffles once, for both (Triton does the same); they were gathered
    again for each dot."""
    def shuffles(twice):
        return aotk.compile(_one_operand_two_dots_kernel, ", ".join(["*fp32:16"] * 5),
                            {"N": 16, "TWICE": twice}, num_warps=1,
                            target="sm_80").ptx.count("shfl.sync.idx")
    assert shuffles(False) > 0
    assert shuffles(True) == shuffles(False)


@pytest.mark.parametrize("n, warps", [(64, 4), (64, 8), (128, 8)])
def test_a_tf32_b_left_in_wgmma_fragments_is_stored_from_them(n, warps):
    """On sm_90 w @ c, with c = a @ b fp32 in its wgmma accumulator fragments, runs on
    tf32 wgmma, whose B the threads store K-major from those fragments (a thread's rows r
    and r + 8 one store each). It failed to compile (no registers of c in another layout);
    fla's prepare_wy_repr_bwd_kernel hit the same at 4 warps."""
    compiled = aotk.compile(chained_dots_kernel, _signature("fp32"), {"N": n},
                            num_warps=warps, target="sm_90")
    assert "wgmma.mma_async.sync.aligned" in compiled.ptx
    assert ".tf32.tf32" in compiled.ptx
    assert compiled.metadata["spills"] == 0


def _reference(a, b, v, w, dtype):
    c = (a.astype(np.float32) @ b.astype(np.float32)).astype(dtype)
    return (c.astype(np.float32) @ v.astype(np.float32),
            w.astype(np.float32) @ c.astype(np.float32))


def test_the_interpreter_matches_numpy(monkeypatch):
    monkeypatch.setenv("AOTK_INTERPRET", "1")
    rng = np.random.default_rng(0)
    a, b, v, w = (rng.standard_normal((16, 16)).astype(np.float16) for _ in range(4))
    left, right = np.zeros((16, 16), np.float32), np.zeros((16, 16), np.float32)
    chained_dots_kernel[(1,)](a, b, v, w, left, right, N=16)
    want_left, want_right = _reference(a, b, v, w, np.float16)
    np.testing.assert_allclose(left, want_left, rtol=1e-2, atol=1e-2)
    np.testing.assert_allclose(right, want_right, rtol=1e-2, atol=1e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("n, warps", [(16, 1), (32, 1), (32, 2), (64, 4), (64, 8), (128, 8)])
def test_the_gpu_matches_torch(dtype, n, warps):
    torch = pytest.importorskip("torch")
    element = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}[dtype]
    generator = torch.Generator(device="cuda").manual_seed(0)
    a, b, v, w = (torch.randn((n, n), generator=generator, device="cuda", dtype=element)
                  / 4 for _ in range(4))
    left = torch.full((n, n), float("nan"), device="cuda")
    right = torch.full((n, n), float("nan"), device="cuda")
    chained_dots_kernel[(1,)](a, b, v, w, left, right, N=n, num_warps=warps)
    c = (a.float() @ b.float()).to(element).float()
    # tf32 (10-bit mantissas) or 16-bit c: within 1% of each output's largest magnitude.
    for got, want in ((left, c @ v.float()), (right, w.float() @ c)):
        scale = float(want.abs().max())
        assert float((got - want).abs().max()) <= 1e-2 * scale, (got - want).abs().max()
