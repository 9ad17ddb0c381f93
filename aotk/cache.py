"""On-disk cache of compiled kernels (JIT cubins, build fatbins).

Key: the kir listing (it fixes everything codegen sees: types, hints, constexprs, inlined
callees), the options, the target, the versions of aotk, LLVM and ptxas, and a digest of
the compiler's own source (a changed pass must not be answered by a stale binary under an
unchanged version number). Entries are written to a temporary file and renamed, so an
interrupted process never leaves a torn one.

Integrity: an entry is the binary and its metadata, which records the binary's size and
sha256 (``entry_digest``). A read checks both; an entry that does not match (a binary
damaged or replaced on disk, metadata that does not parse) is removed with a one-line
warning and reported missing, so that it is rebuilt, never linked (as ccache and Bazel's
disk cache check what they read). ``verify_all`` and ``clean`` are ``aotk cache verify`` /
``aotk cache clean``. With ``AOTK_CACHE_URL`` a missing entry is read through from a shared
cache and a new one written back (``remote_cache``: checked the same way).
"""
from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import pathlib
import shutil
import sys

from . import remote_cache
from .files import write_atomic
from .version import __version__


def cache_dir() -> str:
    return os.environ.get("AOTK_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "aotk")


@functools.lru_cache(maxsize=1)
def compiler_digest() -> str:
    """sha256 of every Python file of the aotk package, in path order."""
    package = pathlib.Path(__file__).resolve().parent
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        digest.update(str(path.relative_to(package)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def versions() -> dict:
    """The tools whose output a cached binary is: aotk, LLVM, ptxas."""
    from .backend.ptx import llvm_version
    from .toolchain.ptxas import find_ptxas
    return {"aotk": __version__, "llvm": llvm_version(), "ptxas": find_ptxas().version}


def cache_key(kir_text: str, options: dict, versions: dict) -> str:
    payload = json.dumps({"kir": kir_text, "options": options, "versions": versions,
                          "compiler": compiler_digest()}, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()


class CacheError(Exception):
    """A cache folder that cannot be used: the message names it."""


def check_cache_dir() -> str:
    """The cache folder, created if need be; CacheError if it cannot be used."""
    folder = cache_dir()
    if os.path.exists(folder) and not os.path.isdir(folder):
        raise CacheError(f"the cache folder {folder} (AOTK_CACHE_DIR or ~/.cache/aotk) is not "
                         "a folder")
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as exc:
        raise CacheError(f"the cache folder {folder} cannot be created: {exc.strerror}") from None
    if not os.access(folder, os.W_OK | os.X_OK):
        raise CacheError(f"the cache folder {folder} is not writable")
    return folder


def entry_digest(binary: bytes) -> dict:
    """What an entry's metadata records of its binary."""
    return {"size": len(binary), "sha256": hashlib.sha256(binary).hexdigest()}


def _warn(message: str):
    print(f"aotk: warning: {message}", file=sys.stderr)


def _check_entry(base: str, kind: str):
    """(binary, metadata) of a sound entry; (None, why) of a damaged one; None if absent."""
    try:
        with open(f"{base}.{kind}", "rb") as f:
            binary = f.read()
        with open(base + ".json", "rb") as f:
            text = f.read()
    except FileNotFoundError:
        return None
    except OSError as exc:
        return None, f"cannot be read ({exc.strerror})"
    try:
        metadata = json.loads(text)
    except ValueError:
        return None, "its metadata does not parse"
    if not isinstance(metadata, dict) or metadata.get("entry") != entry_digest(binary):
        return None, "its content does not match its recorded size and sha256"
    return binary, metadata


def _remove_entry(base: str, kind: str):
    for path in (f"{base}.{kind}", base + ".json"):
        with contextlib.suppress(OSError):
            os.unlink(path)


def load(key: str, kind: str = "cubin"):
    """(binary bytes, metadata dict) or None; ``kind`` is the binary's extension. A damaged
    entry is removed, with a warning, and reads as missing."""
    base = os.path.join(cache_dir(), key[:2], key)
    found = _check_entry(base, kind)
    if found is None:
        shared = remote_cache.fetch(key, kind)   # checked there; kept here from now on
        if shared is None:
            return None
        write_atomic(f"{base}.{kind}", shared[0], _TEMPORARY)
        write_atomic(base + ".json", shared[1], _TEMPORARY)
        found = _check_entry(base, kind)
        if found is None:
            return None
    binary, metadata = found
    if binary is None:
        _warn(f"cache entry {key[:16]} ({kind}): {metadata}; removed, it will be rebuilt")
        _remove_entry(base, kind)
        return None
    del metadata["entry"]
    with contextlib.suppress(OSError):   # its last use, for the size cap's eviction order
        os.utime(base + ".json")
    return binary, metadata


_TEMPORARY = ".tmp-"   # the prefix of an entry being written (verify_all removes leftovers)


def store(key: str, binary: bytes, metadata: dict, kind: str = "cubin"):
    base = os.path.join(cache_dir(), key[:2], key)
    # Metadata last: a reader that finds it also finds the complete binary.
    write_atomic(f"{base}.{kind}", binary, _TEMPORARY)
    recorded = json.dumps({**metadata, "entry": entry_digest(binary)}, sort_keys=True).encode()
    write_atomic(base + ".json", recorded, _TEMPORARY)
    remote_cache.publish(key, kind, binary, recorded)


def _entries(folder: str):
    """(base path, binary kind) of every entry in the cache folder."""
    for directory, _, names in os.walk(folder):
        for name in sorted(names):
            stem, _, extension = name.rpartition(".")
            if extension in ("cubin", "fatbin") and not name.startswith(".tmp-"):
                yield os.path.join(directory, stem), extension


def verify_all() -> tuple:
    """(entries checked, [(entry, why) removed]): every entry read back and checked; damaged
    ones, metadata without a binary and leftover temporary files are removed."""
    folder = cache_dir()
    checked, removed = 0, []
    if not os.path.isdir(folder):
        return checked, removed
    for base, kind in list(_entries(folder)):
        checked += 1
        found = _check_entry(base, kind)
        if found is None or found[0] is None:
            why = "its metadata is missing" if found is None else found[1]
            _remove_entry(base, kind)
            removed.append((os.path.relpath(base, folder), why))
    for directory, _, names in os.walk(folder):
        for name in names:
            path = os.path.join(directory, name)
            orphan = name.endswith(".json") and not any(
                os.path.exists(path[:-5] + ext) for ext in (".cubin", ".fatbin"))
            if name.startswith(".tmp-") or orphan:
                with contextlib.suppress(OSError):
                    os.unlink(path)
                removed.append((os.path.relpath(path, folder), "a leftover file"))
    return checked, removed


def clean() -> tuple:
    """(entries, bytes) removed: the whole cache folder emptied."""
    folder = cache_dir()
    if not os.path.isdir(folder):
        return 0, 0
    entries = sum(1 for _ in _entries(folder))
    size = sum(os.path.getsize(os.path.join(d, n)) for d, _, names in os.walk(folder)
               for n in names)
    for child in os.listdir(folder):
        path = os.path.join(folder, child)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.unlink(path)
    return entries, size


_SIZE_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def max_size():
    """The cap AOTK_CACHE_MAX_SIZE sets (bytes; "500M", "2G", "1500000"), or None."""
    text = os.environ.get("AOTK_CACHE_MAX_SIZE", "").strip()
    if not text:
        return None
    number, unit = text.rstrip("KMGTkmgtBb"), text[len(text.rstrip("KMGTkmgtBb")):]
    unit = unit.upper().rstrip("B")
    if not number.isdigit() or unit not in _SIZE_UNITS:
        raise CacheError(f"AOTK_CACHE_MAX_SIZE={text!r}: expected a size such as 500M or 2G")
    return int(number) * _SIZE_UNITS[unit]


def _sized_entries(folder: str) -> list:
    """[(last use, bytes, base, kind)] of every entry (last use: its metadata's time)."""
    entries = []
    for base, kind in _entries(folder):
        try:
            used = os.stat(base + ".json").st_mtime_ns
            size = os.path.getsize(f"{base}.{kind}") + os.path.getsize(base + ".json")
        except OSError:
            continue
        entries.append((used, size, base, kind))
    return entries


def stats() -> dict:
    """The cache folder's entries: count, bytes, per kind, the cap if one is set."""
    folder = cache_dir()
    entries = _sized_entries(folder) if os.path.isdir(folder) else []
    kinds = {}
    for _, _, _, kind in entries:
        kinds[kind] = kinds.get(kind, 0) + 1
    return {"folder": folder, "entries": len(entries), "bytes": sum(e[1] for e in entries),
            "kinds": kinds, "max_bytes": max_size()}


def limit_size(max_bytes: int) -> tuple:
    """(entries, bytes) removed: the least recently used entries, until the cache holds at
    most ``max_bytes`` (an entry used by the build that just ran is the newest)."""
    folder = cache_dir()
    if not os.path.isdir(folder):
        return 0, 0
    entries = sorted(_sized_entries(folder))
    total = sum(e[1] for e in entries)
    removed = freed = 0
    for _, size, base, kind in entries:
        if total <= max_bytes:
            break
        _remove_entry(base, kind)
        total -= size
        removed, freed = removed + 1, freed + size
    return removed, freed
