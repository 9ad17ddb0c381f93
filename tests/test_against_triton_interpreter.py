"""The same kernel source, written against Triton's API (``tests/kernels/triton_written.py``),
run by Triton's own interpreter (the real triton of the test extra, in a process started
with TRITON_INTERPRET=1, which Triton reads when it is imported) and by aotk (``import
triton`` redirected, AOTK_INTERPRET=1 on CPU tensors): every output must be the same, bit
for bit. This checks aotk's builtins against Triton's definitions rather than against our
reading of them: block pointers with each boundary check and padding, softmax, topk,
bitonic_merge, gather, histogram, reduce_or and swizzle2d. (Triton's interpreter cannot
run map_elementwise or inline assembly; those have their own tests.)"""
import importlib.util
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("triton", reason="Triton comes with liger-kernel (test extra)")

from aotk.triton_imports import redirect_triton  # noqa: E402

SOURCE = Path(__file__).parent / "kernels" / "triton_written.py"

_UNDER_TRITON = f"""
import importlib.util, pickle, sys
spec = importlib.util.spec_from_file_location("triton_written", {str(SOURCE)!r})
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
sys.stdout.buffer.write(pickle.dumps(module.run_cases(module)))
"""


@pytest.fixture(scope="module")
def triton_results():
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    env.pop("AOTK_INTERPRET", None)
    run = subprocess.run([sys.executable, "-c", _UNDER_TRITON], env=env, capture_output=True,
                         timeout=300)
    assert run.returncode == 0, run.stderr.decode()[-3000:]
    return pickle.loads(run.stdout)


@pytest.fixture(scope="module")
def aotk_results():
    with redirect_triton(), pytest.MonkeyPatch.context() as patch:
        patch.setenv("AOTK_INTERPRET", "1")
        spec = importlib.util.spec_from_file_location("triton_written_by_aotk", SOURCE)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        assert "aotk" in type(module.copy_tile).__module__
        return module.run_cases(module)


def test_every_case_ran_on_both_sides(triton_results, aotk_results):
    assert set(triton_results) == set(aotk_results) and len(aotk_results) == 7


@pytest.mark.parametrize("case", ["copy_tile(0, 1)'zero'", "copy_tile(1, 0)'nan'",
                                  "copy_tile(1,)'zero'", "copy_tile(0, 1)''",
                                  "double_in_blocks", "row_functions", "grouped_order"])
def test_aotk_computes_what_tritons_interpreter_computes(triton_results, aotk_results, case):
    import numpy as np
    for expected, got in zip(triton_results[case], aotk_results[case], strict=True):
        np.testing.assert_array_equal(got, expected)
