"""The language's semantics, run through the interpreter, against numpy references."""
import numpy as np
import pytest

from tests.kernels import atomics as atomic_kernels
from tests.kernels import batched_matmul
from tests.kernels import (combine, control_flow, descriptors, dot, libdevice, operand_tiles,
                           reductions, scans, views)
from tests.kernels.elementwise import CASES as ELEMENTWISE_CASES, run_interpreter

CASES = (ELEMENTWISE_CASES + reductions.CASES + control_flow.CASES + views.CASES + dot.CASES + operand_tiles.CASES
         + atomic_kernels.CASES + scans.CASES + combine.CASES + batched_matmul.CASES
         + descriptors.CASES + libdevice.CASES)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_interpreter_matches_reference(case):
    args, outputs = run_interpreter(case)
    expected = case.reference(args)
    for name, value in outputs.items():
        if case.exact:
            np.testing.assert_array_equal(value, expected[name], err_msg=name)
        else:
            np.testing.assert_allclose(value.astype(np.float64), expected[name].astype(np.float64),
                                       rtol=case.rtol, atol=case.rtol, err_msg=name)
