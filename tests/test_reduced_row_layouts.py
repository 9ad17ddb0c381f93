"""Where a row vector computed from a reduction is broadcast into a wider tile
(``passes.layout_demands._expand_dims``): its elementwise chain is computed in the slice the
reduction leaves it in, two rows a thread, and converted once where it is broadcast, not in
the wide tile's slice, 16 rows a thread live from the reduction on. liger's mhc norm
backward held three such rows across its two dots and spilled (sm_90: 255 registers, 24 B;
now 246, none). Results: the reduction case "row-sums-scale-a-wide-tile" (interpreter, GPU).
"""
import re

import pytest

import aotk
from tests.kernels.reductions import row_sums_scale_wide_tile_kernel

CONSTANTS = {"BLOCK_M": 32, "BLOCK_S": 32, "BLOCK_N": 256}


def _layouts(gir: str, opcode: str) -> list:
    """The layout notes of each ``opcode`` op of a gir listing."""
    return re.findall(rf"= {opcode} .* in (.*?)\s+//", gir)


@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
def test_a_reduced_row_is_scaled_in_its_own_slice_and_converted_once(target):
    compiled = aotk.compile(row_sums_scale_wide_tile_kernel, "*fp32:16, *fp32:16, *fp32:16",
                            constants=CONSTANTS, num_warps=4, target=target)
    gir = compiled.asm["gir"]
    (reduced,) = _layouts(gir, "reduce")
    assert reduced.endswith("(home)") and "," not in reduced    # not converted there
    home = reduced.removesuffix(" (home)")
    divisions = _layouts(gir, "fdiv")
    # (s / inv) in the reduction's slice; the last division, broadcast, converted once.
    assert divisions[0] == home
    assert divisions[-1].startswith(f"{home} (home), ") and divisions[-1].count(",") == 1
    (load,) = [note for note in _layouts(gir, r"load \[[^\]]*\]")
               if "slice" in note]
    assert load == f"{home} (home)"                          # inv: read in that slice only
