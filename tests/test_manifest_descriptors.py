"""Host tensor descriptors in manifests: a parameter typed ``tensordesc<fp32[16, 32]>`` in
``aotk.toml`` is built (its base, shape and strides become C parameters ``NAME_base``,
``NAME_shape<d>``, ``NAME_stride<d>`` that ``when`` and ``grid`` can use), dispatched, and
taken by ``aotk.load`` as a ``TensorDescriptor``. Checked without a GPU; the launch on the
GPU against torch."""
import textwrap
from pathlib import Path

import pytest

import aotk
from aotk.buildsys.manifest import ManifestError
from aotk.ir.signature import HostDescriptorLayout, Signature, SignatureError
from aotk.tools.tensor_descriptor import TensorDescriptor
from tests.conftest import run_c_program

KERNEL = """
import aotk
import aotk.language as tl


@aotk.jit
def scale_tiles(in_desc, out_desc, factor, BLOCK_M: tl.constexpr):
    row = tl.program_id(0) * BLOCK_M
    tile = in_desc.load([row, 0])
    out_desc.store([row, 0], (tile * factor).to(out_desc.dtype))
"""

MANIFEST = """
[library]
name = "tiles"
targets = ["sm_80", "sm_90"]
out_dir = "build"

[[kernel]]
name = "scale"
source = "scale.py"
function = "scale_tiles"
signature = "tensordesc<fp32[16, 32]>, tensordesc<fp32[16, 32]>, fp32"
grid = ["cdiv(in_desc_shape0, BLOCK_M)"]

[[kernel.variant]]
when = "in_desc_shape1 <= 32 && out_desc_shape1 == in_desc_shape1"
constants = { BLOCK_M = 16 }
"""


def _project(tmp_path: Path, manifest=MANIFEST) -> Path:
    (tmp_path / "scale.py").write_text(textwrap.dedent(KERNEL))
    (tmp_path / "aotk.toml").write_text(textwrap.dedent(manifest))
    return tmp_path / "aotk.toml"


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return aotk.build(_project(tmp_path_factory.mktemp("tiles")))


def test_a_descriptor_entry_stands_for_its_base_shape_and_strides():
    signature = Signature.parse("tensordesc<fp16[64, 128]>, tensordesc<bf16[8, 8, 16], nan>, i32",
                                ["a", "b", "n"])
    assert signature.names == ("a_base", "a_shape0", "a_shape1", "a_stride0", "b_base",
                               "b_shape0", "b_shape1", "b_shape2", "b_stride0", "b_stride1", "n")
    assert str(signature) == "*fp16, i32, i32, i32, *bf16, i32, i32, i32, i32, i32, i32"
    assert dict(signature.descriptors) == {"a": HostDescriptorLayout((64, 128)),
                                           "b": HostDescriptorLayout((8, 8, 16), "nan")}
    assert signature.specialized().descriptors == signature.descriptors


@pytest.mark.parametrize("text,message", [
    ("tensordesc<fp16[64, x]>, i32", "block shape"),
    ("tensordesc<fp17[64, 64]>, i32", "fp17"),
    ("tensordesc<fp16[64, 64], inf>, i32", "padding must be zero or nan"),
    ("tensordesc<*fp16[64, 64]>, i32", "not a descriptor type"),
])
def test_a_malformed_descriptor_entry_is_one_clear_error(text, message):
    with pytest.raises(SignatureError, match=message):
        Signature.parse(text, ["a", "n"])


def test_the_header_takes_the_descriptor_parts_as_c_parameters(built):
    header = built.header.read_text()
    assert "int tiles_scale(struct CUstream_st *stream, float *in_desc_base, int32_t " \
           "in_desc_shape0, int32_t in_desc_shape1, int32_t in_desc_stride0, float " \
           "*out_desc_base, int32_t out_desc_shape0, int32_t out_desc_shape1, int32_t " \
           "out_desc_stride0, float factor);" in header


SELECT_PROGRAM = """
#include <stdint.h>
#include <stdio.h>
#include "tiles.h"
int main(void) {
    float *base = (float *)(uintptr_t)4096;
    int aligned = tiles_scale_select(base, 48, 32, 32, base, 48, 32, 32, 2.0f);
    int unaligned = tiles_scale_select(base + 1, 40, 32, 32, base, 40, 32, 32, 2.0f);
    int too_wide = tiles_scale_select(base, 40, 64, 64, base, 40, 64, 64, 2.0f);
    printf("%d %d %d\\n", aligned, unaligned, too_wide);
    return 0;
}
"""


def test_a_c_program_dispatches_on_the_descriptor_parts(built, tmp_path):
    run = run_c_program(SELECT_PROGRAM, built.library, tmp_path)
    assert run.returncode == 0, run.stderr
    # aligned build (0), generic build (1) for a misaligned base, none when `when` fails
    assert run.stdout.split() == ["0", "1", "-1"]


def test_aotk_load_takes_a_tensor_descriptor_and_checks_its_block(built):
    torch = pytest.importorskip("torch")
    library = aotk.load(built.library)
    x, out = torch.zeros(48, 32), torch.zeros(48, 32)
    selected = library.scale.select(TensorDescriptor.from_tensor(x, [16, 32]),
                                    TensorDescriptor.from_tensor(out, [16, 32]), 2.0)
    assert selected == "scale[BLOCK_M=16] aligned"
    with pytest.raises(ValueError, match=r"built for block \[16, 32\]"):
        library.scale.select(TensorDescriptor.from_tensor(x, [8, 32]),
                             TensorDescriptor.from_tensor(out, [16, 32]), 2.0)
    with pytest.raises(TypeError, match="must be a TensorDescriptor"):
        library.scale.select(x, TensorDescriptor.from_tensor(out, [16, 32]), 2.0)


def test_a_variant_cannot_change_a_descriptors_block(tmp_path):
    manifest = MANIFEST + """
[[kernel.variant]]
signature = "tensordesc<fp32[32, 32]>, tensordesc<fp32[32, 32]>, fp32"
constants = { BLOCK_M = 32 }
"""
    with pytest.raises(ManifestError, match=r"kernel\.scale\.variant\[1\]\.signature: a "
                                            "variant's signature may change types"):
        aotk.build(_project(tmp_path, manifest))


@pytest.mark.gpu
def test_the_built_kernel_scales_tiles_on_the_gpu(built):
    torch = pytest.importorskip("torch")
    library = aotk.load(built.library)
    x = torch.randn(40, 32, device="cuda")
    out = torch.zeros_like(x)
    library.scale(TensorDescriptor.from_tensor(x, [16, 32]),
                  TensorDescriptor.from_tensor(out, [16, 32]), 3.0)
    torch.cuda.synchronize()
    torch.testing.assert_close(out, 3 * x, rtol=0, atol=0)
