"""The docs' snippets, run as printed. A page's fenced blocks marked ``file=NAME`` are written
to a fresh folder (after the quick start's, docs/quickstart.md, which every page builds
on), its ``sh run`` blocks run there in order with ``aotk`` on PATH, and the output they
end with must be the page's ``text output`` block. ``run-gpu`` / ``output-gpu`` blocks run
only where there is a GPU. A page that changes without its snippets still working fails
here."""
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tests.conftest import tree_pythonpath

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
BLOCK = re.compile(r"^```(\w+)([^\n]*)\n(.*?)^```", re.MULTILINE | re.DOTALL)


def _blocks(page: Path) -> list:
    return [(language, info.strip(), body) for language, info, body in
            BLOCK.findall(page.read_text())]


def _runnable(gpu: bool) -> list:
    run = "run-gpu" if gpu else "run"
    return sorted(p.name for p in DOCS.glob("*.md")
                  if any(info == run for _, info, _ in _blocks(p)))


def _run_page(name: str, tmp_path: Path, gpu: bool):
    work = tmp_path / "project"
    work.mkdir()
    pages = [DOCS / "quickstart.md"] + ([DOCS / name] if name != "quickstart.md" else [])
    for page in pages:
        for _, info, body in _blocks(page):
            if info.startswith("file="):
                (work / info[len("file="):]).write_text(body)
    # `aotk` as a user has it: this tree's, through the interpreter running the tests.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "aotk").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m aotk "$@"\n')
    (bin_dir / "aotk").chmod(0o755)
    (bin_dir / "python3").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    (bin_dir / "python3").chmod(0o755)
    env = {**os.environ, "PYTHONPATH": tree_pythonpath(),
           "PATH": f"{bin_dir}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}"
                   f"{os.environ.get('PATH', '')}"}
    runs = [body for _, info, body in _blocks(DOCS / name)
            if info == "run" or (gpu and info == "run-gpu")]
    if name != "quickstart.md" and not any("aotk build" in body for body in runs):
        runs.insert(0, "aotk build\n")   # the quick start's own command comes first
    output = ""
    for body in runs:
        run = subprocess.run(["bash", "-e", "-c", body], cwd=work, env=env,
                             capture_output=True, text=True, timeout=600)
        assert run.returncode == 0, f"{name}: {body}\n{run.stdout}\n{run.stderr}"
        output += run.stdout
    expected = [body for _, info, body in _blocks(DOCS / name)
                if info == "output" or (gpu and info == "output-gpu")]
    if expected:
        assert output.strip().endswith(expected[-1].strip()), f"{name} printed:\n{output}"
    return work


def test_every_way_of_use_has_a_page_with_snippets_that_run():
    pages = {"quickstart.md", "make.md", "pkg-config.md", "cmake.md", "python.md",
             "pytorch.md", "c.md"}
    runnable = set(_runnable(False)) | set(_runnable(True))
    assert pages <= runnable, f"pages without a snippet that runs: {pages - runnable}"


@pytest.mark.parametrize("name", _runnable(False))
def test_the_page_runs_as_printed(name, tmp_path):
    if name == "pytorch.md":
        pytest.importorskip("torch")
    if name == "make.md" and shutil.which("make") is None:
        pytest.skip("make is not installed on this machine")
    _run_page(name, tmp_path, gpu=False)


@pytest.mark.gpu
@pytest.mark.parametrize("name", _runnable(True))
def test_on_the_gpu_the_page_runs_as_printed(name, tmp_path):
    _run_page(name, tmp_path, gpu=True)
