"""Loops whose loads reach their dots through other ops are pipelined (``passes.pipeline``,
``LoopShape.staged``): fla's chunked recurrences (tests/kernels/decayed_state.py) scale
their tiles by gates, read k^T down its columns, load a scalar and vectors each trip and
store their state under an ``if``. Every such load is copied ahead by cp.async into a
plain tile and read back into registers where it was; a load from an argument the loop
writes stays where it was. Compiled for sm_80 and sm_90 without a GPU (no global load left
in the loop, no spill), run on the interpreter against numpy, and (marked ``gpu``) launched
over masked chunks, several tile sizes, warps and stages."""
import re

import numpy as np
import pytest

import aotk
from tests.kernels.decayed_state import (accumulate_in_place_kernel, decayed_state_kernel,
                                         scaled_by_a_wide_gate_kernel)

TARGETS = ("sm_80", "sm_90")
GATES = [(False, False), (True, False), (False, True), (True, True)]
GATE_IDS = ["no_gate", "scalar_gate", "vector_gate", "both_gates"]
SIGNATURE = "*fp16:16, *fp16:16, *fp32:16, *fp32:16, *fp16:16, *fp32:16, i32"
K = V = 128


def _constants(gates, BT=64, BK=32, BV=32, SAVE_EVERY=2):
    return dict(K=K, V=V, BT=BT, BK=BK, BV=BV, SAVE_EVERY=SAVE_EVERY,
                SCALAR_GATE=gates[0], VECTOR_GATE=gates[1])


def _loop_line(gir: str) -> str:
    return next(line for line in gir.splitlines() if " = for [" in line)


@pytest.mark.parametrize("gates", GATES, ids=GATE_IDS)
@pytest.mark.parametrize("target", TARGETS)
def test_every_load_of_the_loop_is_copied_ahead(gates, target):
    compiled = aotk.compile(decayed_state_kernel, SIGNATURE, constants=_constants(gates),
                            num_warps=2, num_stages=3, target=target)
    gir, ptx = compiled.asm["gir"], compiled.asm["ptx"]
    assert "pipeline=0" in _loop_line(gir)
    loads = 2 + 2 * gates[0] + 2 * gates[1]
    # v and k^T, where no gate scales them, are the dot's own tiles, read by the dot from
    # their stages (k^T, read down its columns, staged as k: M-major); every other load
    # reads its stage where it was. The copies are issued trips ahead.
    direct = (not gates[0]) + (not gates[1])
    assert len(re.findall(r"= load \[[^\]]*staged=", gir)) == loads - direct
    assert len(re.findall(r"= shared_read \[", gir)) == direct
    assert bool(re.search(r"shared_read \[buffer=\(0,0\)[^\]]*transposed=True", gir)) == \
        (not gates[1])
    assert "ld.global" not in ptx
    assert re.search(r"cp\.async\.c[ag]\.shared\.global", ptx)
    # k^T is copied in 16-byte vectors down its columns; scaled, the dot stores it
    # transposed.
    assert re.search(r"async_copy \[.*vec=8 along=0", gir)
    assert ("dot [a=m_major]" in gir) == gates[1]
    assert compiled.metadata["spills"] == 0


@pytest.mark.parametrize("saved", ["fp32", "fp16"])
def test_a_saved_state_is_stored_from_its_fragments_or_converted_above_the_stages(saved):
    """fp32 k and v, tf32 dots, 1 warp. Saved in fp32, the state is stored as the loop
    carries it, from its accumulator's fragments: no conversion, no scratch beside the
    stages. Saved in fp16 (a cast), it is converted each trip: the scratch of that
    conversion sits above the stages, not on them (fla's tests, fp32, 1 warp: an
    out-of-bounds shared write, when fp32 states were converted too)."""
    signature = f"*fp32:16, *fp32:16, *fp32:16, *fp32:16, *{saved}:16, *fp32:16, i32"
    compiled = aotk.compile(decayed_state_kernel, signature,
                            constants=_constants((False, False), 64, 32, 32),
                            num_warps=1, num_stages=2, target="sm_90")
    stages = 2 * (32 * 64 * 4 + 64 * 32 * 4)
    if saved == "fp32":
        assert compiled.metadata["shared"] == stages
        assert "st.shared" not in compiled.ptx
    else:
        assert compiled.metadata["shared"] >= stages + 32 * 32 * 2


@pytest.mark.parametrize("target", TARGETS)
def test_a_load_from_an_argument_the_loop_writes_is_not_copied_ahead(target):
    compiled = aotk.compile(accumulate_in_place_kernel, "*fp16:16, *fp16:16, *fp32:16, i32:16",
                            constants={"BLOCK": 64}, num_warps=4, num_stages=3, target=target)
    gir, ptx = compiled.asm["gir"], compiled.asm["ptx"]
    assert "pipeline=0" in _loop_line(gir)
    # b is staged for the dot; a, which the loop stores into, is loaded where it was.
    assert len(re.findall(r"async_copy \[", gir)) == 3   # b: two trips ahead, each trip
    assert "staged=" not in gir
    assert re.search(r"ld\.global(\.\w+)*\.v\d\.b32", ptx)


def reference(k, v, g, gk, T, BT, SAVE_EVERY, gates):
    """The kernel's states and final state, in float64, every program at once."""
    state = np.zeros((K, V))
    states = np.zeros(((-(-T // BT) + SAVE_EVERY - 1) // SAVE_EVERY, K, V))
    for t in range(-(-T // BT)):
        rows = np.arange(t * BT, min((t + 1) * BT, T))
        if t % SAVE_EVERY == 0:
            states[t // SAVE_EVERY] = state
        k_chunk, v_chunk = k[rows].astype(np.float64), v[rows].astype(np.float64)
        last = rows[-1]
        if gates[0]:
            state *= np.exp(g[last])
            v_chunk = v_chunk * np.exp(g[last] - g[rows])[:, None]
        if gates[1]:
            state *= np.exp(gk[last])[:, None]
            k_chunk = k_chunk * np.exp(gk[last][None, :] - gk[rows])
        state = state + k_chunk.T @ v_chunk
    return states, state


def _inputs(T, rng):
    k = (rng.standard_normal((T, K)) / 4).astype(np.float16)
    v = (rng.standard_normal((T, V)) / 4).astype(np.float16)
    g = -rng.uniform(0, 0.05, T).astype(np.float32)
    gk = -rng.uniform(0, 0.05, (T, K)).astype(np.float32)
    return k, v, g, gk


@pytest.mark.parametrize("gates", GATES, ids=GATE_IDS)
def test_the_interpreter_matches_numpy(gates, monkeypatch):
    monkeypatch.setenv("AOTK_INTERPRET", "1")
    T, BT, SAVE_EVERY = 100, 32, 2
    k, v, g, gk = _inputs(T, np.random.default_rng(0))
    states = np.zeros((2, K, V), np.float16)
    final = np.zeros((K, V), np.float32)
    decayed_state_kernel[(K // 64, V // 64)](k, v, g, gk, states, final, T,
                                              **_constants(gates, BT, 64, 64, SAVE_EVERY))
    expected_states, expected = reference(k, v, g, gk, T, BT, SAVE_EVERY, gates)
    np.testing.assert_allclose(final, expected, rtol=2e-2, atol=2e-2)
    np.testing.assert_allclose(states.astype(np.float32), expected_states, rtol=2e-2, atol=2e-2)


CONFIGS = [  # BT, BK, BV, num_warps, num_stages, the states' dtype (fp32: k and v too)
    (64, 16, 16, 1, 2, "float16"), (64, 32, 32, 2, 3, "float16"), (64, 64, 64, 4, 4, "float16"),
    (64, 64, 32, 2, 2, "float16"), (32, 64, 64, 8, 3, "float16"),
    (64, 32, 32, 1, 2, "float32")]


@pytest.mark.gpu
@pytest.mark.parametrize("config", CONFIGS,
                         ids=lambda c: "bt{}_bk{}_bv{}_w{}_s{}_{}".format(*c))
@pytest.mark.parametrize("gates", GATES, ids=GATE_IDS)
def test_the_gpu_matches_numpy(gates, config):
    """T = 1000: the last chunk is masked, every stage wraps several times."""
    torch = pytest.importorskip("torch")
    BT, BK, BV, warps, stages, state_dtype = config
    T, SAVE_EVERY = 1000, 3
    k, v, g, gk = _inputs(T, np.random.default_rng(1))
    if state_dtype == "float32":   # fla's tests: everything fp32, tf32 dots
        k, v = k.astype(np.float32), v.astype(np.float32)
    chunks = -(-T // BT)
    states = torch.full(((chunks + SAVE_EVERY - 1) // SAVE_EVERY, K, V), float("nan"),
                        dtype=getattr(torch, state_dtype), device="cuda")
    final = torch.full((K, V), float("nan"), dtype=torch.float32, device="cuda")
    on_gpu = [torch.from_numpy(x).cuda() for x in (k, v, g, gk)]
    decayed_state_kernel[(K // BK, V // BV)](*on_gpu, states, final, T,
                                              **_constants(gates, BT, BK, BV, SAVE_EVERY),
                                              num_warps=warps, num_stages=stages)
    torch.cuda.synchronize()
    expected_states, expected = reference(k, v, g, gk, T, BT, SAVE_EVERY, gates)
    np.testing.assert_allclose(final.cpu().numpy(), expected, rtol=2e-2, atol=2e-2)
    np.testing.assert_allclose(states.float().cpu().numpy(), expected_states, rtol=2e-2,
                               atol=2e-2)


@pytest.mark.gpu
def test_a_loop_that_rewrites_its_operand_reads_it_before_the_store():
    torch = pytest.importorskip("torch")
    BLOCK, Kdim = 64, 512
    generator = torch.Generator(device="cuda").manual_seed(2)
    a = torch.randn((BLOCK, Kdim), generator=generator, device="cuda").half()
    b = torch.randn((Kdim, BLOCK), generator=generator, device="cuda").half()
    c = torch.empty((BLOCK, BLOCK), device="cuda")
    expected = a.float() @ b.float()
    doubled = a * 2
    accumulate_in_place_kernel[(1,)](a, b, c, Kdim, BLOCK=BLOCK, num_warps=4, num_stages=3)
    torch.cuda.synchronize()
    torch.testing.assert_close(c, expected, rtol=2e-2, atol=5e-2)
    torch.testing.assert_close(a, doubled)


def _loop_shape(kernel, signature, constants, num_warps, num_stages, target):
    """``pipeline_shape.analyze_loop`` on the kernel's one loop, as the compiler runs it."""
    from aotk.passes import axis_info
    from aotk.passes.pipeline_shape import analyze_loop
    from aotk.passes.rewrite import upward_for_loops, users_of
    from aotk.ir.signature import Signature
    function = kernel.kir(Signature.parse(signature, kernel.runtime_names, kernel.name),
                          constants=constants, num_warps=num_warps, target=target)
    (_, loop), = upward_for_loops(function)
    why = []
    shape = analyze_loop(function, loop, axis_info.analyze(function), users_of(function.body),
                         num_warps, num_stages, target == "sm_90", why=why)
    return loop, shape, why


def test_a_plain_tile_the_stages_cannot_hold_is_loaded_where_it_was():
    """The [512, 64] fp32 gate (128 KB a stage) does not fit beside the dot's tiles: it is
    dropped, and so is the shift of the pointer it reads (a load left in the body reading
    a pointer shifted S-1 trips ahead would read a later trip's gate)."""
    signature = "*fp16:16, *fp16:16, *fp32:16, *fp32:16, i32:16"
    constants = dict(BM=64, BN=64, BK=64, GATE_ROWS=512)
    loop, shape, why = _loop_shape(scaled_by_a_wide_gate_kernel, signature, constants, 4, 3,
                                   "sm_80")
    assert shape is not None, why
    assert shape.staged == [] and len(shape.loads) == 2
    gates = loop.regions[0].args[1:].index(next(
        arg for arg in loop.regions[0].args[1:] if arg.type.element.is_ptr()))
    assert gates not in shape.shifted
    # With room for it, the gate is a plain tile and its pointer runs S-1 trips ahead.
    loop, shape, why = _loop_shape(scaled_by_a_wide_gate_kernel, signature,
                                   dict(constants, GATE_ROWS=16), 4, 3, "sm_80")
    assert len(shape.staged) == 1 and gates in shape.shifted
