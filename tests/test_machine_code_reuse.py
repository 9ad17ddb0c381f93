"""Specializations that lower to the same LLVM module share LLVM's and ptxas's work in one
process (``compiler._machine_code``): an autotuner's num_stages=3 config whose stages do
not fit and come down to 2 compiles as fast as a cache hit, with the same bytes. A library
built for several targets runs LLVM once where their IR is the same (``compiler.shares_ptx``)."""
import re

import numpy as np

import aotk
from aotk import compiler
from aotk.launch.arguments import specialize
from aotk.backend import ptx as backend_ptx
from aotk.toolchain import ptxas
from tests.kernels import pipeline_shapes as kernels
from tests.kernels.elementwise import binary_ops_kernel
from tests.kernels.libdevice import libdevice_kernel


def _swiglu(num_stages, block_k=64):
    """liger's fp32 SwiGLU forward at 64x128xBK on 8 warps: three stages of its three tiles
    (80 KB each at BK = 64) do not fit a block; two do."""
    f32 = np.float32
    x, weights = np.empty((2, 512, 512), f32), np.empty((512, 512), f32)
    from aotk.tools.tensor_descriptor import TensorDescriptor
    arguments = dict(x_desc=TensorDescriptor.from_tensor(x, [1, 64, block_k]),
                     wg_desc=TensorDescriptor.from_tensor(weights, [128, block_k]),
                     wu_desc=TensorDescriptor.from_tensor(weights, [128, block_k]),
                     out_ptr=np.empty((2, 512, 512), f32), S=512, N=512, K=512)
    kernel = kernels.swiglu_kernel
    runtime, constants = kernel._split_arguments((), {**arguments, "BM": 64, "BN": 128,
                                                      "BK": block_k})
    signature, _ = specialize(kernel, runtime, host_memory=True)
    return aotk.compile(kernel, signature, constants, 8, num_stages, target="sm_90")


def test_a_config_whose_stages_came_down_reuses_the_machine_code(monkeypatch):
    runs = []
    real = ptxas.assemble
    monkeypatch.setattr(ptxas, "assemble", lambda *a, **k: runs.append(a) or real(*a, **k))
    compiler.forget_machine_code()
    two, three = _swiglu(2), _swiglu(3)
    assert len(runs) == 1
    assert three.ptx == two.ptx and three.cubin == two.cubin
    # Each keeps what it was asked for; the metadata is its own copy.
    assert (two.metadata["num_stages"], three.metadata["num_stages"]) == (2, 3)
    three.metadata["registers"] = -1
    assert _swiglu(3).metadata["registers"] == two.metadata["registers"] > 0
    _swiglu(2, block_k=32)   # another module: assembled
    assert len(runs) == 2


def test_the_memo_keeps_the_latest_entries(monkeypatch):
    runs = []
    real = ptxas.assemble
    monkeypatch.setattr(ptxas, "assemble", lambda *a, **k: runs.append(a) or real(*a, **k))
    monkeypatch.setattr(compiler, "MACHINE_CODE_ENTRIES", 1)
    compiler.forget_machine_code()
    _swiglu(2)
    _swiglu(2, block_k=32)
    _swiglu(2, block_k=32)   # the latest: kept
    assert len(runs) == 2
    _swiglu(2)               # the oldest: dropped, assembled again
    assert len(runs) == 3


def _count_llvm_runs(monkeypatch) -> list:
    runs = []
    real = backend_ptx.emit_ptx
    monkeypatch.setattr(backend_ptx, "emit_ptx",
                        lambda text, arch, *a, **k: runs.append(arch) or real(text, arch, *a, **k))
    compiler.forget_machine_code()
    return runs


def _add(target, older=None, num_warps=4):
    return aotk.compile(binary_ops_kernel, "*fp32:16, *fp32:16, *fp32:16, i32",
                        {"OP": "add", "BLOCK": 1024}, num_warps=num_warps, target=target,
                        older=older)


def _without_target(ptx: str) -> str:
    return re.sub(r"\.target sm_\d+a?\n", "", ptx)


def test_a_newer_target_of_the_same_ir_assembles_the_older_targets_ptx(monkeypatch):
    runs = _count_llvm_runs(monkeypatch)
    sm80 = _add("sm_80")
    sm90 = _add("sm_90", older=sm80)
    assert runs == ["sm_80"]   # LLVM ran once
    assert sm90.ptx == sm80.ptx and sm90.lowered == sm80.lowered
    assert (sm90.metadata["arch"], sm90.metadata["ptx_arch"]) == ("sm_90", "sm_80")
    assert sm80.metadata["ptx_arch"] == "sm_80"
    assert sm90.cubin != sm80.cubin   # assembled for sm_90
    # What LLVM gives sm_90 alone is that PTX but for its .target line, and ptxas's
    # resources for it are the same.
    alone = _add("sm_90")
    assert runs == ["sm_80", "sm_90"]
    assert alone.metadata["ptx_arch"] == "sm_90"
    assert _without_target(alone.ptx) == _without_target(sm80.ptx) != sm80.ptx
    assert alone.metadata["registers"] == sm90.metadata["registers"] > 0


def test_libdevice_and_other_options_keep_their_own_ptx(monkeypatch):
    runs = _count_llvm_runs(monkeypatch)
    # libdevice's code is chosen per arch (__nvvm_reflect("__CUDA_ARCH")): not shared.
    signature, constants = "*fp32, *fp32, *fp32", {"FN": "erfinv", "BINARY": False}
    sm80 = aotk.compile(libdevice_kernel, signature, constants, target="sm_80")
    assert backend_ptx.uses_libdevice(sm80.lowered)
    sm90 = aotk.compile(libdevice_kernel, signature, constants, target="sm_90", older=sm80)
    assert sm90.lowered == sm80.lowered and sm90.metadata["ptx_arch"] == "sm_90"
    assert runs == ["sm_80", "sm_90"]
    # Another number of warps is another module; an older compile is never a newer's.
    other = _add("sm_90", older=_add("sm_80", num_warps=8))
    assert other.metadata["ptx_arch"] == "sm_90"
    assert _add("sm_80", older=_add("sm_90")).metadata["ptx_arch"] == "sm_80"
