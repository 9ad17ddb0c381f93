"""On-disk cache of compiled kernels (JIT cubins, build fatbins).

Key: the kir listing (it fixes everything codegen sees: types, hints, constexprs, inlined
callees), the options, the target, and the versions of aotk, LLVM and ptxas. Entries are
written to a temporary file and renamed, so an interrupted process never leaves a torn one.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile


def cache_dir() -> str:
    return os.environ.get("AOTK_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "aotk")


def cache_key(kir_text: str, options: dict, versions: dict) -> str:
    payload = json.dumps({"kir": kir_text, "options": options, "versions": versions},
                         sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()


def load(key: str, kind: str = "cubin"):
    """(binary bytes, metadata dict) or None; ``kind`` is the binary's extension."""
    base = os.path.join(cache_dir(), key[:2], key)
    try:
        with open(f"{base}.{kind}", "rb") as f:
            cubin = f.read()
        with open(base + ".json") as f:
            metadata = json.load(f)
    except (OSError, ValueError):
        return None
    return cubin, metadata


def _atomic_write(path: str, data: bytes):
    directory = os.path.dirname(path)
    os.makedirs(directory, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=directory, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise


def store(key: str, binary: bytes, metadata: dict, kind: str = "cubin"):
    base = os.path.join(cache_dir(), key[:2], key)
    # Metadata last: a reader that finds it also finds the complete binary.
    _atomic_write(f"{base}.{kind}", binary)
    _atomic_write(base + ".json", json.dumps(metadata, sort_keys=True).encode())
