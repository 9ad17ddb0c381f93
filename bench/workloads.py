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
    metric: str = "GB/s"   # or "TFLOP/s": then bytes_moved gives the flops per call
    tolerance: dict = None  # torch.testing.assert_close overrides


def _vector(torch, log2n):
    n = 1 << log2n
    return {"x": torch.randn(n, device="cuda"), "y": torch.randn(n, device="cuda"),
            "out": torch.empty(n, device="cuda"), "n": n}


def _matrix(torch, log2n):
    rows, cols = 1 << (log2n // 2), 1 << (log2n - log2n // 2)
    return {"src": torch.randn(rows, cols, device="cuda"), "out": torch.empty(rows, cols, device="cuda"),
            "rows": rows, "cols": cols}


def softmax_config(n_cols: int) -> tuple:
    """(BLOCK, num_warps) as the manifest's softmax variants choose them."""
    for limit, warps in ((1024, 4), (4096, 8), (8192, 16)):
        if n_cols <= limit:
            return limit, warps
    raise ValueError(f"no softmax variant for {n_cols} columns")


def _softmax_workload(rows: int, cols: int) -> Workload:
    def make(torch, _log2n):
        return {"x": torch.randn(rows, cols, device="cuda"),
                "out": torch.empty(rows, cols, device="cuda"), "rows": rows, "cols": cols}

    def triton_call(module, a):
        block, warps = softmax_config(a["cols"])
        module.softmax_kernel[(a["rows"],)](a["out"], a["x"], a["cols"], a["cols"], a["rows"],
                                            a["cols"], BLOCK=block, num_warps=warps)
    return Workload(
        f"softmax-{rows}x{cols}", make,
        aotk=lambda lib, a: lib.softmax(a["out"], a["x"], a["cols"], a["cols"], a["rows"], a["cols"]),
        triton=triton_call,
        torch=lambda a: __import__("torch").softmax(a["x"], dim=1, out=a["out"]),
        expected=lambda a: __import__("torch").softmax(a["x"], dim=1),
        bytes_moved=lambda a: 8 * a["rows"] * a["cols"],
        triton_file="softmax.py", triton_function="softmax_kernel")


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
WORKLOADS += [_softmax_workload(16384, 1024), _softmax_workload(8192, 4096),
              _softmax_workload(4096, 8000)]


def _layer_norm_workload(rows: int, cols: int) -> Workload:
    eps = 1e-5

    def make(torch, _log2n):
        x = torch.randn(rows, cols, device="cuda", dtype=torch.float16)
        return {"x": x, "out": torch.empty_like(x), "rows": rows, "cols": cols,
                "w": torch.rand(cols, device="cuda", dtype=torch.float16),
                "b": torch.rand(cols, device="cuda", dtype=torch.float16),
                "mean": torch.empty(rows, device="cuda"), "rstd": torch.empty(rows, device="cuda")}

    def args(a):
        return (a["x"], a["out"], a["w"], a["b"], a["mean"], a["rstd"], a["cols"], a["rows"],
                a["cols"], eps)

    def triton_call(module, a):
        # The tutorial's choice: next power of two of N, num_warps = min(max(BLOCK // 256, 1), 8).
        block = 1 << (a["cols"] - 1).bit_length()
        module.layer_norm_fwd_kernel[(a["rows"],)](*args(a), BLOCK_SIZE=block,
                                                   num_warps=min(max(block // 256, 1), 8))

    def torch_call(a):
        # torch has no out= for layer_norm: its time includes allocating the result.
        a["out"] = __import__("torch").nn.functional.layer_norm(a["x"], (a["cols"],), a["w"],
                                                                a["b"], eps)

    return Workload(
        f"layer_norm-{rows}x{cols}", make,
        aotk=lambda lib, a: lib.layer_norm(*args(a)),
        triton=triton_call, torch=torch_call,
        expected=lambda a: __import__("torch").nn.functional.layer_norm(
            a["x"], (a["cols"],), a["w"], a["b"], eps),
        bytes_moved=lambda a: 4 * a["rows"] * a["cols"] + 4 * a["cols"],
        triton_file="layer_norm.py", triton_function="layer_norm_fwd_kernel")


WORKLOADS += [_layer_norm_workload(4096, 8192)]


def _transpose_workload(rows: int, cols: int) -> Workload:
    def make(torch, _log2n):
        return {"x": torch.randn(rows, cols, device="cuda"),
                "out": torch.empty(cols, rows, device="cuda"), "rows": rows, "cols": cols}

    return Workload(
        f"transpose-{rows}x{cols}", make,
        aotk=lambda lib, a: lib.transpose(a["x"], a["out"], a["rows"], a["cols"]),
        triton=lambda m, a: m.transpose_kernel[(_cdiv(a["rows"], 64), _cdiv(a["cols"], 64))](
            a["x"], a["out"], a["rows"], a["cols"], BLOCK_M=64, BLOCK_N=64, num_warps=4),
        torch=lambda a: a["out"].copy_(a["x"].t()),
        expected=lambda a: a["x"].t(),
        bytes_moved=lambda a: 8 * a["rows"] * a["cols"],
        triton_file="transpose.py", triton_function="transpose_kernel")


WORKLOADS += [_transpose_workload(8192, 8192)]


def _square_matmul(name: str, size: int, args, aotk, triton, triton_file: str,
                   triton_function: str) -> Workload:
    """fp16 [size, size] @ [size, size] against torch.matmul; ``args(inputs)`` are the
    kernel's arguments, ``aotk(lib, inputs)`` and ``triton(module, inputs)`` its calls."""
    def make(torch, _log2n):
        a = torch.randn(size, size, device="cuda", dtype=torch.float16)
        b = torch.randn(size, size, device="cuda", dtype=torch.float16)
        return {"a": a, "b": b, "out": torch.empty_like(a), "size": size}

    return Workload(
        f"{name}-{size}", make, aotk=aotk, triton=triton,
        torch=lambda a: __import__("torch").matmul(a["a"], a["b"], out=a["out"]),
        expected=lambda a: __import__("torch").matmul(a["a"], a["b"]),
        bytes_moved=lambda a: 2 * a["size"] ** 3,
        triton_file=triton_file, triton_function=triton_function,
        metric="TFLOP/s", tolerance={"atol": 0.1, "rtol": 0.02})


def _matmul_workload(size: int) -> Workload:
    def args(a):
        n = a["size"]
        return (a["a"], a["b"], a["out"], n, n, n, n, 1, n, 1, n, 1)

    # The manifest's variant for this size: the large tiles when every size is divisible by
    # 8 (aligned, or ":8"), else the small ones; Triton's default software pipelining.
    block_m, block_n, block_k, warps = (128, 256, 64, 8) if size % 8 == 0 else (64, 64, 32, 4)

    def triton_call(module, a):
        grid = (_cdiv(a["size"], block_m) * _cdiv(a["size"], block_n),)
        module.matmul_kernel[grid](*args(a), BLOCK_SIZE_M=block_m, BLOCK_SIZE_N=block_n,
                                   BLOCK_SIZE_K=block_k, GROUP_SIZE_M=8, ACTIVATION="",
                                   num_warps=warps)

    return _square_matmul("matmul-fp16", size, args, lambda lib, a: lib.matmul(*args(a)),
                          triton_call, "matmul.py", "matmul_kernel")


# 3000: divisible by 8 but not 16, which Triton's JIT (it specializes on 16) cannot vectorize.
WORKLOADS += [_matmul_workload(4096), _matmul_workload(8192), _matmul_workload(3000)]


def _matmul_descriptor_workload(size: int) -> Workload:
    """examples/kernels/matmul_descriptor.py: the operand tiles through tensor descriptors,
    TMA copies on sm_90 (Triton's JIT makes the descriptors on the device, in scratch memory
    from the allocator set below)."""
    def args(a):
        n = a["size"]
        return (a["a"], a["b"], a["out"], n, n, n, n, n, n)

    def triton_call(module, a):
        import torch
        import triton
        triton.set_allocator(lambda size, alignment, stream:
                             torch.empty(size, device="cuda", dtype=torch.int8))
        grid = (_cdiv(a["size"], 128) * _cdiv(a["size"], 256),)
        module.matmul_descriptor_kernel[grid](*args(a), BLOCK_SIZE_M=128, BLOCK_SIZE_N=256,
                                              BLOCK_SIZE_K=64, GROUP_SIZE_M=8, num_warps=8)

    return _square_matmul("matmul-descriptor-fp16", size, args,
                          lambda lib, a: lib.matmul_descriptor(*args(a)), triton_call,
                          "matmul_descriptor.py", "matmul_descriptor_kernel")


WORKLOADS += [_matmul_descriptor_workload(4096), _matmul_descriptor_workload(8192),
              _matmul_descriptor_workload(3000)]
