"""The generated runtime against a stand-in CUDA driver (tests/programs/fake_libcuda.c), on
any machine: what it asks the driver for when a library built for several GPUs launches.

A pipelined matmul needs less shared memory on the GPUs whose blocks get 99 KB (sm_86,
sm_120: two stages) than on sm_80 / sm_90 (three); the library must launch each GPU's cubin
with its own amount, which the driver reports through the cubin's binary version, and the
most any cubin needs for a version it was not built for. Modules load once per context."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

import aotk
from aotk.buildsys.expressions import to_total_c
from aotk.buildsys.manifest import ManifestError
from tests.conftest import tree_pythonpath
from tests.kernels.producer_matmul import pairs_manifest

ROOT = Path(__file__).resolve().parent.parent

MANIFEST = """
[library]
name = "mm"
targets = ["sm_80", "sm_86", "sm_90", "sm_120"]

[[kernel]]
name = "matmul"
source = "{source}"
function = "matmul_kernel"
signature = "*fp16:16, *fp16:16, *fp16:16, i32:16, i32:16, i32:16, i32:16, i32:1, i32:16, i32:1, i32:16, i32:1"
grid = ["cdiv(M, BLOCK_SIZE_M) * cdiv(N, BLOCK_SIZE_N)"]
specialize = "none"

[[kernel.variant]]
constants = {{ BLOCK_SIZE_M = 128, BLOCK_SIZE_N = 256, BLOCK_SIZE_K = 64, GROUP_SIZE_M = 8, ACTIVATION = "" }}
num_warps = 8
"""

LAUNCH = """
import sys
import aotk
lib = aotk.load(sys.argv[1])
for _ in range(3):
    lib.matmul(1 << 20, 2 << 20, 3 << 20, 1024, 1024, 1024, 1024, 1, 1024, 1, 1024, 1)
print(lib.modules_loaded())
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    folder = tmp_path_factory.mktemp("fake-driver")
    subprocess.run(["cc", "-shared", "-fPIC", "-Wall", "-Werror", "-o",
                    str(folder / "libcuda.so.1"), str(ROOT / "tests" / "programs" / "fake_libcuda.c")],
                   check=True)
    manifest = folder / "aotk.toml"
    manifest.write_text(MANIFEST.format(source=ROOT / "examples" / "kernels" / "matmul.py"))
    return folder, aotk.build(manifest, out_dir=folder / "out")


def _launch(built, binary_version: int) -> tuple:
    folder, result = built
    log = folder / f"log-{binary_version}"
    run = subprocess.run([sys.executable, "-c", LAUNCH, str(result.library)], capture_output=True,
                         text=True, env={**os.environ, "PYTHONPATH": tree_pythonpath(),
                                         "LD_LIBRARY_PATH": str(folder),
                                         "FAKE_CUDA_LOG": str(log),
                                         "FAKE_CUDA_BINARY_VERSION": str(binary_version)})
    assert run.returncode == 0, run.stderr
    return log.read_text().splitlines(), int(run.stdout.strip())


def _needs(built) -> dict:
    info = aotk.load(built[1].library).info["kernels"]["matmul"]["builds"][0]
    return {int(target[3:]): facts["shared"] for target, facts in info["targets"].items()}


def test_the_gpus_with_99_kb_blocks_get_shorter_pipelines(built):
    needs = _needs(built)
    assert needs[86] == needs[120] <= 99 * 1024 < needs[80] == needs[90]


@pytest.mark.parametrize("binary_version", [80, 86, 90, 120])
def test_each_gpu_launches_with_its_own_cubins_shared_memory(built, binary_version):
    needs = _needs(built)
    lines, modules = _launch(built, binary_version)
    amount = needs[binary_version]
    assert lines == ["load module 0", f"set attribute 8 to {amount}"] + \
        [f"launch 32 blocks of 256 threads with {amount} bytes of shared memory"] * 3
    assert modules == 1   # loaded once in the context, then reused


def test_a_gpu_it_was_not_built_for_gets_the_most_any_cubin_needs(built):
    lines, _ = _launch(built, 100)   # e.g. a B200 compiling the PTX
    most = max(_needs(built).values())
    assert lines[-1] == f"launch 32 blocks of 256 threads with {most} bytes of shared memory"


PERSISTENT = """
[library]
name = "persistent"
targets = ["sm_80"]

[[kernel]]
name = "add"
source = "{source}"
function = "add_kernel"
signature = "*fp32:16, *fp32:16, *fp32:16, i32"
grid = ["min(num_sms, cdiv(n, BLOCK))"]
specialize = "none"

[[kernel.variant]]
when = "n >= 4 * num_sms * BLOCK"
constants = {{ BLOCK = 1024 }}

[[kernel.variant]]
constants = {{ BLOCK = 256 }}
"""

PERSISTENT_LAUNCH = """
import sys
import aotk
lib = aotk.load(sys.argv[1])
for n in (1 << 19, 1024, 300):
    try:
        lib.add(1 << 20, 2 << 20, 3 << 20, n)
        print("ok", lib.add.select(1 << 20, 2 << 20, 3 << 20, n))
    except aotk.AotkError as error:
        print("error", error)
"""


@pytest.fixture(scope="module")
def persistent(tmp_path_factory, built):
    folder = tmp_path_factory.mktemp("persistent")
    manifest = folder / "aotk.toml"
    manifest.write_text(PERSISTENT.format(source=ROOT / "examples" / "kernels" / "add.py"))
    return built[0], aotk.build(manifest, out_dir=folder / "out")


def _launch_persistent(persistent, sms: int) -> tuple:
    driver, result = persistent
    log = result.library.parent / f"log-{sms}"
    run = subprocess.run([sys.executable, "-c", PERSISTENT_LAUNCH, str(result.library)],
                         capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": tree_pythonpath(), "LD_LIBRARY_PATH": str(driver),
                              "FAKE_CUDA_LOG": str(log), "FAKE_CUDA_SMS": str(sms)})
    assert run.returncode == 0, run.stderr
    lines = log.read_text().splitlines() if log.exists() else []
    launches = [line for line in lines if line.startswith("launch")]
    if sms:
        # Each expression that names num_sms reads it once: per call of the script, the
        # first variant's `when` and the grid's min(num_sms, ...) at the launch, and the
        # `when` again in select().
        reads = [line for line in lines if line == "attribute multiprocessor_count"]
        assert len(reads) == 3 * len(launches), lines
    return run.stdout.splitlines(), launches


def test_num_sms_in_a_grid_and_a_when_is_the_devices_count_at_each_launch(persistent):
    results, launches = _launch_persistent(persistent, 7)
    # n = 2^19 >= 4 * 7 * 1024: the first variant, 7 programs (fewer than its 512 blocks);
    # n = 1024 and 300: the second variant (BLOCK 256), 4 and 2 blocks, fewer than the SMs.
    assert results == ["ok add[BLOCK=1024]", "ok add[BLOCK=256]", "ok add[BLOCK=256]"]
    assert [line.split(" ")[1] for line in launches] == ["7", "4", "2"]
    results, launches = _launch_persistent(persistent, 132)
    # 2^19 < 4 * 132 * 1024: the second variant, 2048 blocks on 132 programs.
    assert results == ["ok add[BLOCK=256]"] * 3
    assert [line.split(" ")[1] for line in launches] == ["132", "4", "2"]


def test_a_device_that_cannot_tell_its_sm_count_is_a_status_not_a_launch(persistent):
    results, launches = _launch_persistent(persistent, 0)
    assert launches == []
    assert results == ["error persistent_add: add: the `when` of add[BLOCK=1024] "
                       "(n >= 4 * num_sms * BLOCK) divides by zero, or the device's SM count "
                       "could not be read (status 1003)"] * 3


def test_num_sms_is_read_from_the_device_unless_the_kernel_names_it_itself():
    assert to_total_c("min(num_sms, cdiv(n, BLOCK))", set(), {"BLOCK": 256}) == (
        "aotk_min(aotk_device_sms(&bad), aotk_cdiv(n, BLOCK, &bad))", True)
    assert to_total_c("num_sms * 2", set(), {}, parameters={"num_sms"}) == ("(num_sms * 2)", False)
    assert to_total_c("num_sms * 2", set(), {"num_sms": 3}) == ("(num_sms * 2)", False)


def test_a_misspelt_num_sms_is_named_in_the_error(tmp_path):
    manifest = tmp_path / "aotk.toml"
    manifest.write_text(PERSISTENT.format(source=ROOT / "examples" / "kernels" / "add.py")
                        .replace('grid = ["min(num_sms,', 'grid = ["min(num_sm,'))
    with pytest.raises(ManifestError, match=r"kernel\.add\.grid\[0\].*names 'num_sm'.*"
                                            r"did you mean 'num_sms'"):
        aotk.build(manifest, out_dir=tmp_path / "out")


PAIRS_LAUNCH = """
import sys
import aotk
lib = aotk.load(sys.argv[1])
for m in (512, 384, 128):
    lib.matmul(1 << 20, 2 << 20, 3 << 20, m, 256, 512)
"""


@pytest.fixture(scope="module")
def pairs(tmp_path_factory, built):
    folder = tmp_path_factory.mktemp("pairs")
    manifest = folder / "aotk.toml"
    manifest.write_text(pairs_manifest())
    return built[0], aotk.build(manifest, out_dir=folder / "out")


@pytest.mark.parametrize("binary_version", [80, 90])
def test_programs_in_pairs_launch_in_clusters_of_two_where_the_grid_allows(pairs,
                                                                          binary_version):
    """num_ctas = 2 in the manifest: on the sm_90 cubin (whose producer warps share tiles)
    the runtime launches grids of even x in clusters of two through cuLaunchKernelEx, an odd
    x alone (its programs then share nothing); the sm_80 cubin always alone. The launch has
    the producer warp's threads."""
    driver, result = pairs
    log = result.library.parent / f"log-{binary_version}"
    run = subprocess.run([sys.executable, "-c", PAIRS_LAUNCH, str(result.library)],
                         capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": tree_pythonpath(),
                              "LD_LIBRARY_PATH": str(driver), "FAKE_CUDA_LOG": str(log),
                              "FAKE_CUDA_BINARY_VERSION": str(binary_version)})
    assert run.returncode == 0, run.stderr
    launches = [line for line in log.read_text().splitlines() if line.startswith("launch")]
    shared = launches[0].split(" with ")[1].split(" bytes")[0]
    threads = 288 if binary_version == 90 else 256
    plain = f"launch {{}} blocks of {threads} threads with {shared} bytes of shared memory"
    if binary_version == 90:
        assert launches == [plain.format(4) + " in clusters of 2", plain.format(3),
                            plain.format(1)]
    else:
        assert launches == [plain.format(4), plain.format(3), plain.format(1)]
