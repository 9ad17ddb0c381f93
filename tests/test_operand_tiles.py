"""Operand tiles stored once (``backend.operand_tiles``): a tile several tensor-core dots
read (fla's k @ k^T blocks: each row tile the A of some dots and, transposed, the B of
others) is written to shared memory once, where its value is computed, and the dots read
it without storing it again or waiting at barriers of their own. Compiled for sm_80 and
sm_90 without a GPU; the same kernels run on the interpreter and the GPU with the other
cases (tests/test_semantics.py, tests/test_gpu.py)."""
import re

import numpy as np
import pytest

import aotk
from tests.kernels.dot import CASES as DOT_CASES
from tests.kernels.operand_tiles import LOOP_CASES, SCORE_CASES
from tests.test_codegen import _signature


def _compile(case, target):
    signature = _signature(case, case.make_args(np.random.default_rng(0)))
    return aotk.compile(case.kernel, signature, case.constants, num_warps=case.num_warps,
                        target=target)


def _stored_bytes(ptx: str) -> int:
    """Bytes a thread stores to shared memory, over the vector stores of ``ptx``."""
    total = 0
    for vector, bits in re.findall(r"st\.shared(?:::cta)?(?:\.v(\d))?\.[bfsu](\d+)", ptx):
        total += int(vector or 1) * int(bits) // 8
    return total


@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
@pytest.mark.parametrize("name", [c.name for c in DOT_CASES if c.name.startswith("gram-blocks")])
def test_dots_reading_the_same_tiles_store_them_once(name, target):
    """Three dots over two row tiles (k0 k0^T, k1 k0^T, k1 k1^T): both tiles are stored
    before the first dot, once, and one barrier publishes them; what the kernel stores to
    shared memory after that is no more than its three results' conversions. Before, each
    dot stored both of its operands between two barriers of its own."""
    case = next(c for c in DOT_CASES if c.name == name)
    compiled = _compile(case, target)
    ptx = compiled.ptx
    first_dot = re.search(r"\b(mma\.sync|wgmma\.mma_async)", ptx).start()
    threads = 32 * case.num_warps
    bc, bk = case.constants["BC"], case.constants["BK"]
    element_bytes = 4 if "tf32" in name else 2
    tile = bc * bk * element_bytes // threads
    assert _stored_bytes(ptx[:first_dot]) == 2 * tile
    assert ptx[:first_dot].count("bar.sync") == 1
    assert _stored_bytes(ptx[first_dot:]) <= 3 * bc * bc * 4 // threads
    assert compiled.metadata["spills"] == 0


@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
@pytest.mark.parametrize("name", [c.name for c in LOOP_CASES])
def test_a_loop_trip_stores_each_tile_once(name, target):
    """fla's kkt loop: six dots a trip over three tiles, the later two under ifs. A trip's
    vector stores write each tile once, plus the column sums' partials (under two tiles'
    worth); before, the dots stored eleven tiles a trip (k0's A is read from the pipelined
    loop's stage). No spills."""
    case = next(c for c in LOOP_CASES if c.name == name)
    compiled = _compile(case, target)
    bc, bk = case.constants["BC"], case.constants["BK"]
    element_bytes = 2 if "float16" in name else 4
    tile = bc * bk * element_bytes // (32 * case.num_warps)
    loop = compiled.ptx[:compiled.ptx.rindex("bra")]
    stored = sum(int(width) * 4 for width in re.findall(r"st\.shared\.v(\d)\.b32", loop))
    assert 3 * tile <= stored < 5 * tile
    assert compiled.metadata["spills"] == 0


@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
@pytest.mark.parametrize("name", [c.name for c in SCORE_CASES
                                  if not c.name.endswith("64x64x32-4-warps")])
def test_a_transposed_dot_result_is_read_from_its_own_tile(name, target):
    """fla's dqkwg: ds = do @ v^T stays in the dot's fragments; dq = ds @ k and
    dk = ds^T @ q read one tile of ds, stored once from those fragments, the second M-major
    (ldmatrix.trans for fp16, element loads for tf32). ds^T is never computed (its permute
    has no layout), and what the kernel stores to shared memory after the first dot is
    ds once, the B tiles k and q, and the conversions of dq and dk for their stores. Before,
    ds went to a blocked layout and its transpose through shared memory, then was stored
    again as the second dot's A (tf32, two warps: 1,536 bytes a thread against 768, 205
    registers against 164 on sm_80)."""
    case = next(c for c in SCORE_CASES if c.name == name)
    compiled = _compile(case, target)
    # The kernel's second permute is ds's (the first, v's, feeds the first dot's B); the
    # dot reading it as A says so in the gir dump.
    gir = compiled.asm["gir"].splitlines()
    permute = [line for line in gir if " permute " in line][-1]
    assert " in #" not in permute
    assert sum("a=m_major_view" in line for line in gir if " dot " in line) == 1
    ptx = compiled.ptx
    first_dot = re.search(r"\bmma\.sync", ptx).start()
    bt, bk = case.constants["BT"], case.constants["BK"]
    element = 4 if "float32" in name else 2
    both = case.constants["BOTH"]
    dots = 2 if both else 1
    stored = bt * bt * element + dots * bt * bk * element + dots * bt * bk * 4
    assert _stored_bytes(ptx[first_dot:]) <= stored // (32 * case.num_warps)
    if element == 4:
        assert ".trans" not in ptx and "ld.shared.b32" in ptx
    else:
        assert "ldmatrix.sync.aligned.m8n8.x4.trans" in ptx
    assert compiled.metadata["spills"] == 0
