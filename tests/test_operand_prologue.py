"""A dot's A computed by elementwise ops from loads a pipelined loop staged (fla's gated
keys) is computed in the dot's mma layout, its loads read from their stage there, and A
stays in registers (``passes.mma_residency.operand_prologues``): no store of A to shared
memory and no barrier for it each trip. Checked on the PTX and registers (no CPU can run
it), on the interpreter against numpy and (marked gpu) against torch."""
import numpy as np
import pytest

import aotk
import re

from tests.kernels.gated_dot import gated_dot_bt_kernel, gated_dot_kernel

SIGNATURES = {"fp32": "*fp32:16, *fp32:16, *fp32:16, *fp32:16, *fp32:16, i32",
              "fp16": "*fp16:16, *fp32:16, *fp32:16, *fp16:16, *fp32:16, i32"}


@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
@pytest.mark.parametrize("dtype", list(SIGNATURES))
@pytest.mark.parametrize("warps", [1, 4])
def test_the_gated_operand_stays_in_registers(dtype, warps, target):
    """Per trip only B's staged tile is read for the mma; A's chain is computed in the
    fragments (tf32: gathered by quad shuffles; 16-bit: the accumulator's pairs; wgmma
    takes it from registers). Before: A stored to shared memory behind two more barriers,
    and (fp32, 4 warps) 126 registers where 72 now."""
    compiled = aotk.compile(gated_dot_kernel, SIGNATURES[dtype],
                            {"M": 16 * warps, "K": 64, "N": 16}, num_warps=warps,
                            num_stages=2, target=target)
    ptx = compiled.ptx
    wgmma = "wgmma.mma_async" in ptx          # sm_90, fp16, 4 warps: A from registers too
    assert wgmma == (target == "sm_90" and dtype == "fp16" and warps == 4)
    assert "cp.async" in ptx                  # the loads are staged
    # Were 6 (wgmma: 7) and 12 (8): A's store, its barriers and read-back each trip; then
    # 4 (5) and 4, with the fp32 accumulator's conversion for its store, which is now
    # made from the fragments (``layout_demands._store``).
    assert ptx.count("bar.sync") == (3 if wgmma else 2)
    assert ptx.count("st.shared") == 0
    assert ("shfl.sync" in ptx) == (dtype == "fp32")
    assert compiled.metadata["spills"] == 0
    assert compiled.metadata["registers"] <= {"fp32": 72, "fp16": 68}[dtype]


@pytest.mark.parametrize("dtype", ["fp32", "fp16"])
def test_wgmma_takes_a_16_bit_gated_operand_from_registers_and_a_tf32_one_from_shared(dtype):
    """sm_90, 4 warps, B K-major: wgmma. A 16-bit A computed in the fragments is wgmma's
    register A; a tf32 one is not (aotk's wgmma reads tf32 A from shared memory only), so
    its chain stays in its natural layout and A is stored from there, as before."""
    signature = f"*{dtype}:16, *fp32:16, *{dtype}:16, *fp32:16, i32"
    compiled = aotk.compile(gated_dot_bt_kernel, signature, {"M": 64, "K": 64, "N": 64},
                            num_warps=4, num_stages=3, target="sm_90")
    (first,) = set(re.findall(r"wgmma\.mma_async\.sync\.aligned\.\w+\.f32\.(\w+)\.",
                              compiled.ptx))
    assert first == {"fp32": "tf32", "fp16": "f16"}[dtype]
    a_operand = re.search(r"wgmma\.mma_async[^}]*\},\s*(\S)", compiled.ptx).group(1)
    assert a_operand == ("{" if dtype == "fp16" else "%")
    # tf32: A stored in 16-byte vectors from its natural layout (from the fragments it
    # would be two columns a store).
    assert ("st.shared.v4" in compiled.ptx) == (dtype == "fp32")
    assert compiled.metadata["spills"] == 0


def _inputs(rng, m, k, n, chunks, dtype):
    keys = (rng.standard_normal((chunks, m, k)) / 4).astype(dtype)
    gates = -rng.random((chunks, m, k)).astype(np.float32)
    last = -rng.random(m).astype(np.float32)
    values = (rng.standard_normal((chunks, k, n)) / 4).astype(dtype)
    return keys, gates, last, values


def _reference(keys, gates, last, values):
    gated = (keys.astype(np.float32) * np.exp2(last[None, :, None] - gates)).astype(keys.dtype)
    return sum(gated[c].astype(np.float32) @ values[c].astype(np.float32)
               for c in range(keys.shape[0]))


def test_the_interpreter_matches_numpy(monkeypatch):
    monkeypatch.setenv("AOTK_INTERPRET", "1")
    rng = np.random.default_rng(0)
    keys, gates, last, values = _inputs(rng, 16, 64, 16, 3, np.float32)
    out = np.zeros((16, 16), np.float32)
    gated_dot_kernel[(1,)](keys, gates, last, values, out, 3, M=16, K=64, N=16)
    want = _reference(keys, gates, last, values)
    # The fp32 dot multiplies as tf32, as on the GPU: within 1% of the largest magnitude.
    assert float(np.abs(out - want).max()) <= 1e-2 * float(np.abs(want).max())
    assert float(np.abs(want).max()) > 0.5


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", list(SIGNATURES))
@pytest.mark.parametrize("warps", [1, 4])
def test_the_gpu_matches_numpy(dtype, warps):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    m = 16 * warps
    arrays = _inputs(rng, m, 64, 16, 5, {"fp32": np.float32, "fp16": np.float16}[dtype])
    keys, gates, last, values = (torch.from_numpy(a).cuda() for a in arrays)
    out = torch.full((m, 16), float("nan"), device="cuda")
    gated_dot_kernel[(1,)](keys, gates, last, values, out, 5, M=m, K=64, N=16,
                           num_warps=warps, num_stages=2)
    want = _reference(*arrays)
    # tf32 or fp16 products: within 1% of the output's largest magnitude.
    assert float(np.abs(out.cpu().numpy() - want).max()) <= 1e-2 * float(np.abs(want).max())
