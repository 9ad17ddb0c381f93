"""The tuning file: what ``aotk tune`` measured, kept beside the manifest and read by
``aotk build``.

In: the manifest path, and per autotuned kernel its ``@autotune`` configs and key. Out:
``<manifest stem>.tuning.json`` (``aotk tune`` writes it; it is meant to be reviewed and
committed), and, for the build, each kernel's ``TunedKernel``: per GPU arch the tuned points
(the key's values) and the index of the config measured fastest there. A file that does not
parse, or was tuned for another version of the kernel's source or another list of configs,
is not used: the build warns once and builds the kernel's default (its first config).

The file, JSON so that it diffs and reviews line by line::

    {"format": 1, "kernels": {"matmul": {
        "source_digest": "<sha256 of the kernel's file>", "key": ["M", "N", "K"],
        "configs": [{"kwargs": {"BLOCK_M": 128, ...}, "num_warps": 8, "num_stages": 3}, ...],
        "builds": [{"signature": "...", "specialize": "auto", "when": null, "constants": {}}],
        "archs": {"sm_90": {"device": "NVIDIA H200 (sm_90)", "points": [
            {"key": {"M": 512, "N": 512, "K": 512}, "config": 3,
             "ms": [0.0123, ...], "work_per_s": 2.18e13}, ...]}}}}}

``ms`` holds every config's median time at that point (null where it did not run).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from ..files import write_atomic

FORMAT = 1


def tuning_path(manifest_path) -> Path:
    manifest_path = Path(manifest_path)
    return manifest_path.with_name(f"{manifest_path.stem}.tuning.json")


def describe_builds(kernel) -> list:
    """The build classes a kernel's configs are built (and measured) through: its
    [[kernel.variant]] tables, or the kernel's own signature and specialization."""
    return [{"signature": v.signature, "specialize": v.specialize, "when": v.when,
             "constants": dict(sorted(v.constants.items()))} for v in kernel.variants]


def describe_config(config) -> dict:
    """A config as the file records it (and compares it)."""
    described = {"kwargs": dict(config.kwargs), "num_warps": config.num_warps,
                 "num_stages": config.num_stages}
    if config.maxnreg is not None:
        described["maxnreg"] = config.maxnreg
    if config.num_ctas != 1:
        described["num_ctas"] = config.num_ctas
    return described


@dataclass
class TunedPoint:
    key: dict            # key name -> value
    config: int          # index into the kernel's configs
    ms: list             # every config's median time there (None: did not run)
    work_per_s: float | None = None


@dataclass
class TunedKernel:
    key: list
    archs: dict = field(default_factory=dict)   # "sm_90" -> {"device": str, "points": [...]}

    def points(self, arch: str) -> list:
        return [TunedPoint(**p) for p in self.archs.get(arch, {}).get("points", [])]


class TuningFileError(ValueError):
    """A tuning file that cannot be used for a kernel: the message says why."""


def read_file(path: Path) -> dict:
    """The whole file ({} when there is none); TuningFileError when it does not parse."""
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise TuningFileError(f"{path}: cannot be read: {exc}") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT or \
            not isinstance(data.get("kernels"), dict):
        raise TuningFileError(f"{path}: not a tuning file of format {FORMAT}")
    return data


def kernel_tuning(path: Path, name: str, source_digest: str, configs: list, key: list,
                  builds: list | None = None):
    """The kernel's TunedKernel from the file, None when the file has none for it;
    TuningFileError when the entry is for another source, other configs or other build
    classes (``builds``, as describe_builds gives them), or damaged."""
    entry = read_file(path).get("kernels", {}).get(name)
    if entry is None:
        return None
    try:
        if builds is not None and "builds" in entry and entry["builds"] != builds:
            raise TuningFileError(f"{path}: kernel {name!r} was measured through other builds "
                                  "([[kernel.variant]] tables) than the manifest gives now")
        if entry["source_digest"] != source_digest:
            raise TuningFileError(f"{path}: kernel {name!r} was tuned for another version of "
                                  "its source file")
        if entry["configs"] != [describe_config(c) for c in configs] or entry["key"] != key:
            raise TuningFileError(f"{path}: kernel {name!r} was tuned over other configs or "
                                  "another key than its @autotune gives now")
        tuned = TunedKernel(list(entry["key"]), dict(entry["archs"]))
        for arch in tuned.archs:
            for point in tuned.points(arch):
                if sorted(point.key) != sorted(key) or not 0 <= point.config < len(configs):
                    raise TuningFileError(f"{path}: kernel {name!r}, {arch}: a point names "
                                          "another key or a config that does not exist")
    except (KeyError, TypeError, AttributeError) as exc:
        raise TuningFileError(f"{path}: kernel {name!r}: damaged entry ({exc})") from None
    return tuned


def write_kernel(path: Path, name: str, source_digest: str, configs: list, key: list,
                 arch: str, device: str, points: list, builds: list | None = None):
    """Adds (or replaces) one kernel's results for one arch, keeping everything else the
    file holds (results for other archs only while the source, configs, key and build
    classes are the same); written atomically."""
    try:
        data = read_file(path) or {"format": FORMAT, "kernels": {}}
    except TuningFileError:
        data = {"format": FORMAT, "kernels": {}}
    described = [describe_config(c) for c in configs]
    entry = data["kernels"].get(name)
    if not entry or entry.get("source_digest") != source_digest or \
            entry.get("configs") != described or entry.get("key") != key or \
            entry.get("builds") != builds:
        entry = {"source_digest": source_digest, "key": key, "configs": described, "archs": {}}
    if builds is not None:
        entry["builds"] = builds
    entry["archs"][arch] = {"device": device, "points": [
        {"key": p.key, "config": p.config, "ms": [_significant(t) for t in p.ms],
         "work_per_s": _significant(p.work_per_s)} for p in points]}
    data["kernels"][name] = entry
    write_atomic(path, _render(data) + "\n")


def _significant(value, digits: int = 5):
    """A measured figure kept to the digits a timing has (None stays None)."""
    return None if value is None else float(f"{value:.{digits}g}")


def _render(value, indent: str = "") -> str:
    """JSON laid out for review: tables one key per line, and a list of tables (configs,
    tuned points) one table per line."""
    inner = indent + "  "
    if isinstance(value, dict) and value:
        rows = [f"{inner}{json.dumps(k)}: {_render(v, inner)}" for k, v in value.items()]
        return "{\n" + ",\n".join(rows) + f"\n{indent}}}"
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        rows = [inner + json.dumps(v, separators=(", ", ": ")) for v in value]
        return "[\n" + ",\n".join(rows) + f"\n{indent}]"
    return json.dumps(value, separators=(", ", ": "))
