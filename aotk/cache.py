"""On-disk cache of compiled kernels (JIT cubins, build fatbins).

Key: the kir listing (it fixes everything codegen sees: types, hints, constexprs, inlined
callees), the options, the target, the versions of aotk, LLVM and ptxas, and a digest of
the compiler's own source (a changed pass must not be answered by a stale binary under an
unchanged version number). Entries are written to a temporary file and renamed, so an
interrupted process never leaves a torn one.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import pathlib
import tempfile

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
