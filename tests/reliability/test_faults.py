"""Faults a build must survive: a damaged cache (every kind of entry), a build killed with
SIGTERM or SIGKILL while it compiles, and grid / when expressions that would divide by
zero at run time. Each checks what a user depends on: nothing corrupt is linked, no aotk
process is left behind, the next build's library is byte-identical to a clean build's, and
the library answers a bad argument with a status instead of crashing the process."""
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from aotk import cache
from tests.conftest import run_c_program

ROOT = Path(__file__).resolve().parents[2]

MANIFEST = """
[library]
name = "faults"
targets = ["sm_80"]

[[kernel]]
name = "add"
source = "examples/kernels/add.py"
function = "add_kernel"
signature = "*fp32, *fp32, *fp32, i32"
grid = ["cdiv(n, BLOCK)"]

[[kernel.variant]]
constants = { BLOCK = 256 }

[[kernel]]
name = "softmax"
source = "examples/kernels/softmax.py"
function = "softmax_kernel"
signature = "*fp32, *fp32, i32, i32, i32, i32"
grid = ["n_rows"]

[[kernel.variant]]
when = "n_cols % (n_rows - 3) == 0"
constants = { BLOCK = 1024 }

[[kernel.variant]]
constants = { BLOCK = 4096 }
num_warps = 8

[[kernel]]
name = "matmul"
source = "examples/kernels/matmul.py"
function = "matmul_kernel"
signature = "*fp16, *fp16, *fp16, i32, i32, i32, i32, i32:1, i32, i32:1, i32, i32:1"
grid = ["cdiv(M, BLOCK_SIZE_M) * cdiv(N, BLOCK_SIZE_N)"]

[[kernel.variant]]
when = "M * N >= 1048576"
constants = { BLOCK_SIZE_M = 128, BLOCK_SIZE_N = 128, BLOCK_SIZE_K = 64, GROUP_SIZE_M = 8, ACTIVATION = "" }
num_warps = 8

[[kernel.variant]]
constants = { BLOCK_SIZE_M = 64, BLOCK_SIZE_N = 64, BLOCK_SIZE_K = 32, GROUP_SIZE_M = 8, ACTIVATION = "leaky_relu" }
"""


def _project(path: Path, manifest: str = MANIFEST) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    shutil.copytree(ROOT / "examples" / "kernels", path / "examples" / "kernels",
                    dirs_exist_ok=True)
    (path / "aotk.toml").write_text(manifest)
    return path


def _aotk(*args, cache_dir, cwd, **kwargs):
    env = {**os.environ, "AOTK_CACHE_DIR": str(cache_dir)}
    return subprocess.Popen([sys.executable, "-c", "from aotk_cli.main import main; main()",
                             *args], cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, **kwargs)


def _descendants(pid: int) -> list:
    children = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True,
                              text=True).stdout.split()
    return [int(c) for c in children]


def _alive(pids) -> list:
    alive = []
    for pid in pids:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            continue
        state = subprocess.run(["ps", "-o", "stat=", "-p", str(pid)], capture_output=True,
                               text=True).stdout.strip()
        if state and not state.startswith("Z"):
            alive.append(pid)
    return alive


@pytest.fixture(scope="module")
def clean_library(tmp_path_factory):
    """The library a clean build makes (its own folder and cache)."""
    base = tmp_path_factory.mktemp("clean")
    project = _project(base / "project")
    run = _aotk("build", "-j", "2", cache_dir=base / "cache", cwd=project)
    out, err = run.communicate(timeout=600)
    assert run.returncode == 0, err.decode()
    return (project / "build" / "libfaults.so").read_bytes()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
@pytest.mark.parametrize("after", [0.4, 0.8, 1.2])
def test_a_killed_build_leaves_no_worker_and_the_next_build_is_clean(tmp_path, clean_library,
                                                                     sig, after):
    project = _project(tmp_path / "project")
    cache_dir = tmp_path / "cache"
    build = _aotk("build", "-j", "2", cache_dir=cache_dir, cwd=project)
    time.sleep(after)
    workers = _descendants(build.pid)
    build.send_signal(sig)
    _, err = build.communicate(timeout=120)
    if build.returncode != 0:   # it may have finished before the signal
        assert build.returncode in (128 + sig, -sig), err.decode()
    if sig == signal.SIGTERM and build.returncode == 128 + sig:
        # Before the outputs are installed they stay as they were; a signal that arrives
        # while they are installed is held until they all are.
        assert err.decode().strip().splitlines()[-1] in (
            "aotk: error: build interrupted; the outputs are as they were",
            "aotk: error: build interrupted; its outputs were already written, complete")
    deadline = time.time() + 10
    while _alive(workers) and time.time() < deadline:
        time.sleep(0.1)
    assert _alive(workers) == [], "worker processes outlived the build"
    checked, removed = _verify(cache_dir)
    assert [why for _, why in removed if why != "a leftover file"] == []
    rebuild = _aotk("build", "-j", "2", cache_dir=cache_dir, cwd=project)
    _, err = rebuild.communicate(timeout=600)
    assert rebuild.returncode == 0, err.decode()
    assert (project / "build" / "libfaults.so").read_bytes() == clean_library


def _verify(cache_dir):
    previous = os.environ.get("AOTK_CACHE_DIR")
    os.environ["AOTK_CACHE_DIR"] = str(cache_dir)
    try:
        return cache.verify_all()
    finally:
        if previous is None:
            del os.environ["AOTK_CACHE_DIR"]
        else:
            os.environ["AOTK_CACHE_DIR"] = previous


@pytest.mark.parametrize("damage", ["garbage", "empty", "metadata", "missing metadata"])
def test_a_damaged_fatbin_is_rebuilt_never_linked(tmp_path, clean_library, damage):
    project = _project(tmp_path / "project")
    cache_dir = tmp_path / "cache"
    first = _aotk("build", cache_dir=cache_dir, cwd=project)
    assert first.wait(timeout=600) == 0
    fatbin = sorted(cache_dir.rglob("*.fatbin"))[0]
    if damage == "garbage":
        fatbin.write_bytes(b"garbage\n")
    elif damage == "empty":
        fatbin.write_bytes(b"")
    elif damage == "metadata":
        fatbin.with_suffix(".json").write_text("{not json")
    else:
        fatbin.with_suffix(".json").unlink()
    shutil.rmtree(project / "build")
    second = _aotk("build", cache_dir=cache_dir, cwd=project)
    _, err = second.communicate(timeout=600)
    assert second.returncode == 0, err.decode()
    warnings = [line for line in err.decode().splitlines() if line.startswith("aotk: warning:")]
    assert len(warnings) == (0 if damage == "missing metadata" else 1), err.decode()
    assert (project / "build" / "libfaults.so").read_bytes() == clean_library


@pytest.mark.parametrize("kind", ["cubin", "fatbin"])
def test_every_kind_of_entry_is_checked_on_read(tmp_path, monkeypatch, capsys, kind):
    monkeypatch.setenv("AOTK_CACHE_DIR", str(tmp_path))
    key = "ab" * 32
    cache.store(key, b"\x7fELF binary", {"name": "k"}, kind=kind)
    assert cache.load(key, kind=kind) == (b"\x7fELF binary", {"name": "k"})
    (tmp_path / key[:2] / f"{key}.{kind}").write_bytes(b"\x7fELF binarY")   # one bit
    assert cache.load(key, kind=kind) is None
    assert "does not match its recorded size and sha256" in capsys.readouterr().err
    assert not (tmp_path / key[:2] / f"{key}.json").exists()   # removed: rebuilt next time


def test_cache_verify_and_clean_report_and_repair(tmp_path, monkeypatch):
    from click.testing import CliRunner
    from aotk_cli.main import main
    monkeypatch.setenv("AOTK_CACHE_DIR", str(tmp_path))
    for i, kind in enumerate(["cubin", "fatbin", "cubin"]):
        cache.store(f"{i:02d}" * 32, b"binary %d" % i, {"i": i}, kind=kind)
    (tmp_path / "00" / ("00" * 32 + ".cubin")).write_bytes(b"damaged")
    (tmp_path / "01" / ".tmp-leftover").write_bytes(b"half")
    result = CliRunner().invoke(main, ["cache", "verify"])
    assert result.exit_code == 0
    assert f"3 entries checked in {tmp_path}, 2 removed" in result.output
    assert "does not match its recorded size and sha256" in result.output
    assert cache.verify_all() == (2, [])
    result = CliRunner().invoke(main, ["cache", "clean"])
    assert result.exit_code == 0 and "removed 2 entries" in result.output
    assert list(tmp_path.iterdir()) == []


DIVIDING = """
[library]
name = "dividing"
targets = ["sm_80"]

[[kernel]]
name = "add"
source = "examples/kernels/add.py"
function = "add_kernel"
signature = "*fp32, *fp32, *fp32, i32"
grid = ["cdiv(n, BLOCK)", "1024 / (n - 7)"]
specialize = "none"

[[kernel.variant]]
when = "n % (n - 5) == 0"
constants = { BLOCK = 256 }

[[kernel.variant]]
constants = { BLOCK = 512 }
"""

DIVIDING_PROGRAM = """
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "dividing.h"
int main(void) {
    float *p = (float *)(uintptr_t)4096;
    /* n = 5: the first variant's `when` divides by zero */
    printf("select %d\\n", dividing_add_select(p, p, p, 5));
    int status = dividing_add(NULL, p, p, p, 5);
    printf("status %d: %s\\n", status, dividing_last_error());
    /* n = 7: the grid divides by zero (the `when` holds: 7 % 2 != 0, the second variant) */
    status = dividing_add(NULL, p, p, p, 7);
    printf("status %d: %s\\n", status, dividing_last_error());
    /* n = 10: fine (no GPU here: the driver status) */
    printf("select %d\\n", dividing_add_select(p, p, p, 10));
    return 0;
}
"""


def test_divisions_in_grid_and_when_give_a_status_not_a_crash(tmp_path):
    project = _project(tmp_path / "project", DIVIDING)
    (project / "aotk.toml").write_text(DIVIDING)
    build = _aotk("build", cache_dir=tmp_path / "cache", cwd=project)
    _, err = build.communicate(timeout=600)
    assert build.returncode == 0, err.decode()
    run = run_c_program(DIVIDING_PROGRAM, project / "build" / "libdividing.so", tmp_path)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0] == "select -1"
    assert lines[1] == ("status 1003: add: the `when` of add[BLOCK=256] (n % (n - 5) == 0) "
                        "divides by zero")
    assert lines[2] == "status 1003: add: grid[1] (1024 / (n - 7)) divides by zero"
    assert lines[3] == "select 0"
