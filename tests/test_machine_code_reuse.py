"""Specializations that lower to the same LLVM module share LLVM's and ptxas's work in one
process (``compiler._machine_code``): an autotuner's num_stages=3 config whose stages do
not fit and come down to 2 compiles as fast as a cache hit, with the same bytes."""
import numpy as np

import aotk
from aotk import compiler
from aotk.launch.arguments import specialize
from aotk.toolchain import ptxas
from tests.kernels import pipeline_shapes as kernels


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
