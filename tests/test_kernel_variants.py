"""bench/kernel_variants.py's build half (no GPU): a liger kernel's launch at a chosen shape
compiled by aotk and by Triton, and the arguments each cubin is launched with."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
import kernel_variants  # noqa: E402

pytest.importorskip("liger_kernel")
pytest.importorskip("triton")


def test_build_gives_both_compilers_cubins_of_the_bench_specialization(tmp_path):
    """kl_div's forward at 2 warps with its strides hinted 16-byte aligned (the test case
    itself has 300 columns, unaligned): the hint and the warps reach both compiles, and
    each cubin's PTX takes the arguments ``time`` gives it."""
    command = [sys.executable, str(ROOT / "bench" / "kernel_variants.py"), "build", "kl_div",
               "_kldiv_kernel_forward", "--rows", "4", "--cols", "320", "--warps", "2",
               "--constexpr", "BLOCK_SIZE=512", "--hint", "y_stride=16", "--hint",
               "gt_stride=16", "--triton", "--label", "mine", "--out", str(tmp_path)]
    run = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    assert run.returncode == 0, run.stderr
    assert "mine: " in run.stdout and "registers" in run.stdout
    spec = json.loads((tmp_path / "spec.json").read_text())
    assert spec["kernel"] == "_kldiv_kernel_forward" and spec["warps"] == 2
    hints = {name: hint for name, _, hint in spec["params"]}
    assert hints["y_stride"] == 16 and hints["gt_stride"] == 16
    for label, triton in (("mine", False), ("triton", True)):
        ptx = (tmp_path / f"{label}.ptx").read_text()
        assert (tmp_path / f"{label}.cubin").stat().st_size > 0
        assert ".reqntid 64" in ptx
        arguments = kernel_variants.launch_arguments(spec, {n: n for n, t, _ in spec["params"]
                                                      if t.startswith("*")}, triton)
        assert kernel_variants.parameter_count(ptx) == len(arguments)


def test_triton_gets_no_integer_it_specializes_and_its_scratch_pointers():
    spec = {"rows": 8, "cols": 96, "params": [["x", "*fp32", 16], ["x_stride", "i32", 16],
                                              ["out_stride", "i32", 1], ["n_cols", "i32", 16],
                                              ["n_non_ignore", "i32", None],
                                              ["eps", "fp32", None]]}
    buffers = {"x": "X"}
    mine = kernel_variants.launch_arguments(spec, buffers, triton=False)
    theirs = kernel_variants.launch_arguments(spec, buffers, triton=True)
    assert [int(v) if not isinstance(v, str) else v for v in mine[:5]] == ["X", 96, 1, 96, 8]
    assert float(mine[5]) == pytest.approx(1e-10)
    assert len(theirs) == len(mine) - 1 + 2 and int(theirs[-1]) == 0
