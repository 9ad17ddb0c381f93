"""Autotuning ahead of time: an @autotune kernel in a manifest, its tuning file (as `aotk tune`
writes it) read by `aotk build` without a GPU, and the library's dispatch choosing the config
measured fastest at the nearest tuned point; every unusable input is one error, or one warning
and the kernel's default build, never a wrong kernel."""
import ctypes
import json
import subprocess
import sys
from pathlib import Path

import pytest

import aotk
from aotk.buildsys.manifest import ManifestError
from aotk.buildsys.sources import load_kernel_and_tuner
from aotk.buildsys.tuning import TunedPoint, tuning_path, write_kernel

KERNEL = """\
import aotk
import aotk.language as tl


@aotk.autotune(configs=[aotk.Config({"BLOCK": 64}, num_warps=2), aotk.Config({"BLOCK": 128}),
                        aotk.Config({"BLOCK": 256}), aotk.Config({"BLOCK": 1024}, num_warps=8)],
               key=["n"])
@aotk.jit
def add(x_ptr, y_ptr, out_ptr, n, SCALE: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x * SCALE + tl.load(y_ptr + offs, mask=mask), mask=mask)
"""

MANIFEST = """\
[library]
name = "tuned"
targets = {targets}

[[kernel]]
name = "add"
source = "kernels/add.py"
function = "add"
signature = "*fp32, *fp32, *fp32, i32"
grid = ["cdiv(n, BLOCK)"]
constants = {{ SCALE = 2 }}

[kernel.tune]
points = [{{ n = 1000 }}, {{ n = 100000 }}, {{ n = 10000000 }}]
arguments = {{ x_ptr = "n", y_ptr = "n", out_ptr = "n" }}
work = "12 * n"
work_unit = "byte"
"""

# What `aotk tune` would have found: config 0 at n = 1000, 2 at 1e5, 3 at 1e7.
WINNERS = [({"n": 1000}, 0), ({"n": 100000}, 2), ({"n": 10000000}, 3)]


def _project(tmp_path, targets='["sm_90"]', manifest=MANIFEST, kernel=KERNEL):
    (tmp_path / "kernels").mkdir(exist_ok=True)
    (tmp_path / "kernels" / "add.py").write_text(kernel)
    (tmp_path / "aotk.toml").write_text(manifest.format(targets=targets))
    return tmp_path


def _write_tuning(project, winners=WINNERS, arch="sm_90", digest=None, builds=None):
    function, tuner, _ = load_kernel_and_tuner(project / "kernels" / "add.py", "add")
    points = [TunedPoint(key, config, [1.0 + (i != config) for i in range(4)])
              for key, config in winners]
    write_kernel(tuning_path(project / "aotk.toml"), "add", digest or function.source_digest,
                 tuner.configs, list(tuner.keys), arch, "Stand-in GPU (sm_90)", points, builds)


def _damaged_entry(project):
    """The right kernel version, but the entry lacks its configs."""
    function, _, _ = load_kernel_and_tuner(project / "kernels" / "add.py", "add")
    tuning_path(project / "aotk.toml").write_text(json.dumps(
        {"format": 1, "kernels": {"add": {"source_digest": function.source_digest}}}))


def _selector(library: Path):
    lib = ctypes.CDLL(str(library))
    lib.tuned_add_variant_name.restype = ctypes.c_char_p

    def chosen(n: int) -> str:
        # unaligned pointers: the generic builds (the choice is what this test is about)
        index = lib.tuned_add_select(ctypes.c_void_p(4), ctypes.c_void_p(4), ctypes.c_void_p(4),
                                     ctypes.c_int32(n))
        return lib.tuned_add_variant_name(index).decode()
    return chosen


def test_without_a_tuning_file_the_first_config_is_built_with_one_warning(tmp_path, capfd):
    project = _project(tmp_path)
    result = aotk.build(project / "aotk.toml")
    warnings = [line for line in capfd.readouterr().err.splitlines() if "warning" in line]
    assert len(warnings) == 1 and "aotk.tuning.json" in warnings[0] and "aotk tune" in warnings[0]
    chosen = _selector(result.library)
    assert {chosen(n) for n in (1, 5000, 10**8)} == {"add[SCALE=2, BLOCK=64] config 0 generic"}


def test_the_dispatch_takes_the_config_measured_fastest_at_the_nearest_point(tmp_path):
    project = _project(tmp_path)
    _write_tuning(project)
    result = aotk.build(project / "aotk.toml")
    chosen = _selector(result.library)
    # nearest in log2 distance: the boundaries are the geometric means 1e4 and 1e6
    assert chosen(1) == chosen(999) == chosen(9_000) == "add[SCALE=2, BLOCK=64] config 0 tuned generic"
    assert chosen(11_000) == chosen(900_000) == "add[SCALE=2, BLOCK=256] config 2 tuned generic"
    assert chosen(1_100_000) == chosen(2**31 - 1) == "add[SCALE=2, BLOCK=1024] config 3 tuned generic"
    c_source = next((project / "build" / ".aotk" / "tuned").glob("*_library.c")).read_text()
    assert "static int tuned_add_tuned(int64_t n)" in c_source
    assert "n=1000 -> config 0; n=100000 -> config 2; n=10000000 -> config 3" in c_source
    assert "aotk_device_arch()" not in c_source      # one target: no device asked
    assert str(tuning_path(project / "aotk.toml").resolve()) in result.depfile.read_text()


def test_a_library_for_several_targets_asks_the_device_and_falls_back_without_one(tmp_path):
    project = _project(tmp_path, targets='["sm_80", "sm_90"]')
    _write_tuning(project)
    result = aotk.build(project / "aotk.toml")
    c_source = next((project / "build" / ".aotk" / "tuned").glob("*_library.c")).read_text()
    assert "switch (aotk_device_arch())" in c_source and "case 90:" in c_source
    assert "case 80:" not in c_source                 # sm_80 was not tuned
    if not _has_gpu():   # no device here: the fallback, the first config
        chosen = _selector(result.library)
        assert chosen(10**7) == "add[SCALE=2, BLOCK=64] config 0 fallback generic"


@pytest.mark.gpu
def test_on_the_gpu_a_library_for_several_targets_takes_the_devices_tuning(tmp_path):
    """aotk_device_arch() on a real device: an sm_90 GPU takes the sm_90 tuning (any other
    the fallback), and the launch computes the kernel's result."""
    torch = pytest.importorskip("torch")
    project = _project(tmp_path, targets='["sm_80", "sm_90"]')
    _write_tuning(project)
    result = aotk.build(project / "aotk.toml")
    tuned_arch = torch.cuda.get_device_capability() == (9, 0)
    assert _selector(result.library)(10**7) == (
        "add[SCALE=2, BLOCK=1024] config 3 tuned generic" if tuned_arch
        else "add[SCALE=2, BLOCK=64] config 0 fallback generic")
    lib = aotk.load(result.library)
    for n in (1000, 10**7 + 3):
        x, y = torch.randn(n + 1, device="cuda")[1:], torch.randn(n + 1, device="cuda")[1:]
        out = torch.empty(n + 1, device="cuda")[1:]
        lib.add(x, y, out, n)
        torch.cuda.synchronize()
        torch.testing.assert_close(out, 2 * x + y)


def _has_gpu() -> bool:
    from tests.conftest import cuda_available
    return cuda_available()


@pytest.mark.parametrize("damage, message", [
    (lambda project: _write_tuning(project, digest="0" * 64), "another version of its source"),
    (lambda project: tuning_path(project / "aotk.toml").write_text("{not json"), "cannot be read"),
    (lambda project: (_write_tuning(project), (project / "kernels" / "add.py").write_text(
        KERNEL.replace('aotk.Config({"BLOCK": 128})', 'aotk.Config({"BLOCK": 512})'))),
     "another version of its source"),
    (lambda project: _damaged_entry(project), "damaged entry"),
])
def test_an_unusable_tuning_file_warns_and_builds_the_default(tmp_path, capfd, damage, message):
    project = _project(tmp_path)
    damage(project)
    result = aotk.build(project / "aotk.toml")
    err = capfd.readouterr().err
    assert err.count("aotk: warning:") == 1 and message in err and "first config" in err
    chosen = _selector(result.library)
    assert {chosen(n) for n in (1, 10**6, 10**8)} == {"add[SCALE=2, BLOCK=64] config 0 generic"}


@pytest.mark.parametrize("kernel, manifest, key, message", [
    (KERNEL.replace('aotk.Config({"BLOCK": 128})', 'aotk.Config({"BLOKC": 128})'), MANIFEST,
     "kernel.add.function", "config 1 of add's @autotune (Config(BLOKC: 128"),
    (KERNEL.replace('key=["n"]', 'key=["x_ptr"]'), MANIFEST, "kernel.add.function",
     "the @autotune key names 'x_ptr', which is not a scalar parameter"),
    (KERNEL, MANIFEST.replace("{{ n = 1000 }}", "{{ m = 1000 }}"), "kernel.add.tune.points[0]",
     "the @autotune key is ['n']"),
    (KERNEL.replace("@aotk.autotune(", "_unused = dict(").replace('key=["n"])', 'key=["n"])\n#'),
     MANIFEST, "kernel.add.tune", "not an @autotune kernel"),
    (KERNEL, MANIFEST.replace('work_unit = "byte"', 'work_unit = "bytes"'),
     "kernel.add.tune.work_unit", 'expected "flop" or "byte"'),
    (KERNEL, MANIFEST.replace("{{ n = 1000 }}, ", "{{ n = 0 }}, "), "kernel.add.tune.points[0].n",
     "expected a positive integer"),
])
def test_bad_autotune_input_is_one_error_naming_the_key(tmp_path, kernel, manifest, key,
                                                         message):
    project = _project(tmp_path, manifest=manifest, kernel=kernel)
    with pytest.raises(ManifestError) as error:
        aotk.build(project / "aotk.toml")
    text = str(error.value)
    assert text.startswith(f"{project / 'aotk.toml'}: {key}: ") and message in text
    assert "\n" not in text and not (project / "build" / "libtuned.so").exists()


def test_a_new_tuning_file_is_noticed_by_the_no_op_check(tmp_path):
    project = _project(tmp_path)
    command = [sys.executable, "-c", "from aotk_cli.main import main; main()", "build", "-v"]
    first = subprocess.run(command, cwd=project, capture_output=True, text=True)
    assert first.returncode == 0, first.stderr
    _write_tuning(project)
    second = subprocess.run(command, cwd=project, capture_output=True, text=True)
    assert second.returncode == 0 and "nothing changed" not in second.stdout
    chosen = _selector(project / "build" / "libtuned.so")
    assert chosen(10**7) == "add[SCALE=2, BLOCK=1024] config 3 tuned generic"


def test_aotk_tune_without_a_gpu_is_one_clear_error(tmp_path):
    project = _project(tmp_path)
    if _has_gpu():
        pytest.skip("this machine has a GPU")
    result = subprocess.run([sys.executable, "-c", "from aotk_cli.main import main; main()",
                             "tune"], cwd=project, capture_output=True, text=True)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        "aotk: error: aotk tune needs a CUDA GPU: none is visible here"] or \
        "torch, which is not installed" in result.stderr


@pytest.mark.gpu
def test_aotk_tune_then_build_runs_the_winner(tmp_path):
    torch = pytest.importorskip("torch")
    from aotk.buildsys.tune import render, tune
    project = _project(tmp_path, manifest=MANIFEST.replace("10000000", "4000000"))
    rows = tune(project / "aotk.toml")
    assert len(rows) == 3 and all(r.measured == 4 and r.failed == 0 for r in rows)
    assert "GB/s" in render(rows, 1.0)
    recorded = json.loads(tuning_path(project / "aotk.toml").read_text())
    (arch,) = recorded["kernels"]["add"]["archs"]
    major, minor = torch.cuda.get_device_capability()
    assert arch == f"sm_{major}{minor}"
    points = recorded["kernels"]["add"]["archs"][arch]["points"]
    assert all(p["config"] == min(range(4), key=lambda i: p["ms"][i]) for p in points)
    result = aotk.build(project / "aotk.toml")
    library = aotk.load(result.library)
    x, y = torch.randn(4_000_000, device="cuda"), torch.randn(4_000_000, device="cuda")
    out = torch.empty_like(x)
    library.add(x, y, out, x.numel())
    torch.cuda.synchronize()
    torch.testing.assert_close(out, 2 * x + y)
    winner = points[-1]["config"]
    chosen = _selector(result.library)
    assert f"config {winner} tuned" in chosen(4_000_000)


@pytest.mark.gpu
def test_aotk_tune_tunes_every_kernel_of_a_manifest(tmp_path):
    """Two tuned kernels in one manifest (examples/tuned has two): the second kernel's
    configs are built and measured after the first kernel's points, and both reach the
    tuning file and the library."""
    torch = pytest.importorskip("torch")
    from aotk.buildsys.tune import tune
    second = MANIFEST.split("[[kernel]]")[1].replace('name = "add"', 'name = "add_again"')
    manifest = (MANIFEST + "\n[[kernel]]" + second).replace("10000000", "4000000")
    project = _project(tmp_path, manifest=manifest)
    rows = tune(project / "aotk.toml")
    assert [r.kernel for r in rows] == ["add"] * 3 + ["add_again"] * 3
    assert all(r.measured == 4 and r.failed == 0 for r in rows)
    recorded = json.loads(tuning_path(project / "aotk.toml").read_text())
    assert sorted(recorded["kernels"]) == ["add", "add_again"]
    library = aotk.load(aotk.build(project / "aotk.toml").library)
    x, y = torch.randn(100_000, device="cuda"), torch.randn(100_000, device="cuda")
    out = torch.empty_like(x)
    library.add_again(x, y, out, x.numel())
    torch.cuda.synchronize()
    torch.testing.assert_close(out, 2 * x + y)


def test_aotk_tune_measures_each_config_as_the_library_builds_it(tmp_path):
    """What `aotk tune` times is a one-kernel library of the config, built with the
    manifest's signature and specialization (here: aligned, then generic); a config that
    does not build is reported, not timed."""
    from aotk.buildsys.manifest import load_manifest
    from aotk.buildsys.tune import config_launcher
    project = _project(tmp_path)
    manifest = load_manifest(project / "aotk.toml")
    kernel = manifest.kernels[0]
    _, tuner, _ = load_kernel_and_tuner(kernel.source, kernel.function)
    errors = {}
    launcher = config_launcher(tmp_path / "work", manifest, kernel, tuner.configs[2], 2,
                               "sm_90", errors)
    assert errors == {}
    names = launcher.description["variants"]
    assert names == ["add[SCALE=2, BLOCK=256] aligned", "add[SCALE=2, BLOCK=256] generic"]
    broken = aotk.Config({"BLOCK": 48})
    assert config_launcher(tmp_path / "work", manifest, kernel, broken, 4, "sm_90",
                           errors) is False
    assert "powers of two" in errors[4]


def test_inspect_shows_where_each_tuned_config_was_fastest(tmp_path):
    from aotk.buildsys.inspect import inspect_rows, render
    project = _project(tmp_path)
    _write_tuning(project)
    result = aotk.build(project / "aotk.toml")
    rows, notes = inspect_rows(result.library)
    tuned = {row[1]: row[-1] for row in rows}
    assert tuned["add[SCALE=2, BLOCK=64] config 0 tuned generic"] == "n=1000: 1 ms"
    assert tuned["add[SCALE=2, BLOCK=1024] config 3 tuned aligned"] == "n=10000000: 1 ms"
    assert tuned["add[SCALE=2, BLOCK=64] config 0 fallback generic"] == "-"
    assert render(rows, notes).splitlines()[0].endswith("tuned fastest at")


CLASSES = """
[[kernel.variant]]
signature = "*fp32:16, *fp32:16, *fp32:16, i32:8"
specialize = "aligned"

[[kernel.variant]]
specialize = "none"
"""


def test_variant_tables_give_the_builds_every_config_gets(tmp_path):
    """With [kernel.tune], [[kernel.variant]] tables are build classes: here an 8-divisible
    build and a generic one for each tuned config and for the fallback."""
    project = _project(tmp_path, manifest=MANIFEST + CLASSES)
    _write_tuning(project)
    result = aotk.build(project / "aotk.toml")
    names = aotk.load(result.library).add.description["variants"]
    assert names == [f"add[SCALE=2, BLOCK={b}] config {c} {role}{suffix}"
                     for b, c, role in ((64, 0, "tuned"), (256, 2, "tuned"), (1024, 3, "tuned"),
                                        (64, 0, "fallback"))
                     for suffix in (" aligned", "")]
    lib = ctypes.CDLL(str(result.library))
    lib.tuned_add_variant_name.restype = ctypes.c_char_p

    def chosen(pointer, n):
        index = lib.tuned_add_select(*(ctypes.c_void_p(pointer),) * 3, ctypes.c_int32(n))
        return lib.tuned_add_variant_name(index).decode()
    assert chosen(4096, 10**7 + 8) == "add[SCALE=2, BLOCK=1024] config 3 tuned aligned"
    assert chosen(4096, 10**7 + 1) == "add[SCALE=2, BLOCK=1024] config 3 tuned"
    assert chosen(4100, 1000) == "add[SCALE=2, BLOCK=64] config 0 tuned"


def test_a_variant_table_may_not_set_what_the_configs_set(tmp_path):
    project = _project(tmp_path, manifest=MANIFEST + CLASSES.replace(
        'specialize = "none"', 'specialize = "none"\nconstants = {{ BLOCK = 32 }}'))
    with pytest.raises(ManifestError, match=r"kernel\.add\.variant\[1\]\.constants: sets BLOCK, "
                                            "which the @autotune configs set"):
        aotk.build(project / "aotk.toml")


def test_a_tuning_measured_through_other_build_classes_is_not_used(tmp_path, capfd):
    from aotk.buildsys.manifest import load_manifest
    from aotk.buildsys.tuning import describe_builds
    project = _project(tmp_path, manifest=MANIFEST + CLASSES)
    _write_tuning(project, builds=describe_builds(load_manifest(project / "aotk.toml").kernels[0]))
    names = aotk.load(aotk.build(project / "aotk.toml").library).add.description["variants"]
    assert "add[SCALE=2, BLOCK=1024] config 3 tuned aligned" in names      # same classes: used
    (project / "aotk.toml").write_text(MANIFEST.format(targets='["sm_90"]'))   # classes gone
    capfd.readouterr()
    result = aotk.build(project / "aotk.toml", out_dir=project / "other")  # a new dlopen
    err = capfd.readouterr().err
    assert err.count("aotk: warning:") == 1 and "measured through other builds" in err
    names = aotk.load(result.library).add.description["variants"]
    assert all("config 0" in name for name in names)


def test_the_tuning_file_has_the_mode_the_umask_gives(tmp_path):
    """It is meant to be committed and read by others: not mkstemp's 0600."""
    import os
    project = _project(tmp_path)
    previous = os.umask(0o022)
    try:
        _write_tuning(project)
    finally:
        os.umask(previous)
    assert tuning_path(project / "aotk.toml").stat().st_mode & 0o777 == 0o644


def _stand_in_torch(made):
    """A torch with what `aotk tune` calls to make buffers, each call recorded in ``made``."""
    from types import SimpleNamespace

    class Tensor:
        def __init__(self, call):
            made.append(call)

        def to(self, dtype):
            made[-1] += (dtype,)
            return self
    float32 = SimpleNamespace(is_floating_point=True)
    int32 = SimpleNamespace(is_floating_point=False)
    return SimpleNamespace(
        float32=float32, int32=int32, bool=object(),
        randn=lambda count, device: Tensor(("randn", count)),
        randint=lambda low, high, shape, device: Tensor(("randint", low, high, shape)),
        zeros=lambda count, device, dtype: Tensor(("zeros", count, dtype)),
        ones=lambda count, device, dtype: Tensor(("ones", count, dtype)),
        cuda=SimpleNamespace(current_device=lambda: 0, get_device_properties=lambda index:
                             SimpleNamespace(multi_processor_count=132)))


def test_tune_arguments_may_read_the_devices_sm_count(tmp_path):
    """A persistent kernel's workspace is sized by the SM count, as its grid is: the
    `tune.arguments` expressions see `num_sms` (the device's; here a stand-in torch's)."""
    from types import SimpleNamespace
    from aotk.buildsys.tune import tuning_arguments
    from aotk.ir.signature import Signature
    made = []
    torch = _stand_in_torch(made)
    kernel = SimpleNamespace(name="k", tune=SimpleNamespace(arguments={
        "workspace": "2 * num_sms * 128", "programs": "min(num_sms, cdiv(n, 64))"}, fills={}))
    signature = Signature.parse("*fp32, i32, i32", ["workspace", "n", "programs"], "k")
    manifest = SimpleNamespace(path=tmp_path / "aotk.toml")
    values = tuning_arguments(manifest, kernel, signature, {"n": 1000}, torch)
    assert values["n"] == 1000 and values["programs"] == 16
    assert made == [("randn", 2 * 132 * 128, torch.float32)]
    values = tuning_arguments(manifest, kernel, signature, {"n": 100000}, torch)
    assert values["programs"] == 132


def _tune_of(tmp_path, arguments):
    from aotk.buildsys.manifest import load_manifest
    manifest = MANIFEST.replace('arguments = {{ x_ptr = "n", y_ptr = "n", out_ptr = "n" }}',
                                arguments.replace("{", "{{").replace("}", "}}"))
    return load_manifest(_project(tmp_path, manifest=manifest) / "aotk.toml")


def test_tune_buffers_are_filled_as_the_manifest_says(tmp_path):
    """A counter buffer a kernel expects zeroed, an index buffer that must stay in range:
    `{ count = ..., fill = ... }` says how `aotk tune` fills a pointer's buffer (random
    values where nothing is said)."""
    from aotk.buildsys.tune import tuning_arguments
    from aotk.ir.signature import Signature
    manifest = _tune_of(tmp_path, 'arguments = { x_ptr = "n", '
                        'y_ptr = { count = "n / 4", fill = "zeros" }, '
                        'out_ptr = { count = "n", fill = "integers(1, min(n, 100))" } }')
    kernel = manifest.kernels[0]
    signature = Signature.parse("*fp32, *i32, *i32, i32", ["x_ptr", "y_ptr", "out_ptr", "n"],
                                "add")
    made = []
    torch = _stand_in_torch(made)
    values = tuning_arguments(manifest, kernel, signature, {"n": 1000}, torch)
    assert values["n"] == 1000
    assert made == [("randn", 1000, torch.float32), ("zeros", 250, torch.int32),
                    ("randint", 1, 100, (1000,), torch.int32)]


@pytest.mark.parametrize("arguments, key, message", [
    ('{ x_ptr = { count = "n", fill = "gaussian" } }', "arguments.x_ptr.fill",
     '"random", "zeros", "ones" or "integers(LOW, HIGH)"'),
    ('{ x_ptr = { count = "n", fill = "integers(0)" } }', "arguments.x_ptr.fill",
     "integers(LOW, HIGH)"),
    ('{ x_ptr = { fill = "zeros" } }', "arguments.x_ptr.count", "missing"),
    ('{ x_ptr = { count = "n", fil = "zeros" } }', "arguments.x_ptr.fil", "did you mean 'fill'"),
])
def test_a_bad_fill_is_one_error_naming_its_key(tmp_path, arguments, key, message):
    with pytest.raises(ManifestError) as error:
        _tune_of(tmp_path, f"arguments = {arguments}")
    assert f"kernel.add.tune.{key}" in str(error.value) and message in str(error.value)


@pytest.mark.parametrize("arguments, message", [
    ('{ x_ptr = "n", y_ptr = "n", out_ptr = "n", n = { count = "1", fill = "zeros" } }',
     "only a pointer parameter's buffer is filled"),
    ('{ x_ptr = { count = "n", fill = "integers(n, 5)" }, y_ptr = "n", out_ptr = "n" }',
     "holds no value"),
])
def test_a_fill_that_cannot_be_made_is_one_error_naming_its_key(tmp_path, arguments, message):
    from aotk.buildsys.tune import tuning_arguments
    from aotk.ir.signature import Signature
    manifest = _tune_of(tmp_path, f"arguments = {arguments}")
    signature = Signature.parse("*fp32, *fp32, *fp32, i32", ["x_ptr", "y_ptr", "out_ptr", "n"],
                                "add")
    with pytest.raises(ManifestError) as error:
        tuning_arguments(manifest, manifest.kernels[0], signature, {"n": 1000},
                         _stand_in_torch([]))
    assert ".fill" in str(error.value) and message in str(error.value)
