"""Tensor descriptors built on the host (``aotk.tools.tensor_descriptor.TensorDescriptor``,
Triton's ``triton.tools.tensor_descriptor``) as kernel arguments: what the launch passes and
specializes on, the interpreter against numpy and torch, the checks, the compile for sm_80 /
sm_90, an autotune pre_hook that sets the block shape, and the GPU (a TMA-fed wgmma loop)."""
import numpy as np
import pytest

import aotk
import aotk.language as tl
from aotk.ir.signature import HostDescriptorLayout
from aotk.tools.tensor_descriptor import TensorDescriptor


@aotk.jit
def _scale_tiles(in_desc, out_desc, factor, BLOCK_M: tl.constexpr):
    row = tl.program_id(0) * BLOCK_M
    tile = in_desc.load([row, 0])
    out_desc.store([row, 0], (tile * factor).to(out_desc.dtype))


def _launch(x, out, block_m=16):
    width = x.shape[1]
    _scale_tiles[(-(-x.shape[0] // block_m),)](
        TensorDescriptor.from_tensor(x, [block_m, width]),
        TensorDescriptor.from_tensor(out, [block_m, width]), 3.0, BLOCK_M=block_m)


def test_a_host_descriptor_passes_base_shape_strides_and_specializes_on_its_block():
    x = np.arange(40 * 32, dtype=np.float32).reshape(40, 32)
    out = np.zeros_like(x)
    with aotk.record_launches() as launches:
        _launch(x, out)
    np.testing.assert_array_equal(out, 3 * x)   # 40 rows: the last tile is partial
    (launch,) = launches
    assert [p.name for p in launch.signature.parameters] == [
        "in_desc_base", "in_desc_shape0", "in_desc_shape1", "in_desc_stride0",
        "out_desc_base", "out_desc_shape0", "out_desc_shape1", "out_desc_stride0", "factor"]
    assert str(launch.signature) == "*fp32:16, i32, i32:16, i32:16, *fp32:16, i32, i32:16, " \
                                    "i32:16, fp32"
    assert launch.constants == {"in_desc": HostDescriptorLayout((16, 32)),
                                "out_desc": HostDescriptorLayout((16, 32)), "BLOCK_M": 16}
    for target in ("sm_80", "sm_90"):
        compiled = aotk.compile(launch.kernel, launch.signature, launch.constants,
                                target=target)
        assert ".entry _scale_tiles" in compiled.ptx


@pytest.mark.parametrize("dtype, width, hint", [
    (np.float32, 40, ":4"), (np.float16, 40, ":8"), (np.float32, 48, ":16"),
    (np.float64, 34, ":2")])
def test_a_host_descriptor_stride_is_specialized_on_16_bytes(dtype, width, hint):
    """Rows 160 bytes apart (40 fp32) are 16-byte aligned, as TMA needs, though 40 is not a
    multiple of 16: the stride is hinted in elements of 16 bytes, which the tensor map
    recipe accepts."""
    x = np.zeros((16, width), dtype)
    with aotk.record_launches() as launches:
        _scale_tiles[(1,)](TensorDescriptor.from_tensor(x, [16, 32]),
                           TensorDescriptor.from_tensor(x, [16, 32]), 3.0, BLOCK_M=16)
    (launch,) = launches
    strides = [str(p) for p in launch.signature.parameters if p.name.endswith("_stride0")]
    assert strides == [f"i32{hint}"] * 2


def test_strides_must_be_16_byte_aligned_as_in_triton():
    """Rows 72 bytes apart (36 fp16) cannot be described by a tensor map: refused when the
    descriptor is made, with Triton's words and the numbers."""
    with pytest.raises(ValueError, match=r"strides must be 16-byte aligned: a stride of 36 "
                                         r"elements of 2 bytes is 72 bytes"):
        TensorDescriptor.from_tensor(np.zeros((16, 36), np.float16), [16, 32])
    TensorDescriptor(1 << 20, [16, 36], [36, 1], [16, 32])   # an address: not checked


def test_a_host_descriptor_with_a_16_byte_stride_stores_with_tma():
    """liger's SwiGLU test sizes: fp32 rows of 40 elements. Before the 16-byte hint the
    store went through pointers (and the loads too); now both are TMA on sm_90."""
    x = np.zeros((16, 40), np.float32)
    with aotk.record_launches() as launches:
        _scale_tiles[(1,)](TensorDescriptor.from_tensor(x, [16, 32]),
                           TensorDescriptor.from_tensor(x, [16, 32]), 3.0, BLOCK_M=16)
    (launch,) = launches
    compiled = aotk.compile(launch.kernel, launch.signature, launch.constants, target="sm_90")
    assert "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group" in compiled.ptx


def test_torch_cpu_tensors_and_views_through_a_host_descriptor(monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setenv("AOTK_INTERPRET", "1")
    base = torch.randn(50, 64, dtype=torch.bfloat16)
    x = base[3:43, 16:48]                        # a view: row stride 64, storage offset
    out = torch.zeros(40, 32, dtype=torch.bfloat16)
    _launch(x, out)
    torch.testing.assert_close(out, (x.float() * 3).to(torch.bfloat16), rtol=0, atol=0)


@aotk.jit
def _sum_3d(desc, out_ptr, BLOCK: tl.constexpr):
    tile = desc.load([tl.program_id(0), 0, 0])
    tl.store(out_ptr + tl.program_id(0), tl.sum(tile.reshape(BLOCK * BLOCK)))


def test_a_three_dimensional_descriptor_reads_zero_outside_the_shape():
    x = np.ones((3, 5, 8), np.float32)[:, :, :6]   # 6 columns of 8: 32-byte rows
    out = np.zeros(3, np.float32)
    _sum_3d[(3,)](TensorDescriptor.from_tensor(x, [1, 8, 8]), out, BLOCK=8)
    np.testing.assert_array_equal(out, [30, 30, 30])


def test_the_last_dimension_must_be_contiguous_as_in_triton():
    x = np.zeros((8, 8), np.float32)
    with pytest.raises(ValueError, match="Last dimension must be contiguous"):
        TensorDescriptor.from_tensor(x.T, [8, 8])
    with pytest.raises(ValueError, match="one stride and one block dimension per dimension"):
        TensorDescriptor(x, [8, 8], [8, 1], [8])


def test_a_block_row_under_16_bytes_is_a_compile_error_naming_the_parameter():
    x = np.zeros((8, 8), np.float32)
    with pytest.raises(aotk.CompilationError, match="the tensor descriptor passed as "
                                                    "'in_desc': Descriptor block shape must "
                                                    "have at least 16 bytes"):
        _scale_tiles[(1,)](TensorDescriptor.from_tensor(x, [8, 2]),
                           TensorDescriptor.from_tensor(x.copy(), [8, 8]), 1.0, BLOCK_M=8)


def _set_blocks(nargs):
    nargs["in_desc"].block_shape = [nargs["BLOCK_M"], 32]
    nargs["out_desc"].block_shape = [nargs["BLOCK_M"], 32]


_tuned = aotk.autotune(configs=[aotk.Config({"BLOCK_M": 8}, pre_hook=_set_blocks),
                                aotk.Config({"BLOCK_M": 16}, pre_hook=_set_blocks)],
                       key=[])(_scale_tiles)


def test_an_autotune_pre_hook_sets_the_block_shape_and_best_config_is_kept():
    x = np.arange(24 * 32, dtype=np.float32).reshape(24, 32)
    out = np.zeros_like(x)
    dummy = [1, 1]   # as liger does: the pre_hook fills the block shape in
    _tuned[(3,)](TensorDescriptor.from_tensor(x, dummy), TensorDescriptor.from_tensor(out, dummy),
                 3.0)
    np.testing.assert_array_equal(out, 3 * x)
    assert _tuned.best_config.kwargs == {"BLOCK_M": 8}


def test_triton_module_path_gives_the_class():
    with aotk.redirect_triton():
        from triton.tools.tensor_descriptor import TensorDescriptor as Imported
    assert Imported is TensorDescriptor


@aotk.jit
def _matmul(a_desc, b_desc, c_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
            BLOCK_K: tl.constexpr):
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    acc = tl.zeros((BLOCK_M, BLOCK_N), tl.float32)
    for k in range(0, K, BLOCK_K):
        a = a_desc.load([pid_m * BLOCK_M, k])
        b = b_desc.load([k, pid_n * BLOCK_N])
        acc = tl.dot(a, b, acc)
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)[:, None]
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
    tl.store(c_ptr + rows * N + cols, acc, mask=(rows < M) & (cols < N))


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(256, 256, 256), (200, 136, 120)])
def test_host_descriptors_feed_a_matmul_on_the_gpu(shape):
    torch = pytest.importorskip("torch")
    M, N, K = shape
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, N, device="cuda", dtype=torch.float16)
    c = torch.empty(M, N, device="cuda", dtype=torch.float32)
    blocks = dict(BLOCK_M=64, BLOCK_N=64, BLOCK_K=32)
    _matmul[(-(-M // 64), -(-N // 64))](
        TensorDescriptor.from_tensor(a, [64, 32]), TensorDescriptor.from_tensor(b, [32, 64]),
        c, M, N, K, **blocks)
    torch.testing.assert_close(c, a.float() @ b.float(), atol=2e-2, rtol=1e-3)
    out = torch.empty(200, 64, device="cuda", dtype=torch.float16)
    x = torch.randn(200, 64, device="cuda", dtype=torch.float16)
    _launch(x, out)
    torch.testing.assert_close(out, x * 3, rtol=1e-3, atol=1e-3)
