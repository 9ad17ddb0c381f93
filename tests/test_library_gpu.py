"""The built library on the GPU: Python and C++ callers, streams, threads, contexts."""
import ctypes
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import aotk
from tests.conftest import tree_pythonpath

pytestmark = pytest.mark.gpu
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    out = tmp_path_factory.mktemp("gpu-lib")
    result = aotk.build(ROOT / "aotk.toml", out_dir=out)
    return aotk.load(result.library)


@pytest.mark.parametrize("n", [1, 15, 16, 1000, 65535, 65536, 1_000_003])
@pytest.mark.parametrize("offset", [0, 1, 3])
def test_add_from_python(lib, n, offset):
    torch = pytest.importorskip("torch")
    x = torch.randn(n + offset, device="cuda")[offset:]
    y = torch.randn(n + offset, device="cuda")[offset:]
    out = torch.full((n + offset,), -7.0, device="cuda")
    lib.add(x, y, out[offset:], n)
    torch.cuda.synchronize()
    torch.testing.assert_close(out[offset:], x + y)
    assert (out[:offset] == -7.0).all()


def test_copy2d_from_python(lib):
    torch = pytest.importorskip("torch")
    src = torch.randn(300, 500, device="cuda")
    dst = torch.zeros(300, 512, device="cuda")
    lib.copy2d(src, dst, 300, 500, 500, 512)
    torch.cuda.synchronize()
    torch.testing.assert_close(dst[:, :500], src)
    assert (dst[:, 500:] == 0).all()


@pytest.mark.parametrize("rows, cols", [(5, 1), (64, 1000), (33, 1024), (8, 3000), (4, 8000)])
def test_softmax_variants_against_torch(lib, rows, cols):
    torch = pytest.importorskip("torch")
    x = torch.randn(rows, cols, device="cuda") * 4
    out = torch.full_like(x, float("nan"))
    lib.softmax(out, x, cols, cols, rows, cols)
    torch.cuda.synchronize()
    torch.testing.assert_close(out, torch.softmax(x, dim=1))


@pytest.mark.parametrize("rows, cols", [(3, 100), (64, 1024), (17, 3000), (8, 8192),
                                        (5, 20000), (2, 33)])
def test_layer_norm_variants_against_torch(lib, rows, cols):
    """fp16 in and out, fp32 statistics; 20000 columns loop three times over BLOCK 8192."""
    torch = pytest.importorskip("torch")
    x = (torch.randn(rows, cols, device="cuda") * 3 + 1).half()
    w, b = torch.rand(cols, device="cuda").half(), torch.randn(cols, device="cuda").half()
    y = torch.empty_like(x)
    mean, rstd = torch.empty(rows, device="cuda"), torch.empty(rows, device="cuda")
    lib.layer_norm(x, y, w, b, mean, rstd, cols, rows, cols, 1e-5)
    torch.cuda.synchronize()
    reference = torch.nn.functional.layer_norm(x.float(), (cols,), w.float(), b.float(), 1e-5)
    torch.testing.assert_close(y.float(), reference, atol=1e-2, rtol=1e-2)
    torch.testing.assert_close(mean, x.float().mean(1), atol=1e-4, rtol=1e-4)
    variance = x.float().var(1, unbiased=False)
    torch.testing.assert_close(rstd, torch.rsqrt(variance + 1e-5), atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("rows, cols", [(7, 1), (100, 200), (9, 5000), (3, 20000)])
def test_row_argmax_against_torch(lib, rows, cols):
    torch = pytest.importorskip("torch")
    x = torch.randint(-50, 50, (rows, cols), device="cuda").float()   # many ties: first wins
    out = torch.full((rows,), -1, device="cuda", dtype=torch.int32)
    lib.row_argmax(out, x, cols, rows, cols)
    torch.cuda.synchronize()
    values = x.max(dim=1).values
    first = (x == values[:, None]).int().argmax(dim=1)
    assert torch.equal(out.long(), first)


@pytest.mark.parametrize("rows, cols", [(1, 1), (64, 64), (100, 37), (513, 1030)])
def test_transpose_against_torch(lib, rows, cols):
    torch = pytest.importorskip("torch")
    x = torch.randn(rows, cols, device="cuda")
    out = torch.full((cols, rows), float("nan"), device="cuda")
    lib.transpose(x, out, rows, cols)
    torch.cuda.synchronize()
    assert torch.equal(out, x.t())


@pytest.mark.parametrize("m, n, k", [(512, 512, 512), (1000, 1000, 1000), (64, 2048, 80),
                                     (2048, 1024, 4096), (8192, 8192, 8192), (1000, 1200, 3000),
                                     (1001, 1100, 1000)])
def test_matmul_against_torch(lib, m, n, k):
    _check_matmul(lib, m, n, k)


def _check_matmul(library, m, n, k):
    """Fresh random data each run; ||out - ref|| / ||ref|| below 1e-2 (issue 6)."""
    torch = pytest.importorskip("torch")
    a = torch.randn(m, k, device="cuda", dtype=torch.float16)
    b = torch.randn(k, n, device="cuda", dtype=torch.float16)
    out = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float16)
    library.matmul(a, b, out, m, n, k, k, 1, n, 1, n, 1)
    torch.cuda.synchronize()
    reference = a.float() @ b.float()
    assert (torch.linalg.norm(out.float() - reference) / torch.linalg.norm(reference)) < 1e-2
    return a


def test_matmul_any_strides_and_leaky_relu(lib):
    """A transposed B (strides (1, K)) takes the last variant; the leaky-ReLU kernel fuses
    its epilogue."""
    torch = pytest.importorskip("torch")
    m, n, k = 300, 200, 136
    a = torch.randn(m, k, device="cuda", dtype=torch.float16)
    b_t = torch.randn(n, k, device="cuda", dtype=torch.float16)
    out = torch.empty(m, n, device="cuda", dtype=torch.float16)
    b = b_t.t()
    assert lib.matmul.select(a, b, out, m, n, k, k, 1, b.stride(0), b.stride(1), n, 1).startswith(
        "matmul[BLOCK_SIZE_M=64") and "generic" in lib.matmul.select(
        a, b, out, m, n, k, k, 1, b.stride(0), b.stride(1), n, 1)
    lib.matmul(a, b, out, m, n, k, k, 1, b.stride(0), b.stride(1), n, 1)
    torch.cuda.synchronize()
    reference = a.float() @ b.float()
    assert (torch.linalg.norm(out.float() - reference) / torch.linalg.norm(reference)) < 1e-2
    lib.matmul_leaky_relu(a, b_t.t().contiguous(), out, m, n, k, k, 1, n, 1, n, 1)
    torch.cuda.synchronize()
    leaky = torch.where(reference >= 0, reference, 0.01 * reference)
    assert (torch.linalg.norm(out.float() - leaky) / torch.linalg.norm(leaky)) < 1e-2


LARGE_DESCRIPTOR = "[BLOCK_SIZE_M=128, BLOCK_SIZE_N=256, BLOCK_SIZE_K=64, GROUP_SIZE_M=8]"
PAIRED_DESCRIPTOR = "[BLOCK_SIZE_M=128, BLOCK_SIZE_N=256, BLOCK_SIZE_K=64, GROUP_SIZE_M=8, " \
    "WARP_SPECIALIZE=True]"


@pytest.mark.parametrize("m, n, k, variant", [
    (512, 512, 512, "BLOCK_SIZE_M=64"), (4096, 4096, 4096, LARGE_DESCRIPTOR),
    (8192, 8192, 8192, LARGE_DESCRIPTOR), (1000, 1200, 3000, PAIRED_DESCRIPTOR),
    (1030, 1032, 200, PAIRED_DESCRIPTOR), (2816, 3000, 3000, PAIRED_DESCRIPTOR),
    (2048, 1024, 72, LARGE_DESCRIPTOR), (200, 136, 72, "generic"),
    (1001, 1100, 1000, "generic")])
def test_descriptor_matmul_against_torch(lib, m, n, k, variant):
    """examples/kernels/matmul_descriptor.py: on the H200 its large build copies the tiles
    with TMA, reading zeros past M, N and K (1030 rows, K = 72 and 200 end mid-tile);
    sizes whose rows are not 16-byte multiples take pointer loads. Where N is not a
    multiple of 64 the programs run in pairs sharing B's tiles: 40 and 264 programs (even:
    clusters of two), 45 (odd: alone)."""
    torch = pytest.importorskip("torch")
    a = torch.randn(m, k, device="cuda", dtype=torch.float16)
    b = torch.randn(k, n, device="cuda", dtype=torch.float16)
    out = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float16)
    assert variant in lib.matmul_descriptor.select(a, b, out, m, n, k, k, n, n)
    lib.matmul_descriptor(a, b, out, m, n, k, k, n, n)
    torch.cuda.synchronize()
    assert _relative_error(out, a.float() @ b.float()) < 1e-2


def test_descriptor_matmul_of_empty_k_is_zero(lib):
    """K = 0 cannot be a tensor map (dimensions start at 1): dispatch passes the TMA builds
    over, and the pointer build writes the empty sums."""
    torch = pytest.importorskip("torch")
    a = torch.empty(2048, 0, device="cuda", dtype=torch.float16)
    b = torch.empty(0, 1024, device="cuda", dtype=torch.float16)
    out = torch.full((2048, 1024), float("nan"), device="cuda", dtype=torch.float16)
    assert "generic" in lib.matmul_descriptor.select(a, b, out, 2048, 1024, 0, 16, 1024, 1024)
    lib.matmul_descriptor(a, b, out, 2048, 1024, 0, 16, 1024, 1024)
    torch.cuda.synchronize()
    assert torch.count_nonzero(out).item() == 0


@pytest.fixture(scope="module")
def lib_sm80(tmp_path_factory):
    """The manifest built for sm_80 alone: on the H200 the driver compiles its PTX, so the
    matmuls run on the mma.sync path (ldmatrix from swizzled cp.async stages)."""
    out = tmp_path_factory.mktemp("gpu-lib-sm80")
    result = aotk.build(ROOT / "aotk.toml", out_dir=out, targets=["sm_80"])
    return aotk.load(result.library)


@pytest.mark.parametrize("m, n, k", [(512, 512, 512), (1000, 1000, 1000), (64, 2048, 80),
                                     (4096, 4096, 4096), (1000, 1200, 3000)])
def test_matmul_mma_sync_build_against_torch(lib_sm80, m, n, k):
    torch = pytest.importorskip("torch")
    a = _check_matmul(lib_sm80, m, n, k)
    # The descriptor matmul's sm_80 cubins read the tiles with pointer loads (no TMA).
    b = torch.randn(k, n, device="cuda", dtype=torch.float16)
    out = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float16)
    lib_sm80.matmul_descriptor(a, b, out, m, n, k, k, n, n)
    torch.cuda.synchronize()
    assert _relative_error(out, a.float() @ b.float()) < 1e-2
    out = torch.empty(m, n, device="cuda", dtype=torch.float16)
    b_t = torch.randn(n, k, device="cuda", dtype=torch.float16)   # any strides: generic
    lib_sm80.matmul_leaky_relu(a, b_t.t(), out, m, n, k, k, 1, 1, k, n, 1)
    torch.cuda.synchronize()
    reference = a.float() @ b_t.t().float()
    leaky = torch.where(reference >= 0, reference, 0.01 * reference)
    assert _relative_error(out, leaky) < 1e-2


@pytest.mark.parametrize("batch, m, n, k", [(4, 512, 512, 512), (5, 40, 72, 56)])
def test_batched_matmul_mma_sync_build_against_torch(lib_sm80, batch, m, n, k):
    torch = pytest.importorskip("torch")
    a = torch.randn(batch, m, k, device="cuda", dtype=torch.float16)
    b = torch.randn(batch, k, n, device="cuda", dtype=torch.float16)
    out = torch.full((batch, m, n), float("nan"), device="cuda", dtype=torch.float16)
    lib_sm80.batched_matmul(a, b, out, batch, m, n, k, *a.stride(), *b.stride(),
                            *out.stride())
    torch.cuda.synchronize()
    assert _relative_error(out, torch.bmm(a.float(), b.float())) < 1e-2


def _relative_error(out, reference):
    torch = pytest.importorskip("torch")
    return (torch.linalg.norm(out.float() - reference) / torch.linalg.norm(reference)).item()


@pytest.mark.parametrize("batch, m, n, k", [(4, 512, 512, 512), (3, 1000, 1000, 1000),
                                            (5, 40, 72, 56), (2, 64, 2048, 80)])
def test_batched_matmul_against_torch(lib, batch, m, n, k):
    """Fresh random data each run; ||out - ref|| / ||ref|| below 1e-2 against torch.bmm in
    fp32, as the matmul (issue 6). 4x512^3 takes the aligned large tiles, 3x1000^3 the
    unaligned ones, the two others small tiles."""
    torch = pytest.importorskip("torch")
    a = torch.randn(batch, m, k, device="cuda", dtype=torch.float16)
    b = torch.randn(batch, k, n, device="cuda", dtype=torch.float16)
    out = torch.full((batch, m, n), float("nan"), device="cuda", dtype=torch.float16)
    lib.batched_matmul(a, b, out, batch, m, n, k, *a.stride(), *b.stride(), *out.stride())
    torch.cuda.synchronize()
    assert _relative_error(out, torch.bmm(a.float(), b.float())) < 1e-2


def test_batched_matmul_any_strides(lib):
    """A permuted to [M, batch, K], B transposed per batch and C into padded rows take the
    last variant (any strides); the padding stays untouched."""
    torch = pytest.importorskip("torch")
    batch, m, n, k = 3, 300, 200, 136
    a = torch.randn(m, batch, k, device="cuda", dtype=torch.float16).transpose(0, 1)
    b = torch.randn(batch, n, k, device="cuda", dtype=torch.float16).transpose(1, 2)
    padded = torch.full((batch, m, n + 8), -7.0, device="cuda", dtype=torch.float16)
    out = padded[:, :, :n]
    args = (a, b, out, batch, m, n, k, *a.stride(), *b.stride(), *out.stride())
    assert lib.batched_matmul.select(*args).startswith("batched_matmul[BLOCK_SIZE_M=64")
    lib.batched_matmul(*args)
    torch.cuda.synchronize()
    assert _relative_error(out, torch.bmm(a.float(), b.float())) < 1e-2
    assert (padded[:, :, n:] == -7.0).all()


def test_a_wrong_dtype_is_refused_also_once_the_fast_path_is_warm(lib):
    torch = pytest.importorskip("torch")
    x, out = torch.ones(4096, device="cuda"), torch.zeros(4096, device="cuda")
    for _ in range(3):   # the first call binds torch's dtypes; the others take the fast path
        lib.add(x, x, out, 4096)
    torch.cuda.synchronize()
    assert (out == 2).all()
    with pytest.raises(TypeError, match="'out_ptr' is a torch.float16 tensor"):
        lib.add(x, x, out.half(), 4096)


def test_empty_grid_launches_nothing(lib):
    torch = pytest.importorskip("torch")
    x = torch.ones(16, device="cuda")
    lib.add(x, x, x, 0)
    torch.cuda.synchronize()
    assert (x == 1).all()


def test_eight_threads_on_eight_streams(lib):
    torch = pytest.importorskip("torch")
    n = 1 << 20
    streams = [torch.cuda.Stream() for _ in range(8)]
    inputs = [torch.full((n,), float(i), device="cuda") for i in range(8)]
    outputs = [torch.empty(n, device="cuda") for _ in range(8)]
    errors = []

    def work(i):
        try:
            for _ in range(50):
                lib.add(inputs[i], inputs[i], outputs[i], n, stream=streams[i])
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    torch.cuda.synchronize()
    assert not errors
    for i in range(8):
        assert (outputs[i] == 2.0 * i).all()


class _DeviceFloats:
    """A CUDA array over driver-allocated memory, for the JIT launcher."""

    def __init__(self, address, n):
        self.address, self.n = address, n

    @property
    def __cuda_array_interface__(self):
        return {"data": (self.address, False), "typestr": "<f4", "shape": (self.n,),
                "version": 3}


def test_each_context_gets_its_own_modules(lib):
    """Contexts created and destroyed one after another: the driver hands a new context
    the handle of a destroyed one, whose modules died with it, so both the library and the
    JIT launcher tell contexts apart by id, not by handle."""
    from cuda.bindings import driver

    from tests.kernels.elementwise import add_kernel
    assert driver.cuInit(0)[0] == 0
    _, device = driver.cuDeviceGet(0)
    n = 4096
    for _ in range(4):
        result = driver.cuCtxCreate(None, 0, device)
        error, context = result[0], result[1]
        assert error == 0
        error, memory = driver.cuMemAlloc(3 * n * 4)
        assert error == 0
        base = int(memory)
        host = (ctypes.c_float * n)(*[float(i) for i in range(n)])
        assert driver.cuMemcpyHtoD(base, host, n * 4)[0] == 0
        assert driver.cuMemcpyHtoD(base + n * 4, host, n * 4)[0] == 0
        for launch in ("library", "jit"):
            assert driver.cuMemsetD8(base + 2 * n * 4, 0, n * 4)[0] == 0
            if launch == "library":
                lib.add(base, base + n * 4, base + 2 * n * 4, n)
            else:
                x, y, out = (_DeviceFloats(base + i * n * 4, n) for i in range(3))
                add_kernel[(n // 256,)](x, y, out, n, BLOCK=256)
            assert driver.cuCtxSynchronize()[0] == 0
            result = (ctypes.c_float * n)()
            assert driver.cuMemcpyDtoH(result, base + 2 * n * 4, n * 4)[0] == 0
            assert list(result)[:5] == [0.0, 2.0, 4.0, 6.0, 8.0], launch
            assert result[n - 1] == 2.0 * (n - 1), launch
        driver.cuMemFree(memory)
        driver.cuCtxDestroy(context)


def test_python_example_runs(tmp_path):
    subprocess.run([sys.executable, "-m", "aotk", "build", str(ROOT / "aotk.toml")], check=True,
                   cwd=ROOT, env={**os.environ, "PYTHONPATH": tree_pythonpath()})
    run = subprocess.run([sys.executable, str(ROOT / "examples" / "python" / "demo.py")],
                         capture_output=True, text=True, env={**os.environ, "PYTHONPATH": tree_pythonpath()})
    assert run.returncode == 0, run.stderr
    assert "OK" in run.stdout


def test_cpp_example_builds_and_runs(tmp_path):
    if shutil.which("make") is None:
        pytest.fail("make is needed for the C++ example")
    example = tmp_path / "cpp"
    shutil.copytree(ROOT / "examples" / "cpp", example)
    aotk_command = f"{sys.executable} -m aotk"
    env = {**os.environ, "PYTHONPATH": tree_pythonpath()}
    make = ["make", "-C", str(example), f"ROOT={ROOT}", f"AOTK={aotk_command}"]
    subprocess.run(make + ["run"], check=True, env=env)
    # Touching a kernel makes make rebuild the library (through the depfile).
    library = example / "build" / "libexamples.so"
    before = library.stat().st_mtime_ns
    os.utime(ROOT / "examples" / "kernels" / "copy.py")
    subprocess.run(make, check=True, env=env)
    assert library.stat().st_mtime_ns > before
