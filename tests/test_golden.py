"""Golden files: the kir, gir and PTX of a few representative kernels, compared byte for byte.

A change to generated code shows up here, and in review as a diff of tests/golden/. When a
change is intended, refresh the files with the one command

    python -m pytest tests/test_golden.py --update-golden

and commit them with the change. kir and gir are aotk's alone; the PTX also depends on
LLVM (llvmlite) and libdevice, whose versions tests/golden/VERSIONS records: with other
versions, the PTX comparison is skipped with a message saying so (kir and gir still run).
"""
from __future__ import annotations

import difflib
import hashlib
import json
import re
from pathlib import Path

import pytest

import aotk
from tests.examples import example_module
from tests.kernels.atomics import contention_kernel
from tests.kernels.scans import scan_2d_kernel

GOLDEN = Path(__file__).parent / "golden"


def _example(file: str, function: str):
    return getattr(example_module(file), function)


MATMUL = ("*fp16:16, *fp16:16, *fp16:16, i32:16, i32:16, i32:16, i32:16, i32:1, i32:16, "
          "i32:1, i32:16, i32:1")
MATMUL_TILES = {"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 8,
                "ACTIVATION": ""}

# name -> (kernel, signature, constants, compile options): one per path through the backend.
CASES = {
    # 16-byte vector loads and stores
    "add_aligned.sm_90": (lambda: _example("add", "add_kernel"),
                          "*fp32:16, *fp32:16, *fp32:16, i32:16", {"BLOCK": 1024}, {}),
    # reductions across warps, libdevice exp
    "softmax.sm_90": (lambda: _example("softmax", "softmax_kernel"),
                      "*fp32:16, *fp32:16, i32:16, i32:16, i32, i32", {"BLOCK": 1024},
                      {"num_warps": 4}),
    # a 2-d scan across lanes and warps
    "cumsum_2d.sm_80": (lambda: scan_2d_kernel, "*i32:16, *i32:16, i32, i32",
                        {"OP": "cumsum", "AXIS": 1, "REVERSE": False, "BLOCK_M": 4,
                         "BLOCK_N": 256}, {"target": "sm_80"}),
    # atomics with masks, one per element owner
    "atomic_add.sm_80": (lambda: contention_kernel, "*fp32:16, *fp32:16, i32",
                         {"BLOCK": 256, "SLOTS": 8}, {"target": "sm_80"}),
    # pipelined mma.sync from swizzled cp.async stages
    "matmul_mma.sm_80": (lambda: _example("matmul", "matmul_kernel"), MATMUL, MATMUL_TILES,
                         {"target": "sm_80", "num_stages": 3}),
    # pipelined wgmma (sm_90a)
    "matmul_wgmma.sm_90": (lambda: _example("matmul", "matmul_kernel"), MATMUL, MATMUL_TILES,
                           {"num_stages": 3}),
    # TMA bulk copies into wgmma stages
    "matmul_tma.sm_90": (lambda: _example("matmul_descriptor", "matmul_descriptor_kernel"),
                         "*fp16:16, *fp16:16, *fp16:16, i32:16, i32:16, i32:16, i32:16, "
                         "i32:16, i32:16",
                         {"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 64,
                          "GROUP_SIZE_M": 8}, {"num_stages": 3}),
}


def _versions() -> dict:
    from aotk.backend.ptx import llvm_version
    from aotk.toolchain.libdevice import find_libdevice
    libdevice = hashlib.sha256(Path(find_libdevice()).read_bytes()).hexdigest()[:16]
    return {"llvm": llvm_version(), "libdevice": libdevice}


def _stages(name: str) -> dict:
    make_kernel, signature, constants, options = CASES[name]
    compiled = aotk.compile(make_kernel(), signature, constants, **options)
    # LLVM numbers call sequences per process: the number depends on earlier compiles.
    ptx = re.sub(r"callseq \d+", "callseq N", compiled.ptx)
    return {"kir": str(compiled.kir), "gir": compiled.gir, "ptx": ptx}


@pytest.mark.parametrize("name", sorted(CASES))
def test_generated_code_matches_golden(name, request):
    stages = _stages(name)
    versions_file = GOLDEN / "VERSIONS"
    if request.config.getoption("--update-golden"):
        GOLDEN.mkdir(exist_ok=True)
        versions_file.write_text(json.dumps(_versions(), indent=1, sort_keys=True) + "\n")
        for stage, text in stages.items():
            (GOLDEN / f"{name}.{stage}").write_text(text)
        return
    recorded = json.loads(versions_file.read_text())
    same_toolchain = recorded == _versions()
    for stage, text in stages.items():
        if stage == "ptx" and not same_toolchain:
            continue
        expected = (GOLDEN / f"{name}.{stage}").read_text()
        if text != expected:
            diff = "".join(difflib.unified_diff(
                expected.splitlines(keepends=True), text.splitlines(keepends=True),
                f"tests/golden/{name}.{stage}", "generated", n=2))
            pytest.fail(f"{name}.{stage} differs from its golden file (if intended, refresh "
                        f"with: python -m pytest tests/test_golden.py --update-golden):\n"
                        + diff[:6000])
    if not same_toolchain:
        pytest.skip(f"PTX not compared: golden made with {recorded}, this is {_versions()}")
