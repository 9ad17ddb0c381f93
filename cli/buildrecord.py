"""The build record: a no-op ``aotk build`` decided before the compiler is imported.

In: after a successful build, what it read (the manifest, the kernel sources and the modules
they import, every file of aotk itself, the toolchain's files, the Python modules loaded)
and what it wrote (the library, header, depfile, .pc, archive), each as (mtime_ns, size),
with the request (manifest, output folder, --static, --target), the Python interpreter and
the environment variables that steer a build (AOTK_*, CC, PATH).
Out: ``<out>/.aotk/build-record-<manifest digest>.json``; on the next build, ``up_to_date``
answers from it alone, with only the standard library imported, whether every one of those
is as it was, and if so which output paths the build would print.

Like ninja's log, it trusts file times and sizes: anything else (a file changed within the
same time tick as the build read it, a record from another aotk) is not trusted, and the
full build runs, which decides again from the content. A file written at or after the build
began is never recorded as read, so an edit racing the build is not missed.
"""
from __future__ import annotations

import hashlib
import json
import os
import sys
import sysconfig
from pathlib import Path

FORMAT = 1
_ENVIRONMENT_NAMES = ("CC", "PATH")
_CLOCK_SLACK_NS = 100_000_000


def _environment() -> dict:
    # The cache's folder, size cap and shared URL change where binaries come from, never
    # what the outputs are.
    return {name: value for name, value in sorted(os.environ.items())
            if (name.startswith("AOTK_") and not name.startswith("AOTK_CACHE_"))
            or name in _ENVIRONMENT_NAMES}


def _interpreter() -> str:
    return f"{sys.executable} {sys.version}"


def _stat(path: str):
    try:
        status = os.stat(path)
    except OSError:
        return None
    return [status.st_mtime_ns, status.st_size]


def _request(manifest: Path, out: Path, static: bool, targets) -> dict:
    return {"manifest": str(manifest), "out": str(out), "static": bool(static),
            "targets": sorted(targets)}


def output_folder(manifest, out_dir):
    """The folder a build of ``manifest`` writes to (-o, else library.out_dir beside the
    manifest, default build/), or None where the manifest cannot be read here: the full
    build then reports what is wrong with it."""
    if out_dir is not None:
        return Path(out_dir).resolve()
    try:
        import tomllib
    except ImportError:     # Python 3.10
        import tomli as tomllib
    manifest = Path(manifest)
    try:
        with open(manifest, "rb") as f:
            library = tomllib.load(f).get("library", {})
    except (OSError, ValueError):
        return None
    folder = library.get("out_dir", "build") if isinstance(library, dict) else None
    return (manifest.parent / folder).resolve() if isinstance(folder, str) else None


def record_path(manifest, out: Path) -> Path:
    digest = hashlib.sha256(str(Path(manifest).resolve()).encode()).hexdigest()[:16]
    return out / ".aotk" / f"build-record-{digest}.json"


def up_to_date(manifest, out_dir, static: bool, targets):
    """The last build's record (``printed``: the output paths it printed; ``report``: its
    build report), if nothing it read or wrote has changed since; None otherwise (or when
    there is no usable record)."""
    out = output_folder(manifest, out_dir)
    if out is None:
        return None
    try:
        record = json.loads(record_path(manifest, out).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("format") != FORMAT:
        return None
    expected = {"request": _request(Path(manifest).resolve(), out, static, targets),
                "interpreter": _interpreter(), "environment": _environment()}
    if any(record.get(key) != value for key, value in expected.items()):
        return None
    files = {**record.get("inputs", {}), **record.get("outputs", {})}
    if not files or any(_stat(path) != stamp for path, stamp in files.items()):
        return None
    if not isinstance(record.get("printed"), list):
        return None
    return record


def _module_files() -> set:
    """Files of every loaded module outside the standard library (aotk, numpy, llvmlite,
    click, the kernels' own modules), and every file of the aotk packages themselves."""
    standard = {os.path.realpath(sysconfig.get_paths()[key]) for key in ("stdlib", "platstdlib")}
    files = set()
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if path and not any(os.path.realpath(path).startswith(s + os.sep) for s in standard):
            files.add(os.path.abspath(path))
        if getattr(module, "__name__", "").split(".")[0] in ("aotk", "aotk_cli"):
            for folder in getattr(module, "__path__", None) or ():
                files.update(str(p) for p in Path(folder).iterdir()
                             if p.is_file() and p.suffix not in (".pyc",))
    return files


def write(manifest, out: Path, static: bool, targets, started_ns: int, inputs, outputs,
          report=None):
    """Records a successful build. ``inputs``: the files it read beyond the loaded modules
    (manifest, kernel sources, tuning file, toolchain; one that does not exist is recorded
    as absent); ``outputs``: the paths it printed. No record (and none left from before)
    when an input changed after ``started_ns``."""
    path = record_path(manifest, out)
    try:
        path.unlink()
    except OSError:
        pass
    stamps = {str(p): _stat(str(p)) for p in inputs}
    for module_file in _module_files() - set(stamps):
        stamp = _stat(module_file)
        if stamp is not None:           # frozen and zipped modules have no file of their own
            stamps[module_file] = stamp
    # A file's time is the filesystem clock's, which may trail time.time_ns() by a tick. An
    # input that does not exist (a tuning file not written yet) is recorded as absent.
    limit = started_ns - _CLOCK_SLACK_NS
    if any(stamp is not None and stamp[0] >= limit for stamp in stamps.values()):
        return None
    record = {"format": FORMAT,
              "request": _request(Path(manifest).resolve(), out, static, targets),
              "interpreter": _interpreter(), "environment": _environment(),
              "inputs": dict(sorted(stamps.items())),
              "outputs": {str(p): _stat(str(p)) for p in outputs},
              "printed": [str(p) for p in outputs], "report": report}
    temporary = path.with_name(f".{path.name}.{os.getpid()}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary.write_text(json.dumps(record))
        os.replace(temporary, path)
    except OSError:     # a record is an optimization: the build itself has succeeded
        try:
            temporary.unlink()
        except OSError:
            pass
        return None
    return path
