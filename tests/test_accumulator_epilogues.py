"""Where a dot's accumulator stays (``passes.mma_residency``): epilogues that scale it by
broadcast vectors or mask it, a small vector read as rows and columns of two accumulators,
and an accumulator updated under an ``if`` in a loop. Checked on the layouts the compiler
picks (gir); the dot cases "gated-two-dots-..." and "dot-under-if-in-loop-..." run on the
interpreter and the GPU against numpy."""
import numpy as np
import pytest

import aotk
import aotk.language as tl
from tests.kernels import dot
from tests.test_codegen import _signature


def _compile(prefix: str, warps: int, target: str):
    case = next(c for c in dot.CASES if c.name.startswith(prefix) and
                c.name.endswith(f"-{warps}-warps"))
    signature = _signature(case, case.make_args(np.random.default_rng(0)))
    return aotk.compile(case.kernel, signature, case.constants, num_warps=warps,
                        target=target)


def _lines(gir: str, text: str) -> list:
    return [line for line in gir.splitlines() if text in line]


@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
@pytest.mark.parametrize("warps", [2, 4, 8])
def test_gates_scale_and_mask_the_scores_where_the_dot_left_them(target, warps):
    """fla's chunk output: (q @ k^T) * exp(g_i - g_j), masked causally, feeds a second dot.
    The broadcast gates are what moves to the accumulator's layout (their [T] vector, read
    once per layout it is wanted in), not the [T, T] scores to a blocked one; and the
    masked scores go into the second dot from the fragments they were computed in."""
    compiled = _compile("gated-two-dots", warps, target)
    gir = compiled.asm["gir"]
    first_dot = _lines(gir, " = dot ")[0]
    assert first_dot.split(" in ")[1].split("//")[0].strip().endswith("(home)")
    for opcode in (" = exp ", " = select "):
        assert all("#mma" in line for line in _lines(gir, opcode) if "[64,64]" in line)
    gates = _lines(gir, "fp32[64] in")
    gate_load = next(line for line in gates if " = load " in line)
    # No home: loaded in each slice of an accumulator layout it is wanted in.
    assert "(home)" not in gate_load and gate_load.count("#mma") >= 2
    assert compiled.metadata["spills"] == 0


@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
@pytest.mark.parametrize("warps", [2, 4])
def test_an_accumulator_updated_under_an_if_stays_in_its_mma_layout(target, warps):
    """The loop carries the accumulator in the dot's layout across the ``if`` that updates
    it; before, the if's result took the blocked layout and the accumulator went through
    shared memory twice a trip."""
    compiled = _compile("dot-under-if-in-loop", warps, target)
    gir = compiled.asm["gir"]
    (loop,) = _lines(gir, " = for ")
    (branch,) = _lines(gir, " = if ")
    assert " in #mma0 (home)" in loop and " in #mma0 (home) {" in branch
    body_argument = next(line for line in gir.splitlines() if line.strip().startswith("^(%"))
    assert "#blocked" not in body_argument.split("fp32[64,")[1]


@aotk.jit
def scaled_rows_kernel(a_ptr, b_ptr, beta_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr,
                       K: tl.constexpr):
    """fla's kkt solve in small: a dot's rows scaled by a vector loaded for them alone."""
    m, n, k = tl.arange(0, M), tl.arange(0, N), tl.arange(0, K)
    a = tl.load(a_ptr + m[:, None] * K + k[None, :])
    b = tl.load(b_ptr + k[:, None] * N + n[None, :])
    beta = tl.load(beta_ptr + m)
    tl.store(c_ptr + m[:, None] * N + n[None, :], tl.dot(a, b) * beta[:, None])


@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
def test_a_vector_wanted_only_in_a_slice_of_the_fragments_is_loaded_there(target):
    """One element a thread or fewer: read straight into the slice of the accumulator's
    layout (a few cached loads), not loaded in the blocked layout and converted through
    shared memory (a barrier pair each: fla's kkt solve had four)."""
    compiled = aotk.compile(scaled_rows_kernel, "*fp16:16, *fp16:16, *fp32:16, *fp32:16",
                            {"M": 16, "N": 16, "K": 16}, num_warps=1, target=target)
    gir = compiled.asm["gir"]
    (beta,) = [line for line in _lines(gir, " = load ") if "fp32[16] in" in line]
    assert "(home)" not in beta and "#mma0.slice[1]" in beta and "#blocked" not in beta
    mul = next(line for line in _lines(gir, " = mul ") if "[16,16]" in line)
    assert "#mma0 (home)" in mul


@aotk.jit
def scaled_twice_kernel(a_ptr, b_ptr, g_ptr, du_ptr, dg_ptr, M: tl.constexpr,
                        N: tl.constexpr, K: tl.constexpr):
    """liger's SwiGLU backward (dGU) in small: the accumulator scaled by a constant in two
    chains, each then multiplied by a loaded block and stored."""
    m, n, k = tl.arange(0, M), tl.arange(0, N), tl.arange(0, K)
    a = tl.load(a_ptr + m[:, None] * K + k[None, :])
    b = tl.load(b_ptr + k[:, None] * N + n[None, :])
    g = tl.load(g_ptr + m[:, None] * N + n[None, :])
    acc = tl.dot(a, b)
    tl.store(du_ptr + m[:, None] * N + n[None, :], acc * 2.0 * g)
    tl.store(dg_ptr + m[:, None] * N + n[None, :], acc * 2.0 * (g + 1.0) * 0.5)


@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
def test_values_only_converted_are_computed_where_their_users_are(target):
    """acc * 2.0, twice, is wanted only by products with a loaded block, computed in its
    blocked layout: the accumulator is converted once and both scalings are computed
    there, where each scaling was computed in the fragments and converted on its own
    (two conversions through shared memory, a barrier pair each)."""
    compiled = aotk.compile(scaled_twice_kernel, "*fp16:16, *fp16:16, *fp32:16, *fp32:16, "
                            "*fp32:16", {"M": 64, "N": 64, "K": 32}, num_warps=4,
                            target=target)
    gir = compiled.asm["gir"]
    dot_line = _lines(gir, " = dot ")[0]
    assert dot_line.split(" in ")[1].split("//")[0].strip().startswith("#mma0 (home), #blocked")
    scalings = [line for line in _lines(gir, " = mul ") if "[64,64]" in line]
    assert scalings and all("#mma" not in line for line in scalings)
    # One conversion: the dot's operands' barrier and the accumulator's pair (5 before).
    assert compiled.ptx.count("bar.sync") == 3
