"""One built library driving two GPUs: from C++ (tests/programs/several_gpus.cpp: a thread
per GPU, device switches in one thread, the library closed and reopened while the other
thread idles) and from Python (aotk.load with torch tensors on cuda:0 and cuda:1, a tensor
of the wrong device refused, JIT launches too). Each variant's module must load once per
device, and every result must be the one of that GPU's own inputs.

Marked ``two_gpus``: they run under ``-m gpu`` where the machine has two GPUs, and skip
elsewhere (tests/conftest.py); on one GPU, test_library_gpu.py covers several contexts of
one device."""
import os
import shutil
import subprocess
import threading
from pathlib import Path

import pytest

import aotk

pytestmark = [pytest.mark.gpu, pytest.mark.two_gpus]
ROOT = Path(__file__).resolve().parent.parent
LAUNCHES = 10_000   # per kernel and GPU


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("several-gpus")
    return aotk.build(ROOT / "aotk.toml", out_dir=out)


def _fresh_copy_and_cases(built, tmp_path):
    """The library loaded from its own copy (a separate instance, no module loaded yet),
    and ``_cases`` for it on each GPU."""
    import torch
    copy = tmp_path / "fresh" / built.library.name
    copy.parent.mkdir()
    shutil.copy(built.library, copy)
    lib = aotk.load(copy)
    cases = []
    for device in (0, 1):
        with torch.cuda.device(device):
            cases.append(_cases(lib, device))
    return lib, cases


def test_cpp_thread_per_gpu_device_switches_and_reload(built, tmp_path):
    cuda_home = os.environ.get("CUDA_HOME", "/usr/local/cuda")
    program = tmp_path / "several_gpus"
    out_dir = built.library.parent
    subprocess.run(["c++", "-std=c++17", "-O2", "-Wall", "-Wextra", "-Werror",
                    str(ROOT / "tests" / "programs" / "several_gpus.cpp"), "-I", str(out_dir),
                    "-I", f"{cuda_home}/include", f"-L{cuda_home}/lib64", "-lcudart", "-ldl",
                    "-pthread", f"-Wl,-rpath,{cuda_home}/lib64", "-o", str(program)], check=True)
    run = subprocess.run([str(program), str(built.library), str(LAUNCHES)], capture_output=True,
                         text=True, timeout=300)
    print(run.stdout)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.splitlines()[-1] == "OK"


def _cases(lib, device):
    """Every kernel of the example library with inputs on ``device`` (different on each
    GPU): (kernel, arguments, check) triples; ``check()`` is True when the outputs are the
    reference computed by torch from that device's inputs."""
    torch = pytest.importorskip("torch")
    on = f"cuda:{device}"
    generator = torch.Generator(device=on).manual_seed(100 + device)

    def randn(*shape, scale=1.0):
        return torch.randn(*shape, device=on, generator=generator) * scale

    def halves(*shape):   # multiples of 1/2 in [-1, 1]: fp16 matmuls of 64 terms are exact
        return torch.randint(-2, 3, shape, device=on, generator=generator).half() / 2

    cases = []
    n = 100_003
    x, y = randn(n), randn(n)
    add_out, copy_out = torch.empty(n, device=on), torch.empty(n, device=on)
    cases.append(("add", (x, y, add_out, n), lambda: torch.equal(add_out, x + y)))
    cases.append(("copy", (x, copy_out, n), lambda: torch.equal(copy_out, x)))
    src = randn(100, 300)
    dst = torch.full((100, 320), -7.0, device=on)
    cases.append(("copy2d", (src, dst, 100, 300, 300, 320),
                  lambda: torch.equal(dst[:, :300], src) and bool((dst[:, 300:] == -7).all())))
    logits = randn(64, 1000, scale=4)
    probabilities = torch.empty_like(logits)
    cases.append(("softmax", (probabilities, logits, 1000, 1000, 64, 1000),
                  lambda: torch.allclose(probabilities, torch.softmax(logits, 1), atol=1e-6)))
    rows = (randn(32, 1000, scale=3) + 1).half()
    weight, bias = randn(1000).abs().half(), randn(1000).half()
    normed = torch.empty_like(rows)
    mean, rstd = torch.empty(32, device=on), torch.empty(32, device=on)
    cases.append(("layer_norm", (rows, normed, weight, bias, mean, rstd, 1000, 32, 1000, 1e-5),
                  lambda: torch.allclose(normed.float(), torch.nn.functional.layer_norm(
                      rows.float(), (1000,), weight.float(), bias.float(), 1e-5),
                      atol=1e-2, rtol=1e-2)
                  and torch.allclose(mean, rows.float().mean(1), atol=1e-4)))
    scores = randn(64, 5000)
    best = torch.empty(64, device=on, dtype=torch.int32)
    cases.append(("row_argmax", (best, scores, 5000, 64, 5000),
                  lambda: torch.equal(best.long(), scores.argmax(1))))
    tile = randn(100, 300)
    flipped = torch.empty(300, 100, device=on)
    cases.append(("transpose", (tile, flipped, 100, 300), lambda: torch.equal(flipped, tile.t())))
    a, b = halves(1024, 64), halves(64, 1024)
    product = (a.float() @ b.float()).half()
    c1, c2 = torch.empty(1024, 1024, device=on, dtype=torch.half), torch.empty(
        1024, 1024, device=on, dtype=torch.half)
    cases.append(("matmul", (a, b, c1, 1024, 1024, 64, 64, 1, 1024, 1, 1024, 1),
                  lambda: torch.equal(c1, product)))
    cases.append(("matmul_descriptor", (a, b, c2, 1024, 1024, 64, 64, 1024, 1024),
                  lambda: torch.equal(c2, product)))
    small_a, small_b = halves(256, 64), halves(64, 256)
    leaky = small_a.float() @ small_b.float()
    leaky = torch.where(leaky >= 0, leaky, 0.01 * leaky).half()
    c3 = torch.empty(256, 256, device=on, dtype=torch.half)
    cases.append(("matmul_leaky_relu", (small_a, small_b, c3, 256, 256, 64, 64, 1, 256, 1, 256, 1),
                  lambda: torch.allclose(c3, leaky, atol=1e-3, rtol=1e-3)))
    batch_a, batch_b = halves(2, 128, 64), halves(2, 64, 128)
    c4 = torch.empty(2, 128, 128, device=on, dtype=torch.half)
    cases.append(("batched_matmul", (batch_a, batch_b, c4, 2, 128, 128, 64, *batch_a.stride(),
                                     *batch_b.stride(), *c4.stride()),
                  lambda: torch.equal(c4, torch.bmm(batch_a.float(), batch_b.float()).half())))
    # The Triton-C twins: the same bits as the Python kernels' outputs.
    add_tc_out, probabilities_tc = torch.empty_like(add_out), torch.empty_like(probabilities)
    normed_tc = torch.empty_like(normed)
    mean_tc, rstd_tc = torch.empty_like(mean), torch.empty_like(rstd)
    c5 = torch.empty_like(c1)
    cases.append(("add_tc", (x, y, add_tc_out, n), lambda: torch.equal(add_tc_out, add_out)))
    cases.append(("softmax_tc", (probabilities_tc, logits, 1000, 1000, 64, 1000),
                  lambda: torch.equal(probabilities_tc, probabilities)))
    cases.append(("layer_norm_tc", (rows, normed_tc, weight, bias, mean_tc, rstd_tc, 1000, 32,
                                    1000, 1e-5),
                  lambda: torch.equal(normed_tc, normed) and torch.equal(rstd_tc, rstd)))
    cases.append(("matmul_tc", (a, b, c5, 1024, 1024, 64, 64, 1, 1024, 1, 1024, 1),
                  lambda: torch.equal(c5, product)))
    assert {kernel for kernel, _, _ in cases} == set(lib.kernels)
    return cases


def test_python_thread_per_gpu(built, tmp_path):
    """One Python thread per GPU, each on its own torch stream, every kernel LAUNCHES times
    at once: all results right, each variant's module loaded once per GPU."""
    torch = pytest.importorskip("torch")
    lib, cases = _fresh_copy_and_cases(built, tmp_path)
    used = {(kernel, getattr(lib, kernel).select(*args)) for kernel, args, _ in cases[0]}
    errors = []

    def work(device):
        try:
            with torch.cuda.device(device):
                stream = torch.cuda.Stream()
                launches = [(getattr(lib, kernel), args) for kernel, args, _ in cases[device]]
                for _ in range(LAUNCHES):
                    for kernel, args in launches:
                        kernel(*args, stream=stream)
                stream.synchronize()
        except Exception as error:  # noqa: BLE001 - reported by the main thread
            errors.append((device, error))
    threads = [threading.Thread(target=work, args=(device,)) for device in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    for device in (0, 1):
        with torch.cuda.device(device):
            wrong = [kernel for kernel, _, check in cases[device] if not check()]
        assert not wrong, f"cuda:{device}: {wrong}"
    assert lib.modules_loaded() == 2 * len(used)


def test_python_device_switches_in_one_thread(built, tmp_path):
    torch = pytest.importorskip("torch")
    lib, cases = _fresh_copy_and_cases(built, tmp_path)
    previous = torch.cuda.current_device()
    try:
        for _ in range(100):
            for device in (0, 1):
                torch.cuda.set_device(device)
                for kernel, args, _ in cases[device]:
                    getattr(lib, kernel)(*args)
    finally:
        torch.cuda.set_device(previous)
    for device in (0, 1):
        with torch.cuda.device(device):
            torch.cuda.synchronize()
            assert not [kernel for kernel, _, check in cases[device] if not check()]


def test_a_tensor_of_the_other_device_is_refused(built):
    """Before any launch: a ValueError naming the argument and both devices; the output is
    untouched. The same for the JIT launcher."""
    torch = pytest.importorskip("torch")
    from tests.kernels.elementwise import add_kernel
    lib = aotk.load(built.library)
    on_one = torch.ones(4096, device="cuda:1")
    on_zero = torch.ones(4096, device="cuda:0")
    out = torch.full((4096,), -1.0, device="cuda:1")
    with torch.cuda.device(0):
        with pytest.raises(ValueError, match=r"examples_add: argument 'x_ptr' is on cuda:1 "
                                             r"but the current device is cuda:0"):
            lib.add(on_one, on_one, out, 4096)
        with pytest.raises(ValueError, match=r"argument 'x_ptr' is on cuda:1"):
            lib.add(on_one, on_one, out, 4096, stream=0)   # the general path
        with pytest.raises(ValueError, match=r"add_kernel: argument 'x_ptr' is on cuda:1"):
            add_kernel[(16,)](on_one, on_one, out, 4096, BLOCK=256)
    with torch.cuda.device(1):
        with pytest.raises(ValueError, match=r"argument 'y_ptr' is on cuda:0 but the current "
                                             r"device is cuda:1"):
            lib.add(on_one, on_zero, out, 4096)
        torch.cuda.synchronize()
        assert (out == -1).all()
        lib.add(on_one, on_one, out, 4096)
        add_kernel[(16,)](out, on_one, out, 4096, BLOCK=256)
        torch.cuda.synchronize()
        assert (out == 3).all()


def test_jit_launches_on_each_device(built):
    """The JIT launcher loads its module per context too: the same kernel on both GPUs,
    alternately, from one thread."""
    torch = pytest.importorskip("torch")
    from tests.kernels.elementwise import add_kernel
    outputs = []
    for device in (0, 1, 0, 1):
        with torch.cuda.device(device):
            x = torch.full((5000,), float(device + 1), device=f"cuda:{device}")
            out = torch.empty_like(x)
            add_kernel[(20,)](x, x, out, 5000, BLOCK=256)
            outputs.append((device, out))
    for device, out in outputs:
        with torch.cuda.device(device):
            torch.cuda.synchronize()
            assert (out == 2.0 * (device + 1)).all()
