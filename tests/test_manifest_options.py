"""The compile options a manifest gives a kernel or one of its variants (maxnreg,
enable_fp_fusion, num_ctas), as Triton's launch options: built into the library, and each
bad value one error naming its key."""
import pytest

import aotk
from aotk.buildsys.manifest import ManifestError, load_manifest
from tests.projects import root_project as _project


MAXNREG_MANIFEST = """
[library]
name = "capped"
targets = ["sm_80", "sm_90"]

[[kernel]]
name = "add"
source = "examples/kernels/add.py"
function = "add_kernel"
signature = "*fp32, *fp32, *fp32, i32"
grid = ["cdiv(n, BLOCK)"]
maxnreg = {kernel_cap}

[[kernel.variant]]
constants = {{ BLOCK = 1024 }}
{variant_line}
"""


def test_maxnreg_in_the_manifest_caps_registers_per_variant(tmp_path):
    project = _project(tmp_path)
    (project / "aotk.toml").write_text(MAXNREG_MANIFEST.format(kernel_cap=40,
                                                               variant_line="maxnreg = 24"))
    result = aotk.build(project / "aotk.toml")
    info = aotk.load(result.library).info["kernels"]["add"]
    registers = [target["registers"] for build in info["builds"]
                 for target in build["targets"].values()]
    assert registers and max(registers) <= 24


@pytest.mark.parametrize("kernel_cap, variant_line, key", [
    (8, "", "kernel.add.maxnreg"), (40, "maxnreg = 300", r"kernel.add.variant\[0\].maxnreg")])
def test_a_maxnreg_out_of_range_names_its_key(tmp_path, kernel_cap, variant_line, key):
    project = _project(tmp_path)
    (project / "aotk.toml").write_text(MAXNREG_MANIFEST.format(kernel_cap=kernel_cap,
                                                               variant_line=variant_line))
    with pytest.raises(ManifestError, match=f"{key}: must be from 16 to 255"):
        aotk.build(project / "aotk.toml")


@pytest.mark.parametrize("kernel_line, variant_line, fused", [
    ("", "", True), ("enable_fp_fusion = false", "", False),
    ("enable_fp_fusion = false", "enable_fp_fusion = true", True)])
def test_enable_fp_fusion_in_the_manifest_per_kernel_or_variant(tmp_path, kernel_line,
                                                                variant_line, fused):
    project = _project(tmp_path)
    manifest = MAXNREG_MANIFEST.format(kernel_cap=64, variant_line=variant_line).replace(
        "maxnreg = 64", kernel_line)
    (project / "aotk.toml").write_text(manifest)
    (variant,) = load_manifest(project / "aotk.toml").kernels[0].variants
    assert variant.enable_fp_fusion is fused


def test_enable_fp_fusion_that_is_not_a_boolean_names_its_key(tmp_path):
    project = _project(tmp_path)
    (project / "aotk.toml").write_text(MAXNREG_MANIFEST.format(
        kernel_cap=64, variant_line='enable_fp_fusion = "yes"'))
    with pytest.raises(ManifestError, match=r"kernel.add.variant\[0\].enable_fp_fusion: "
                                            "expected true or false"):
        aotk.build(project / "aotk.toml")


@pytest.mark.parametrize("kernel_line, variant_line, pairs", [
    ("", "", 1), ("num_ctas = 2", "", 2), ("num_ctas = 2", "num_ctas = 1", 1)])
def test_num_ctas_in_the_manifest_per_kernel_or_variant(tmp_path, kernel_line, variant_line,
                                                        pairs):
    project = _project(tmp_path)
    manifest = MAXNREG_MANIFEST.format(kernel_cap=64, variant_line=variant_line).replace(
        "maxnreg = 64", kernel_line)
    (project / "aotk.toml").write_text(manifest)
    (variant,) = load_manifest(project / "aotk.toml").kernels[0].variants
    assert variant.num_ctas == pairs


@pytest.mark.parametrize("kernel_line, variant_line, message", [
    ("num_ctas = 4", "", r"kernel\.add\.num_ctas: must be 1 \(programs alone\) or 2 "
                         r"\(programs in pairs sharing their TMA tiles\), got 4"),
    ("", "num_ctas = 3", r"kernel\.add\.variant\[0\]\.num_ctas: must be 1"),
    ("", "num_ctas = true", r"kernel\.add\.variant\[0\]\.num_ctas: expected an integer"),
    ("", 'num_ctas = "2"', r"kernel\.add\.variant\[0\]\.num_ctas: expected an integer")])
def test_num_ctas_other_than_1_or_2_names_its_key(tmp_path, kernel_line, variant_line,
                                                  message):
    project = _project(tmp_path)
    (project / "aotk.toml").write_text(MAXNREG_MANIFEST.format(
        kernel_cap=64, variant_line=variant_line).replace("maxnreg = 64", kernel_line))
    with pytest.raises(ManifestError, match=message):
        aotk.build(project / "aotk.toml")
    assert not (project / "build").exists()
