"""What each example kernel of the root manifest is benchmarked on.

A ``Workload`` makes ``rotations`` independent input sets (so back-to-back calls do not
find the previous call's data in L2), calls the kernel three ways (the aotk library, the
same source under Triton's JIT, torch), checks each output, and states the bytes moved.
"""
from __future__ import annotations

from dataclasses import dataclass


def _cdiv(a, b):
    return (a + b - 1) // b


@dataclass
class Workload:
    kernel: str
    make: object          # (torch, log2n) -> dict of tensors and sizes
    aotk: object          # (lib, inputs) -> None
    triton: object        # (module, inputs) -> None
    torch: object         # (inputs) -> None, writes inputs["out"]
    expected: object      # (inputs) -> tensor
    bytes_moved: object   # (inputs) -> int
    triton_file: str
    triton_function: str


def _vector(torch, log2n):
    n = 1 << log2n
    return {"x": torch.randn(n, device="cuda"), "y": torch.randn(n, device="cuda"),
            "out": torch.empty(n, device="cuda"), "n": n}


def _matrix(torch, log2n):
    rows, cols = 1 << (log2n // 2), 1 << (log2n - log2n // 2)
    return {"src": torch.randn(rows, cols, device="cuda"), "out": torch.empty(rows, cols, device="cuda"),
            "rows": rows, "cols": cols}


WORKLOADS = [
    Workload("add", _vector,
             aotk=lambda lib, a: lib.add(a["x"], a["y"], a["out"], a["n"]),
             triton=lambda m, a: m.add_kernel[(_cdiv(a["n"], 1024),)](a["x"], a["y"], a["out"], a["n"],
                                                                      BLOCK=1024),
             torch=lambda a: __import__("torch").add(a["x"], a["y"], out=a["out"]),
             expected=lambda a: a["x"] + a["y"], bytes_moved=lambda a: 12 * a["n"],
             triton_file="add.py", triton_function="add_kernel"),
    Workload("copy", _vector,
             aotk=lambda lib, a: lib.copy(a["x"], a["out"], a["n"]),
             triton=lambda m, a: m.copy_kernel[(_cdiv(a["n"], 1024),)](a["x"], a["out"], a["n"],
                                                                       BLOCK=1024),
             torch=lambda a: a["out"].copy_(a["x"]),
             expected=lambda a: a["x"], bytes_moved=lambda a: 8 * a["n"],
             triton_file="copy.py", triton_function="copy_kernel"),
    Workload("copy2d", _matrix,
             aotk=lambda lib, a: lib.copy2d(a["src"], a["out"], a["rows"], a["cols"], a["cols"],
                                            a["cols"]),
             triton=lambda m, a: m.copy2d_kernel[(_cdiv(a["rows"], 32), _cdiv(a["cols"], 128))](
                 a["src"], a["out"], a["rows"], a["cols"], a["cols"], a["cols"],
                 BLOCK_M=32, BLOCK_N=128),
             torch=lambda a: a["out"].copy_(a["src"]),
             expected=lambda a: a["src"], bytes_moved=lambda a: 8 * a["rows"] * a["cols"],
             triton_file="copy2d.py", triton_function="copy2d_kernel"),
]
