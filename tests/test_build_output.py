"""What `aotk build` says while and after it works: one line per compiled build when stderr
is not a terminal (make, CI), a closing summary, every tool call with -v (the compile
workers' included), and --json's build report."""
import json
import os
import subprocess
import sys

import pytest

from tests.projects import ADD_KERNEL, add_manifest

MANIFEST = add_manifest(blocks=(256, 1024))
KERNEL = ADD_KERNEL


@pytest.fixture
def project(tmp_path):
    (tmp_path / "aotk.toml").write_text(MANIFEST)
    (tmp_path / "add.py").write_text(KERNEL)
    past = 1_000_000_000
    for path in tmp_path.iterdir():
        os.utime(path, (past, past))
    return tmp_path


def aotk(project, *args, cache):
    return subprocess.run([sys.executable, "-c", "from aotk_cli.main import main; main()",
                           "build", *args], cwd=project, capture_output=True, text=True,
                          env={**os.environ, "AOTK_CACHE_DIR": str(cache)})


def test_a_build_outside_a_terminal_logs_each_compile_and_a_summary(project, tmp_path):
    result = aotk(project, "-j", "2", cache=tmp_path / "cache")
    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    compiled = [line for line in lines if line.startswith("aotk: compiled add build ")]
    assert len(compiled) == 4 and compiled[-1].endswith("(4/4)")   # 2 variants x 2 builds
    assert lines[-1].startswith("aotk: libsmall.so: 4 variants, 4 compiled, 0 from the cache")
    again = aotk(project, "-o", "elsewhere", cache=tmp_path / "cache")
    assert "aotk: compiled" not in again.stderr
    assert "4 variants, 0 compiled, 4 from the cache" in again.stderr.splitlines()[-1]


def test_verbose_shows_every_tool_the_workers_run(project, tmp_path):
    result = aotk(project, "-v", "-j", "2", cache=tmp_path / "cache")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert out.count("bin/ptxas -arch=sm_80") == 4 and out.count("bin/fatbinary -64") == 4
    assert "aotk: cc " in out and "aotk: compiled" not in result.stderr


def test_json_writes_the_build_report_also_for_a_no_op_build(project, tmp_path):
    report_path = tmp_path / "report.json"
    assert aotk(project, "--json", str(report_path), cache=tmp_path / "cache").returncode == 0
    report = json.loads(report_path.read_text())
    assert report["up_to_date"] is False and report["compiled"] == 4 and report["cached"] == 0
    assert report["library"].endswith("build/libsmall.so") and len(report["outputs"]) == 4
    assert [(v["kernel"], v["index"], v["name"], v["cached"]) for v in report["variants"]] == [
        ("add", 0, "add[BLOCK=256] aligned", False), ("add", 1, "add[BLOCK=256] generic", False),
        ("add", 2, "add[BLOCK=1024] aligned", False), ("add", 3, "add[BLOCK=1024] generic",
                                                          False)]
    assert all(v["targets"]["sm_80"]["spills"] == 0 and len(v["key"]) == 64
               for v in report["variants"])
    assert aotk(project, "--json", str(report_path), cache=tmp_path / "cache").returncode == 0
    again = json.loads(report_path.read_text())
    assert again["up_to_date"] is True and again["variants"] == report["variants"]


def test_a_report_that_cannot_be_written_is_one_error(project, tmp_path):
    (tmp_path / "a-file").write_text("a folder cannot be made below a file\n")
    result = aotk(project, "--json", str(tmp_path / "a-file" / "report.json"),
                  cache=tmp_path / "cache")
    assert result.returncode == 1
    errors = [line for line in result.stderr.splitlines() if line.startswith("aotk: error:")]
    assert len(errors) == 1 and "--json" in errors[0] and "Traceback" not in result.stderr
