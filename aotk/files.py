"""Files written whole or not at all: the one writer of every file aotk leaves behind
(library outputs, cache entries, tuning files, autotuning records, build reports).

In: a path and its content (str or bytes). Out: the file, written to a temporary file in
the same folder and renamed over the path, so that a reader (or a build killed midway)
sees the old content or the new, never a torn one; its mode is what any new file gets
under the umask (0644 usually: mkstemp's 0600 would make a committed tuning file or an
installed header unreadable to others). The temporary's name starts with
``temporary_prefix`` (the cache's ``verify`` finds leftovers by it).
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_atomic(path, data, temporary_prefix: str | None = None):
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=path.parent,
                                     prefix=temporary_prefix or f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temporary, 0o666 & ~umask)
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise
