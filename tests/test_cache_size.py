"""The local cache's size cap (AOTK_CACHE_MAX_SIZE): after a build, the least recently used
entries go until the cache fits; `aotk cache stats` says what it holds."""
import subprocess
import sys

import pytest

import aotk
from aotk import cache
from tests.projects import ADD_KERNEL, add_manifest

@pytest.fixture
def projects(tmp_path, monkeypatch):
    monkeypatch.setenv("AOTK_CACHE_DIR", str(tmp_path / "cache"))
    made = {}
    for name, block in (("first", 256), ("second", 1024)):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "add.py").write_text(ADD_KERNEL)
        (folder / "aotk.toml").write_text(add_manifest(name, blocks=(block,)))
        made[name] = folder / "aotk.toml"
    return made


def test_the_least_recently_used_entries_go_first(projects, monkeypatch, tmp_path):
    aotk.build(projects["first"])
    first = cache.stats()["bytes"]
    aotk.build(projects["second"])
    full = cache.stats()
    assert full["entries"] == 4 and full["kinds"] == {"fatbin": 4} and full["max_bytes"] is None
    aotk.build(projects["first"], out_dir=tmp_path / "again")   # the first's entries: used now
    monkeypatch.setenv("AOTK_CACHE_MAX_SIZE", str(first))      # room for those two only
    assert aotk.build(projects["first"], out_dir=tmp_path / "third").compiled == 0
    capped = cache.stats()
    assert capped["entries"] == 2 and capped["bytes"] == first
    assert aotk.build(projects["first"], out_dir=tmp_path / "fourth").compiled == 0
    assert aotk.build(projects["second"], out_dir=tmp_path / "fifth").compiled == 2


@pytest.mark.parametrize("value, fits", [("1G", True), ("1500k", True), ("10", False)])
def test_sizes_read_with_units(projects, monkeypatch, value, fits):
    aotk.build(projects["first"])
    monkeypatch.setenv("AOTK_CACHE_MAX_SIZE", value)
    aotk.build(projects["second"])
    assert (cache.stats()["entries"] == 4) == fits


def test_a_bad_cap_is_one_error_and_stats_shows_the_cap(projects, monkeypatch):
    monkeypatch.setenv("AOTK_CACHE_MAX_SIZE", "lots")
    run = subprocess.run([sys.executable, "-c", "from aotk_cli.main import main; main()",
                          "build", str(projects["first"])], capture_output=True, text=True)
    assert run.returncode == 1
    assert run.stderr.strip().splitlines()[-1] == \
        "aotk: error: AOTK_CACHE_MAX_SIZE='lots': expected a size such as 500M or 2G"
    monkeypatch.setenv("AOTK_CACHE_MAX_SIZE", "2M")
    aotk.build(projects["first"])
    shown = subprocess.run([sys.executable, "-c", "from aotk_cli.main import main; main()",
                            "cache", "stats"], capture_output=True, text=True)
    assert "2 entries (2 fatbin)" in shown.stdout and "of at most 2.1 MB" in shown.stdout
