"""A shared compile cache behind the local one: entries read through and written back over an
fsspec URL (``file://`` on a shared disk, ``s3://``, ``gs://``, ``http(s)://`` with the
matching fsspec backend installed).

In: ``AOTK_CACHE_URL`` (``aotk build --cache-url`` sets it), a cache key and entry kind.
Out: ``fetch`` gives the entry's (binary, metadata bytes) when the remote has a sound one;
``publish`` uploads a local entry (binary first, metadata last, as the local cache writes
them). The remote is a convenience, never a source of truth: every fetched entry is checked
against the size and sha256 its metadata records before the local cache takes it, and a
missing fsspec, an unreachable store or a damaged entry costs one warning (once per
build) and a local compile, never a failed or wrong build.
"""
from __future__ import annotations

import hashlib
import json
import os
import sys

_warned = set()


def new_build():
    """Each build warns of an outage once (a process may run several builds)."""
    _warned.clear()


def url() -> str | None:
    return os.environ.get("AOTK_CACHE_URL") or None


def _warn_once(topic: str, message: str):
    if topic not in _warned:
        _warned.add(topic)
        print(f"aotk: warning: remote cache {url()}: {message}", file=sys.stderr)


def _filesystem():
    try:
        import fsspec
    except ImportError:
        _warn_once("fsspec", "needs fsspec (pip install 'aotk[remote]'); using the local "
                             "cache only")
        return None, None
    try:
        return fsspec.core.url_to_fs(url())
    except Exception as exc:   # noqa: BLE001 - any backend's failure is an outage here
        _warn_once("outage", f"cannot be opened ({type(exc).__name__}: {exc}); using the local "
                           "cache only")
        return None, None


def _paths(root: str, key: str, kind: str) -> tuple:
    base = f"{root.rstrip('/')}/{key[:2]}/{key}"
    return f"{base}.{kind}", f"{base}.json"


def fetch(key: str, kind: str):
    """(binary, metadata bytes) of the remote entry, checked; None when it has none, or
    none that can be read or trusted (with one warning)."""
    if url() is None:
        return None
    fs, root = _filesystem()
    if fs is None:
        return None
    binary_path, metadata_path = _paths(root, key, kind)
    try:
        if not fs.exists(metadata_path):
            return None
        metadata_bytes = fs.cat_file(metadata_path)
        binary = fs.cat_file(binary_path)
    except FileNotFoundError:
        return None
    except Exception as exc:   # noqa: BLE001
        _warn_once("outage", f"cannot be read ({type(exc).__name__}: {exc}); compiling here")
        return None
    try:
        recorded = json.loads(metadata_bytes).get("entry", {})
    except (ValueError, AttributeError):
        recorded = {}
    if recorded != {"size": len(binary), "sha256": hashlib.sha256(binary).hexdigest()}:
        _warn_once(f"damaged {key}", f"entry {key[:16]} ({kind}) does not match its recorded "
                                     "size and sha256; compiled here instead")
        return None
    return binary, metadata_bytes


def publish(key: str, kind: str, binary: bytes, metadata_bytes: bytes):
    """Uploads an entry (binary first, metadata last); an outage costs one warning."""
    if url() is None:
        return
    fs, root = _filesystem()
    if fs is None:
        return
    binary_path, metadata_path = _paths(root, key, kind)
    try:
        fs.makedirs(binary_path.rsplit("/", 1)[0], exist_ok=True)
        fs.pipe_file(binary_path, binary)
        fs.pipe_file(metadata_path, metadata_bytes)
    except Exception as exc:   # noqa: BLE001
        _warn_once("outage", f"cannot be written ({type(exc).__name__}: {exc}); entries stay "
                            "local")
