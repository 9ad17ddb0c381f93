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
from tests.kernels.operand_tiles import CASES as LOOP_CASES
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
