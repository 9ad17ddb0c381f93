"""``aotk inspect --triton``: beside each variant, the registers and spill bytes of Triton's
build of the same kernel and configuration (the installed triton of the test extra compiles
without a GPU; the same ptxas reports both). Checked without a GPU."""
import textwrap

import pytest
from click.testing import CliRunner

from aotk_cli.main import main

pytest.importorskip("triton", reason="Triton comes with liger-kernel (test extra)")

TRITON_KERNEL = """
    import triton
    import triton.language as tl


    @triton.jit
    def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) +
                 tl.load(y_ptr + offs, mask=mask), mask=mask)
"""

AOTK_KERNEL = """
    import aotk
    import aotk.language as tl


    @aotk.jit
    def copy_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)
"""

MANIFEST = """
[library]
name = "cmp"
targets = ["sm_80", "sm_90"]

[[kernel]]
name = "add"
source = "triton_add.py"
function = "add_kernel"
signature = "*fp32, *fp32, *fp32, i32"
grid = ["cdiv(n, BLOCK)"]
constants = { BLOCK = 1024 }

[[kernel]]
name = "copy"
source = "aotk_copy.py"
function = "copy_kernel"
signature = "*fp32, *fp32, i32"
grid = ["cdiv(n, BLOCK)"]
specialize = "none"
constants = { BLOCK = 1024 }
"""


@pytest.fixture
def manifest(tmp_path, monkeypatch):
    monkeypatch.setenv("AOTK_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "triton_add.py").write_text(textwrap.dedent(TRITON_KERNEL))
    (tmp_path / "aotk_copy.py").write_text(textwrap.dedent(AOTK_KERNEL))
    (tmp_path / "aotk.toml").write_text(MANIFEST)
    return tmp_path / "aotk.toml"


def test_triton_columns_beside_each_variant_and_a_note_where_there_is_none(manifest):
    result = CliRunner().invoke(main, ["inspect", "--triton", str(manifest)])
    assert result.exit_code == 0, result.output
    lines = result.output.strip().splitlines()
    assert lines[0].split()[-4:] == ["triton", "registers", "triton", "spills"]
    rows = [line.split() for line in lines[1:] if line.startswith(("add ", "copy "))]
    assert len(rows) == 2 * 2 + 1 * 2   # add: aligned + generic; copy: generic; two targets
    for row in rows:
        if row[0] == "add":
            registers, spills = int(row[-2]), int(row[-1])
            assert 8 <= registers <= 255 and spills == 0
        else:
            assert row[-2:] == ["-", "-"]
    assert lines[-1] == "copy: no Triton number: the source is written for aotk, not Triton"


def test_triton_columns_need_the_manifest(manifest):
    built = CliRunner().invoke(main, ["build", str(manifest)])
    assert built.exit_code == 0, built.output
    library = manifest.parent / "build" / "libcmp.so"
    result = CliRunner().invoke(main, ["inspect", "--triton", str(library)])
    assert result.exit_code == 1
    assert result.output.strip() == ("aotk: error: --triton needs the manifest (Triton "
                                     "compiles the kernel sources), not a built library")


AUTOTUNED = """
    import triton
    import triton.language as tl


    @triton.autotune(configs=[triton.Config({"BLOCK": 256})], key=["n"])
    @triton.jit
    def fill(out_ptr, n, value, DTYPE: tl.constexpr, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(out_ptr + offs, value.to(DTYPE), mask=offs < n)
"""


def test_an_autotuned_kernel_with_a_dtype_constexpr_is_compared(tmp_path):
    import aotk.language as tl
    from aotk.buildsys.triton_side import load_triton_function, triton_resources
    from aotk.ir.signature import Signature
    (tmp_path / "fill.py").write_text(textwrap.dedent(AUTOTUNED))
    function = load_triton_function(tmp_path / "fill.py", "fill")
    signature = Signature.parse("*fp16:16, i32, fp32", ["out_ptr", "n", "value"])
    for target in ("sm_80", "sm_90"):
        numbers = triton_resources(function, signature, {"DTYPE": tl.float16, "BLOCK": 256},
                                   4, 3, target)
        assert 4 <= numbers["registers"] <= 64 and numbers["spills"] == 0


DESCRIPTOR_MATMUL = """
    import triton
    import triton.language as tl


    @triton.jit
    def tile_matmul(a_desc, b_desc, c_desc, K, BM: tl.constexpr, BN: tl.constexpr,
                    BK: tl.constexpr):
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k in range(0, K, BK):
            acc = tl.dot(a_desc.load([0, k]), b_desc.load([k, 0]), acc)
        c_desc.store([0, 0], acc.to(tl.float16))
"""


def test_a_kernel_on_host_tensor_descriptors_is_compared(tmp_path):
    """Host-built descriptors (tensordesc<...> in the signature, aotk's base / shape / stride
    parameters) are Triton's ``tensordesc`` parameters of the same block shapes: both sides
    build the same TMA kernel (liger's SwiGLU MLP kernels take four such descriptors)."""
    from aotk.buildsys.triton_side import load_triton_function, triton_compile, triton_resources
    from aotk.ir.signature import Signature
    (tmp_path / "tiles.py").write_text(textwrap.dedent(DESCRIPTOR_MATMUL))
    function = load_triton_function(tmp_path / "tiles.py", "tile_matmul")
    signature = Signature.parse(
        "tensordesc<fp16[64, 64]>, tensordesc<fp16[64, 128]>, tensordesc<fp16[64, 128]>, i32",
        ["a_desc", "b_desc", "c_desc", "K"])
    constants = {"BM": 64, "BN": 128, "BK": 64}
    numbers = triton_resources(function, signature, constants, 4, 3, "sm_90")
    assert 32 <= numbers["registers"] <= 255 and numbers["spills"] == 0
    ptx = triton_compile(function, signature, constants, 4, 3, "sm_90").asm["ptx"]
    assert "cp.async.bulk.tensor.2d" in ptx and "wgmma.mma_async" in ptx
