"""A no-op `aotk build` answered from the build record, before the compiler is imported; any
change to what the build read or wrote makes it a full build again."""
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from aotk_cli import buildrecord
from tests.projects import add_manifest, root_project

ROOT = Path(__file__).resolve().parent.parent
UP_TO_DATE = "aotk: nothing changed since the last build"
# Runs the command line in a fresh interpreter and says on stderr whether aotk was imported.
CLI = ("import atexit, sys\n"
       "atexit.register(lambda: print('aotk imported:', 'aotk.jit' in sys.modules,"
       " file=sys.stderr))\n"
       "from aotk_cli.main import main\n"
       "main(prog_name='aotk')\n")

MANIFEST = add_manifest(source="kernels/add.py")

KERNEL = """\
import aotk
import aotk.language as tl
from helpers import offsets


@aotk.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = offsets(BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask),
             mask=mask)
"""

HELPERS = """\
import aotk
import aotk.language as tl


@aotk.jit
def offsets(BLOCK: tl.constexpr):
    return tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
"""


def _age(folder: Path, seconds=30):
    """Files written by the test a moment ago look as old as a user's: the record trusts no
    input written within a clock tick of the build."""
    past = time.time() - seconds
    for path in folder.rglob("*"):
        os.utime(path, (past, past))


@pytest.fixture
def project(tmp_path):
    (tmp_path / "kernels").mkdir()
    (tmp_path / "aotk.toml").write_text(MANIFEST)
    (tmp_path / "kernels" / "add.py").write_text(KERNEL)
    (tmp_path / "kernels" / "helpers.py").write_text(HELPERS)
    _age(tmp_path)
    return tmp_path


def aotk_build(project: Path, *args, env=None):
    result = subprocess.run([sys.executable, "-c", CLI, "build", "-v", *args], cwd=project,
                            capture_output=True, text=True, env={**os.environ, **(env or {})})
    assert result.returncode == 0, result.stderr
    return result


def answered_from_record(result) -> bool:
    from_record = UP_TO_DATE in result.stdout
    assert ("aotk imported: False" in result.stderr) == from_record, result.stderr
    return from_record


def outputs(result):
    return [line for line in result.stdout.splitlines() if not line.startswith("aotk:")]


def test_a_no_op_build_answers_from_the_record_without_importing_aotk(project):
    first = aotk_build(project)
    assert not answered_from_record(first)
    library = project / "build" / "libsmall.so"
    before = library.stat().st_mtime_ns, library.read_bytes()
    second = aotk_build(project)
    assert answered_from_record(second)
    assert outputs(second) == outputs(first)          # the same paths printed, in order
    assert (library.stat().st_mtime_ns, library.read_bytes()) == before


def _edit_kernel(project):
    path = project / "kernels" / "add.py"
    path.write_text(path.read_text().replace("tl.load(y_ptr + offs, mask=mask)",
                                             "2.0 * tl.load(y_ptr + offs, mask=mask)"))


def _touch_helper(project):
    os.utime(project / "kernels" / "helpers.py")


def _edit_manifest(project):
    path = project / "aotk.toml"
    path.write_text(path.read_text().replace("BLOCK = 256", "BLOCK = 512"))


def _remove_header(project):
    (project / "build" / "small.h").unlink()


def _damage_library(project):
    with open(project / "build" / "libsmall.so", "ab") as f:
        f.write(b"\0")


CHANGES = {  # name: (what changes, the extra build arguments, the extra environment)
    "kernel edited": (_edit_kernel, (), None),
    "imported helper touched": (_touch_helper, (), None),
    "manifest edited": (_edit_manifest, (), None),
    "header removed": (_remove_header, (), None),
    "library damaged": (_damage_library, (), None),
    "other output folder": (None, ("-o", "elsewhere"), None),
    "--static": (None, ("--static",), None),
    "--target": (None, ("--target", "sm_90"), None),
    "AOTK_ variable": (None, (), {"AOTK_PTXAS_OPTIONS": "-v"}),
    "CC": (None, (), {"CC": "cc -O2"}),
}


@pytest.mark.parametrize("change", CHANGES)
def test_any_change_makes_a_full_build_then_a_record_again(project, change):
    edit, args, env = CHANGES[change]
    aotk_build(project)
    assert answered_from_record(aotk_build(project))
    if edit:
        edit(project)
        _age(project / "kernels")
        os.utime(project / "aotk.toml", (time.time() - 30,) * 2)
    full = aotk_build(project, *args, env=env)
    assert not answered_from_record(full)
    for path in outputs(full):
        assert Path(path).is_file()
    header = Path(next(p for p in outputs(full) if p.endswith(".h")))
    assert "add" in header.read_text()
    assert answered_from_record(aotk_build(project, *args, env=env))


def test_a_damaged_record_means_a_full_build(project):
    aotk_build(project)
    (record,) = (project / "build" / ".aotk").glob("build-record-*.json")
    record.write_text("{not json")
    assert not answered_from_record(aotk_build(project))
    assert json.loads(record.read_text())["format"] == buildrecord.FORMAT
    assert answered_from_record(aotk_build(project))


def test_an_input_written_during_the_build_is_not_trusted(tmp_path):
    kernel = tmp_path / "k.py"
    kernel.write_text("x = 1\n")
    started_ns = kernel.stat().st_mtime_ns - 1     # the build began before the edit
    stale = tmp_path / "build" / ".aotk"
    stale.mkdir(parents=True)
    record = buildrecord.record_path(tmp_path / "aotk.toml", tmp_path / "build")
    record.write_text("{}")
    written = buildrecord.write(tmp_path / "aotk.toml", tmp_path / "build", False, (),
                                started_ns, [kernel], [])
    assert written is None and not record.exists()     # and the old record is gone too


def test_a_manifest_that_cannot_be_read_goes_to_the_full_build(project):
    aotk_build(project)
    (project / "aotk.toml").write_text("[library\n")
    result = subprocess.run([sys.executable, "-c", CLI, "build"], cwd=project,
                            capture_output=True, text=True)
    assert result.returncode == 1
    assert result.stderr.count("aotk: error:") == 1 and "aotk.toml" in result.stderr


def test_editing_one_kernel_recompiles_only_its_variants(tmp_path):
    import aotk
    project = root_project(tmp_path)
    first = aotk.build(project / "aotk.toml")
    copy_py = project / "examples" / "kernels" / "copy.py"
    copy_py.write_text(copy_py.read_text().replace("tl.load(src + offs, mask=mask)",
                                                   "tl.load(src + offs, mask=mask) * 5.0"))
    result = aotk.build(project / "aotk.toml")
    # copy has one variant, built aligned and generic: exactly those two change (and are
    # compiled, unless the session's cache holds the same code from another test).
    before = {(v["kernel"], v["index"]): v["key"] for v in first.variants}
    changed = {(v["kernel"], v["index"]) for v in result.variants
               if before[(v["kernel"], v["index"])] != v["key"]}
    assert changed == {("copy", 0), ("copy", 1)}
    assert result.compiled <= 2 and result.linked
