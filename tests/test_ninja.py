"""`aotk build --emit-ninja`: the build as a Ninja file (an edge per variant, then the link)
that Ninja runs to the same bytes as `aotk build`, rebuilding only what a change reaches."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tests.conftest import tree_pythonpath

ROOT = Path(__file__).resolve().parent.parent
NINJA = shutil.which("ninja") or str(Path(sys.executable).with_name("ninja"))
pytestmark = pytest.mark.skipif(not Path(NINJA).exists() and shutil.which("ninja") is None,
                                reason="ninja is in the test extra: pip install -e '.[test]'")

MANIFEST = """\
[library]
name = "nin"
targets = ["sm_80"]

[[kernel]]
name = "add"
source = "add.py"
function = "add_kernel"
signature = "*fp32, *fp32, *fp32, i32"
grid = ["cdiv(n, BLOCK)"]
constants = { BLOCK = 256 }

[[kernel]]
name = "copy"
source = "vcopy.py"
function = "copy_kernel"
signature = "*fp32, *fp32, i32"
grid = ["cdiv(n, BLOCK)"]
constants = { BLOCK = 512 }
"""


def _run(command, cwd, cache):
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, "AOTK_CACHE_DIR": str(cache),
                               "PYTHONPATH": tree_pythonpath()})


@pytest.fixture
def project(tmp_path):
    shutil.copy(ROOT / "examples" / "kernels" / "add.py", tmp_path / "add.py")
    shutil.copy(ROOT / "examples" / "kernels" / "copy.py", tmp_path / "vcopy.py")
    (tmp_path / "aotk.toml").write_text(MANIFEST)
    return tmp_path


def aotk(project, *args):
    return _run([sys.executable, "-c", "from aotk_cli.main import main; main()", *args],
                project, project / "cache")


def ninja(project):
    return _run([NINJA, "-f", "ninja/build.ninja"], project, project / "cache")


def test_ninja_builds_the_same_bytes_as_aotk_build(project):
    emitted = aotk(project, "build", "--emit-ninja", "ninja/build.ninja", "-o", "ninja-out")
    assert emitted.returncode == 0, emitted.stderr
    text = (project / "ninja" / "build.ninja").read_text()
    assert text.count(": aotk_compile ") == 4 and text.count(": aotk_link ") == 1
    first = ninja(project)
    assert first.returncode == 0, first.stdout + first.stderr
    assert aotk(project, "build", "-o", "direct").returncode == 0
    for name in ("libnin.so", "nin.h", "nin.pc"):
        assert (project / "ninja-out" / name).read_bytes() == \
            (project / "direct" / name).read_bytes(), name
    assert "no work to do" in ninja(project).stdout


def test_a_touched_source_recompiles_its_variants_and_links_only_if_they_changed(project):
    assert aotk(project, "build", "--emit-ninja", "ninja/build.ninja", "-o",
                "ninja-out").returncode == 0
    assert ninja(project).returncode == 0
    library = project / "ninja-out" / "libnin.so"
    before = library.stat().st_mtime_ns
    os.utime(project / "vcopy.py")                       # touched, same content
    touched = ninja(project)
    assert touched.stdout.count("aotk compile copy") == 2 and "aotk compile add" not in \
        touched.stdout
    assert "aotk link" not in touched.stdout and library.stat().st_mtime_ns == before
    source = (project / "vcopy.py").read_text()
    (project / "vcopy.py").write_text(source.replace("mask=mask)", "mask=mask) * 1.0", 1))
    edited = ninja(project)
    assert edited.returncode == 0, edited.stdout + edited.stderr
    assert "aotk link" in edited.stdout and library.stat().st_mtime_ns != before


def test_the_edges_report_bad_input_in_one_line(project):
    bad = aotk(project, "compile-variant", "aotk.toml", "nope", "0", "-o", "x.variant")
    assert bad.returncode == 1
    assert bad.stderr.strip().splitlines() == [
        f"aotk: error: {project / 'aotk.toml'}: no build 0 of a kernel 'nope'"]
    missing = aotk(project, "link", "aotk.toml", "-o", "nowhere")
    assert missing.returncode == 1 and missing.stderr.count("aotk: error:") == 1
    assert "run its aotk compile-variant edge first" in missing.stderr
