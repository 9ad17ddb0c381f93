"""Where a dot's accumulator stays (``passes.mma_residency``): epilogues that scale it by
broadcast vectors or mask it, a small vector read as rows and columns of two accumulators,
and an accumulator updated under an ``if`` in a loop. Checked on the layouts the compiler
picks (gir); the dot cases "gated-two-dots-..." and "dot-under-if-in-loop-..." run on the
interpreter and the GPU against numpy."""
import numpy as np
import pytest

import aotk
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
