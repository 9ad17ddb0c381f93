"""A ``for`` carries a block in the layout its uses in the body read it in, not always in its
natural layout (``passes.assign_layouts._carried_where_used``): a recurrence that carries
the pointers to each step's rows and reads them as slices of its state's layout converted
them through shared memory on every trip before. The kernel's results are checked on the
interpreter and the GPU as the control-flow case "recurrence-carries-row-pointers"."""
import re

import pytest

import aotk
from tests.kernels.control_flow import recurrent_state_kernel

SIGNATURE = "*fp32:16, *fp32:16, *fp32:16, *fp32:16, i32"


def _carried_arguments(gir: str) -> dict:
    """{block argument: [layouts]} of the loop's body, home first."""
    header = next(line for line in gir.splitlines() if line.strip().startswith("^("))
    entries = re.split(r",\s*(?=%\d+:)", header.strip()[2:-2])
    return {entry.split(":")[0]: [layout.strip().removesuffix(" (home)")
                                  for layout in entry.split(" in ", 1)[1].split(",")]
            for entry in entries}


@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
def test_row_pointers_are_carried_in_the_slices_that_read_them(target):
    compiled = aotk.compile(recurrent_state_kernel, SIGNATURE, constants={"K": 64, "V": 64},
                            num_warps=4, target=target)
    carried = list(_carried_arguments(compiled.asm["gir"]).values())
    pointers = carried[1:5]     # after the induction variable: q, k, v and o's rows
    # Read only by loads whose values are expanded into the [K, V] state: one layout each,
    # a slice of the state's; o's row is stored from the rank's own layout.
    assert [len(layouts) for layouts in pointers] == [1, 1, 1, 1]
    assert [".slice[" in layouts[0] for layouts in pointers] == [True, True, True, False]
    # What remains through shared memory is the reduction's and the stored row's.
    assert compiled.asm["ptx"].count("bar.sync") <= 4
