"""Dot operands that are transposes of tiles read along their rows (``tl.dot(a,
tl.trans(k))``: fla's k @ k^T, attention's q @ k^T outside a pipelined loop): the dot
stores k's rows as its K-major B and the transpose moves no element
(``layout_facts.transposed_operand_views``, ``layout_demands._permute``). Compiled for
sm_80 and sm_90 without a GPU; the gram-block cases also run on the interpreter and the
GPU with the other dot cases (tests/test_gpu.py)."""
import re

import numpy as np
import pytest

import aotk
import aotk.language as tl
from tests.kernels.dot import CASES
from tests.test_codegen import _signature


@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
@pytest.mark.parametrize("name", [c.name for c in CASES if c.name.startswith("gram-blocks")])
def test_a_transposed_tile_is_stored_k_major_without_moving(name, target):
    """``tl.dot(a, tl.trans(k))`` with k read along its rows (fla's k @ k^T): the dot stores
    k's rows as its K-major B, so the transpose moves no element. It went through shared
    memory to be transposed (a scalar read per element), then was stored again."""
    case = next(c for c in CASES if c.name == name)
    signature = _signature(case, case.make_args(np.random.default_rng(0)))
    compiled = aotk.compile(case.kernel, signature, case.constants,
                            num_warps=case.num_warps, target=target)
    assert str(compiled.asm["gir"]).count("b=k_major") == 3
    assert not re.search(r"ld\.shared\.[bfsu](16|32)\b", compiled.ptx)
    assert compiled.metadata["spills"] == 0


@aotk.jit
def _transpose_stored_and_dotted(k_ptr, kt_ptr, out_ptr, BC: tl.constexpr, BK: tl.constexpr):
    o_i = tl.arange(0, BC)
    o_k = tl.arange(0, BK)
    k = tl.load(k_ptr + o_i[:, None] * BK + o_k[None, :])
    kt = tl.trans(k)
    tl.store(kt_ptr + o_k[:, None] * BC + o_i[None, :], kt)
    tl.store(out_ptr + o_i[:, None] * BC + o_i[None, :], tl.dot(k, kt))


def test_a_transpose_with_other_users_stays_a_shuffle():
    """A transpose something else takes too (here a store) is transposed once through shared
    memory, as before, and the dot stores that B as it is (not K-major: it would convert
    the transposed value once more)."""
    compiled = aotk.compile(_transpose_stored_and_dotted, "*fp16:16, *fp16:16, *fp32:16",
                            {"BC": 16, "BK": 64}, num_warps=1, target="sm_80")
    assert "b=k_major" not in str(compiled.asm["gir"])
    assert compiled.metadata["spills"] == 0
