"""Triton-C, the C-syntax block language (aotk.tritonc, aotk.frontend.tritonc): the examples
give the same kir and PTX as their Python twins, every construct runs on the interpreter
with C's semantics, the C parameter list gives the signature, errors point into the .tc
file, and a manifest builds .tc sources."""
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import aotk
from tests.examples import example_module
from aotk.buildsys.manifest import ManifestError
from aotk.ir.signature import Signature

pytest.importorskip("lark")
pytest.importorskip("pcpp")
import aotk.tritonc as tritonc  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
KERNELS = ROOT / "examples" / "kernels"


def _ops(kir) -> list:
    """The kir's operations: without source positions (the two files' lines differ) and the
    constexpr listing (the Python matmul has one more, its empty ACTIVATION)."""
    return [re.sub(r"\s*//\s*line \d+.*$", "", line) for line in str(kir).splitlines()
            if "// constexprs:" not in line]


MATMUL_TILES = dict(BLOCK_SIZE_M=128, BLOCK_SIZE_N=256, BLOCK_SIZE_K=64, GROUP_SIZE_M=8)


@pytest.mark.parametrize("file, function, signature, constants, python_only", [
    ("add", "add_kernel", "*fp32:16, *fp32:16, *fp32:16, i32:16", {"BLOCK": 1024}, {}),
    ("softmax", "softmax_kernel", "*fp32:16, *fp32:16, i32:16, i32:16, i32, i32",
     {"BLOCK": 4096}, {}),
    ("layer_norm", "layer_norm_fwd_kernel", "*fp16:16, *fp16:16, *fp16:16, *fp16:16, "
     "*fp32:16, *fp32:16, i32:16, i32, i32:16, fp32", {"BLOCK_SIZE": 1024}, {}),
    ("matmul", "matmul_kernel", "*fp16:16, *fp16:16, *fp16:16, i32:16, i32:16, i32:16, "
     "i32:16, i32:1, i32:16, i32:1, i32:16, i32:1", MATMUL_TILES, {"ACTIVATION": ""}),
])
def test_the_examples_give_their_python_twins_kir_and_ptx(file, function, signature, constants,
                                                          python_only):
    twin = getattr(example_module(file), function)
    kernel = tritonc.load(KERNELS / f"{file}.tc", function)
    parsed = Signature.parse(signature, twin.runtime_names)
    assert _ops(kernel.kir(signature, constants=constants)) == \
        _ops(twin.kir(parsed, constants={**constants, **python_only}))
    num_warps = 8 if file == "matmul" else 4   # as the root manifest builds them
    for target in ("sm_80", "sm_90"):
        ours = aotk.compile(kernel, signature, constants=constants, target=target,
                            num_warps=num_warps)
        theirs = aotk.compile(twin, signature, constants={**constants, **python_only},
                              target=target, num_warps=num_warps)
        assert ours.asm["ptx"] == theirs.asm["ptx"], target


def test_add_and_softmax_on_the_interpreter():
    add = tritonc.load(KERNELS / "add.tc", "add_kernel")
    x, y = np.arange(1000, dtype=np.float32), np.full(1000, 0.5, np.float32)
    out = np.zeros(1000, np.float32)
    add[(4,)](x, y, out, 1000, BLOCK=256)
    assert np.array_equal(out, x + y)
    softmax = tritonc.load(KERNELS / "softmax.tc", "softmax_kernel")
    logits = np.random.default_rng(0).standard_normal((5, 300)).astype(np.float32) * 4
    probabilities = np.zeros_like(logits)
    softmax[(5,)](probabilities, logits, 300, 300, 5, 300, BLOCK=512)
    reference = np.exp(logits - logits.max(1, keepdims=True))
    np.testing.assert_allclose(probabilities, reference / reference.sum(1, keepdims=True),
                               rtol=1e-5, atol=1e-7)


def test_every_construct_on_the_interpreter_and_compiled():
    """tests/kernels/constructs.tc: ranges, newaxis broadcasts, reductions by subscript
    (+ over rows, max over columns), a counting for, a while, a do/while, if/else with &&, C's integer
    / and % (towards zero), select, casts to scalar and block types, min, stores,
    atomic_add and a #define beside a macro the launch gives."""
    kernel = tritonc.load(ROOT / "tests" / "kernels" / "constructs.tc", "constructs")
    x = np.random.default_rng(1).standard_normal((4, 8)).astype(np.float32)
    out, counts = np.zeros(12, np.float32), np.zeros(4, np.int32)
    kernel[(1,)](x, out, counts, 5, COLS=8)
    total = 5 * 1.5 * 2                         # the loop, then doubled by the if
    expected = np.maximum(x.max(1), 0) + total + (-3) + (-1) + 1.0   # -7/2, -7%3, min
    np.testing.assert_allclose(out[:4], expected, rtol=1e-6)
    np.testing.assert_allclose(out[4:], x.sum(0), rtol=1e-5, atol=1e-6)
    assert counts.tolist() == [1, 1, 1, 1]
    for target in ("sm_80", "sm_90"):
        compiled = aotk.compile(kernel, kernel.signature({"COLS": 8}),
                                constants={"COLS": 8}, target=target)
        assert "atom.global" in compiled.asm["ptx"] or "red.global" in compiled.asm["ptx"]


def test_pointer_compound_assignment_local_hints_and_a_kernel_named_by_a_macro():
    kernel = tritonc.kernel(
        "#define KERNEL bump\n"
        "__global__ void KERNEL(float *x, int n) {\n"
        "  int offs[64] __multipleof(64) = 0 ... 64;\n"
        "  *?(offs < n)(x + offs) += 1.5f;\n"
        "  *(x + 63) *= 2;\n"
        "}\n", "bump")
    assert kernel.param_names == ["x", "n"]
    assert "tl.multiple_of(" in kernel.python_source()
    x = np.arange(64, dtype=np.float32)
    kernel[(1,)](x, 60)
    expected = np.arange(64, dtype=np.float32)
    expected[:60] += 1.5
    expected[63] *= 2
    assert x.tolist() == expected.tolist()


def test_the_c_parameter_list_is_the_signature():
    kernel = tritonc.kernel(
        "__global__ void k(half *a __aligned(16), float *b __noalias __readonly,\n"
        "                  int n __multipleof(16), unsigned char flags, long m) {}\n", "k")
    assert kernel.param_names == ["a", "b", "n", "flags", "m"]
    assert kernel.signature() == "*fp16:16, *fp32, i32:16, u8, i64"


def test_a_dtype_constant_becomes_its_c_type_name():
    kernel = tritonc.kernel(
        "__global__ void scale(TYPE *x, int n) {\n"
        "  int offs[64] = 0 ... 64;\n"
        "  *?(offs < n)(x + offs) = *?(offs < n)(x + offs) * 2;\n"
        "}\n", "scale")
    assert kernel.signature({"TYPE": aotk.language.float16}) == "*fp16, i32"
    assert kernel.signature({"TYPE": "fp64"}) == "*fp64, i32"
    x = np.arange(64, dtype=np.float16)
    kernel[(1,)](x, 60, TYPE=aotk.language.float16)
    assert x[:60].tolist() == (np.arange(60) * 2).tolist() and x[60] == 60


@pytest.mark.parametrize("source, message, line", [
    ("__global__ void k(int *x) {\n  int a = 1\n  *x = a;\n}\n",
     r"<triton-c>:3:6: error: syntax error at '='", 3),   # `1 * x = a`, as C reads it
    ("__global__ void k(int *x) {\n  *x = undefined_name;\n}\n",
     r"<triton-c>:2:8: error: .*undefined_name", 2),
    ("__global__ void k(float *x) {\n  float a[4] = 0 ... 8;\n}\n",
     r"<triton-c>:2:3: error: a value of shape \[8\] does not broadcast to the declared "
     r"shape \[4\]", 2),
    ("__global__ void k(float *x) {\n  float a[4, 4] = 0;\n  float b[4] = a[+];\n}\n",
     r"<triton-c>:3:16: error: 1 subscript\(s\) for a block of shape \[4, 4\]", 3),
    ("__global__ void k(float *x) {\n  float a[BLOCK] = 0;\n}\n",
     r"<triton-c>:2:11: error: name 'BLOCK' is not defined", 2),
    ("__global__ void k(float *x) {\n  *x = frobnicate(1);\n}\n",
     r"<triton-c>:2:8: error: unknown function 'frobnicate'", 2),
    ("__global__ void k(int *x, int n) {\n  for (int i = 0; i < n; i++) {\n    break;\n  }\n}\n",
     r"<triton-c>:3:5: error: break is not supported", 3),
])
def test_errors_name_the_file_line_and_column(source, message, line):
    kernel = tritonc.kernel(source, "k")
    with pytest.raises(aotk.CompilationError, match=message) as raised:
        aotk.compile(kernel, kernel.signature(), target="sm_90")
    assert raised.value.line == line and "Traceback" not in str(raised.value)


def test_a_manifest_builds_triton_c_beside_python(tmp_path):
    run = subprocess.run([sys.executable, "-m", "aotk", "build",
                          str(ROOT / "examples" / "tritonc" / "aotk.toml"), "-o", str(tmp_path)],
                         capture_output=True, text=True, env={"PYTHONPATH": str(ROOT),
                                                              "PATH": "/usr/bin:/bin",
                                                              **_cache_env()})
    assert run.returncode == 0, run.stderr
    library = aotk.load(tmp_path / "libtritonc_examples.so")
    assert set(library.kernels) == {"add", "add_python", "softmax", "layer_norm", "matmul"}
    assert library.add.select(16, 32, 48, 1 << 20) == "add[BLOCK=1024] aligned"
    assert library.softmax.select(16, 32, 4096, 4096, 16, 4096) == "softmax[BLOCK=8192] aligned"
    depfile = (tmp_path / "tritonc_examples.d").read_text()
    assert str(KERNELS / "add.tc") in depfile and str(KERNELS / "matmul.tc") in depfile
    # layer_norm's entry has no signature: the C parameters gave it.
    assert [p["type"] for p in library.kernels["layer_norm"]["params"]] == \
        ["*fp16"] * 4 + ["*fp32"] * 2 + ["i32"] * 3 + ["fp32"]
    assert library.matmul.select(16, 32, 48, 2048, 2048, 2048, 2048, 1, 2048, 1, 2048, 1) == \
        "matmul[BLOCK_SIZE_M=128, BLOCK_SIZE_N=256, BLOCK_SIZE_K=64, GROUP_SIZE_M=8] aligned"


MACRO_NAMED = """
__global__ void KERNEL(TYPE *x, int n) {
  int offs[BLOCK] = get_program_id(0) * BLOCK + 0 ... BLOCK;
  *?(offs < n)(x + offs) = *?(offs < n)(x + offs) * 2;
}
"""

MACRO_MANIFEST = """
[library]
name = "scaled"
targets = ["sm_90"]

[[kernel]]
name = "scale_fp16"
source = "scale.tc"
function = "scale_fp16"
grid = ["cdiv(n, BLOCK)"]

[[kernel.variant]]
constants = {{ KERNEL = "scale_fp16", TYPE = "fp16", BLOCK = 256 }}

[[kernel]]
name = "scale_fp32"
source = "scale.tc"
function = "scale_fp32"
grid = ["cdiv(n, BLOCK)"]

[[kernel.variant]]
constants = {{ KERNEL = "{fp32_name}", TYPE = "fp32", BLOCK = 256 }}
"""


def test_a_manifest_names_one_source_s_kernel_by_a_macro_per_entry(tmp_path):
    (tmp_path / "scale.tc").write_text(MACRO_NAMED)
    (tmp_path / "aotk.toml").write_text(MACRO_MANIFEST.format(fp32_name="scale_fp32"))
    result = aotk.build(tmp_path / "aotk.toml", out_dir=tmp_path / "out")
    library = aotk.load(result.library)
    assert [p["type"] for p in library.kernels["scale_fp16"]["params"]] == ["*fp16", "i32"]
    assert [p["type"] for p in library.kernels["scale_fp32"]["params"]] == ["*fp32", "i32"]
    # Constants that expand the macro to another name: the error says what they gave.
    (tmp_path / "aotk.toml").write_text(MACRO_MANIFEST.format(fp32_name="scale_f32"))
    with pytest.raises(ManifestError, match=r"no __global__ function named .scale_fp32. with "
                                             r"the macros .*the file defines 'scale_f32'"):
        aotk.build(tmp_path / "aotk.toml", out_dir=tmp_path / "out2")
    assert not (tmp_path / "out2" / "libscaled.so").exists()


def _cache_env() -> dict:
    import os
    return {k: v for k, v in os.environ.items() if k.startswith("AOTK_") or k == "HOME"}


@pytest.mark.gpu
def test_on_the_gpu_the_examples_compute_what_their_twins_do():
    torch = pytest.importorskip("torch")
    module = example_module("softmax")
    kernel = tritonc.load(KERNELS / "softmax.tc", "softmax_kernel")
    logits = torch.randn(64, 1000, device="cuda") * 4
    ours, theirs = torch.empty_like(logits), torch.empty_like(logits)
    kernel[(64,)](ours, logits, 1000, 1000, 64, 1000, BLOCK=1024)
    module.softmax_kernel[(64,)](theirs, logits, 1000, 1000, 64, 1000, BLOCK=1024)
    torch.cuda.synchronize()
    assert torch.equal(ours, theirs)
    torch.testing.assert_close(ours, torch.softmax(logits, dim=1))


@pytest.mark.gpu
def test_on_the_gpu_the_root_library_s_triton_c_entries_give_their_twins_bits(tmp_path):
    """The root manifest's add_tc, softmax_tc, layer_norm_tc and matmul_tc beside the Python
    kernels of the same library, on the same inputs (tests/test_several_gpus.py's cases)."""
    torch = pytest.importorskip("torch")
    from tests.test_several_gpus import _cases
    library = aotk.load(aotk.build(ROOT / "aotk.toml", out_dir=tmp_path).library)
    cases = _cases(library, torch.cuda.current_device())
    for kernel, arguments, _ in cases:
        getattr(library, kernel)(*arguments)
    torch.cuda.synchronize()
    checked = {kernel: check() for kernel, _, check in cases}
    twins = ("add", "softmax", "layer_norm", "matmul")
    assert all(checked[k] for k in twins)
    assert {k: checked[f"{k}_tc"] for k in twins} == {k: True for k in twins}


def test_the_root_library_compiles_each_triton_c_twin_once_with_its_python_kernel(tmp_path):
    """Identical code shares one cache key (the listing leaves source lines out), so the
    Triton-C entries of the root manifest cost no compile beyond their Python twins'."""
    result = aotk.build(ROOT / "aotk.toml", out_dir=tmp_path)
    keys = {}
    for entry in result.variants:
        keys.setdefault(entry["kernel"], set()).add(entry["key"])
    for twin in ("add", "softmax", "layer_norm"):
        assert keys[f"{twin}_tc"] <= keys[twin], twin
    # A kernel whose assert reports its file and line keys on them.
    listing = aotk.ir.kir.cache_listing(_asserting.kir("*i32", debug=True))
    assert f"// file {__file__}" in listing and "// line" in listing
    assert "// line" not in aotk.ir.kir.cache_listing(_asserting.kir("*i32", debug=False))


@aotk.jit
def _asserting(x_ptr):
    value = aotk.language.load(x_ptr)
    aotk.language.device_assert(value > 0, "x must be positive")
    aotk.language.store(x_ptr, value + 1)
