"""aotk's CMake package: `aotk --cmake-dir`, find_package(aotk CONFIG) and aotk_add_library,
with cmake and ninja from the package index (the test extra). The example under
examples/cmake configures and builds (its GPU program only where the CUDA toolkit is found),
the library rebuilds when a kernel source changes and not otherwise, with the Ninja and the
Makefile generators; a STATIC library for chosen TARGETS links into a C program. No GPU is
needed: the programs only ask the library's dispatch."""
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from aotk.version import __version__
from tests.projects import ADD_KERNEL, add_manifest
from tests.conftest import tree_pythonpath

ROOT = Path(__file__).resolve().parent.parent
AOTK_COMMAND = f"{sys.executable};-m;aotk"
ENV = {**os.environ, "PYTHONPATH": tree_pythonpath()}


def _tool(name: str) -> str:
    found = shutil.which(name) or shutil.which(name, path=str(Path(sys.executable).parent))
    if found is None:
        pytest.fail(f"{name} is missing: it comes with the test extra (pip install -e '.[test]')")
    return found


def _aotk(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "aotk", *args], capture_output=True, text=True,
                          env=ENV)


def _configure(source: Path, build: Path, generator: str, *definitions):
    cmake = _tool("cmake")
    extra = [f"-DCMAKE_MAKE_PROGRAM={_tool('ninja')}"] if generator == "Ninja" else []
    run = subprocess.run([cmake, "-S", str(source), "-B", str(build), "-G", generator,
                          f"-Daotk_DIR={_aotk('--cmake-dir').stdout.strip()}",
                          f"-DAOTK_COMMAND={AOTK_COMMAND}", *extra, *definitions],
                         capture_output=True, text=True, env=ENV)
    assert run.returncode == 0, run.stdout + run.stderr


def _build(build: Path) -> str:
    run = subprocess.run([_tool("cmake"), "--build", str(build)], capture_output=True, text=True,
                         env=ENV)
    assert run.returncode == 0, run.stdout + run.stderr
    return run.stdout


def test_cmake_dir_holds_the_package_of_this_version():
    folder = Path(_aotk("--cmake-dir").stdout.strip())
    assert (folder / "aotkConfig.cmake").is_file()
    version_file = (folder / "aotkConfigVersion.cmake").read_text()
    assert f'set(PACKAGE_VERSION "{__version__}")' in version_file


def test_outputs_names_what_a_build_writes_and_refuses_a_bad_manifest(tmp_path):
    listing = _aotk("outputs", str(ROOT / "aotk.toml"), "-o", str(tmp_path)).stdout
    assert f"library={tmp_path / 'libexamples.so'}" in listing.splitlines()
    assert f"depfile={tmp_path / 'examples.d'}" in listing.splitlines()
    (tmp_path / "bad.toml").write_text("[library]\n")
    run = _aotk("outputs", str(tmp_path / "bad.toml"))
    assert run.returncode != 0 and "bad.toml" in run.stderr and "Traceback" not in run.stderr


@pytest.mark.parametrize("generator", ["Ninja", "Unix Makefiles"])
def test_the_example_builds_and_rebuilds_only_when_a_kernel_changes(tmp_path, generator):
    if generator == "Unix Makefiles" and shutil.which("make") is None:
        pytest.skip("make is not installed (the Ninja case covers the package)")
    build = tmp_path / "build"
    _configure(ROOT / "examples" / "cmake", build, generator)
    _build(build)
    library = build / "examples" / "libexamples.so"
    assert library.is_file() and (build / "examples" / "examples.h").is_file()
    variants = subprocess.run([str(build / "variants")], capture_output=True, text=True)
    assert variants.returncode == 0
    assert "add, n = 1048576: add[BLOCK=1024] aligned" in variants.stdout
    assert "add, unaligned x: add[BLOCK=1024] generic" in variants.stdout
    # Nothing changed: nothing runs (aotk's build is not even started).
    assert "aotk: building" not in _build(build)
    # A kernel the manifest lists, touched: aotk runs again (through its depfile).
    kernel = ROOT / "examples" / "kernels" / "copy.py"
    os.utime(kernel)
    assert "aotk: building examples" in _build(build)
    assert "aotk: building" not in _build(build)


def test_a_static_library_for_chosen_targets_links_into_a_c_program(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    (project / "add.py").write_text(ADD_KERNEL)
    (project / "aotk.toml").write_text(add_manifest("small", blocks=(256, 1024)))
    (project / "main.c").write_text(
        '#include <stdint.h>\n#include <stdio.h>\n#include "small.h"\n'
        "int main(void) {\n"
        "    float *p = (float *)(uintptr_t)4096;\n"
        '    printf("%s\\n", small_add_variant_name(small_add_select(p, p, p, 1024)));\n'
        "    return 0;\n}\n")
    (project / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.20)\nproject(static_example LANGUAGES C)\n"
        "find_package(aotk 0.1 CONFIG REQUIRED)\n"
        "aotk_add_library(small MANIFEST aotk.toml STATIC TARGETS sm_90 OUT_DIR kernels)\n"
        "add_executable(main main.c)\ntarget_link_libraries(main PRIVATE small)\n")
    build = tmp_path / "build"
    _configure(project, build, "Ninja")
    _build(build)
    assert (build / "kernels" / "libsmall.a").is_file()
    run = subprocess.run([str(build / "main")], capture_output=True, text=True)
    assert run.returncode == 0 and run.stdout.strip() == "add[BLOCK=256] aligned"
    # Linked statically: the program needs no libsmall.so.
    needed = subprocess.run(["readelf", "-d", str(build / "main")], capture_output=True,
                            text=True).stdout
    assert "libsmall" not in needed
    # Built for the target the call asked for, not the manifest's sm_80.
    library_c = next((build / "kernels" / ".aotk").rglob("*_library.c")).read_text()
    assert re.search(r"sm_90", library_c) and not re.search(r"\bsm_80\b", library_c)


def test_bad_arguments_are_one_configure_error_naming_the_function(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    (project / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.20)\nproject(bad LANGUAGES C)\n"
        "find_package(aotk CONFIG REQUIRED)\naotk_add_library(kernels MANIFEST missing.toml)\n")
    # CMake wraps the message: any whitespace between its words.
    with pytest.raises(AssertionError, match=r"aotk_add_library\(kernels\): MANIFEST\s+"
                                             r"\S*missing.toml\s+does not exist"):
        _configure(project, tmp_path / "build", "Ninja")


@pytest.mark.gpu
def test_on_the_gpu_the_example_program_runs(tmp_path):
    """The C++ demo (examples/cpp/main.cpp) built by the CMake example launches the kernels
    and checks their results itself."""
    build = tmp_path / "build"
    _configure(ROOT / "examples" / "cmake", build, "Ninja")
    _build(build)
    if not (build / "demo").is_file():
        pytest.fail("the CUDA toolkit was not found: the GPU machine should have it")
    run = subprocess.run([str(build / "demo")], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "OK" in run.stdout
