"""The autotuning results a JIT launch keeps on disk, so that a new process does not measure
the same configurations again.

In: the kernel (its name and source digest), the configurations it was tuned over, the
tuning key of a launch (the ``key`` arguments' values and the arguments' dtypes) and the GPU.
Out: ``<cache dir>/autotune/<digest>.json`` holding each configuration's measured times and
the winner's index; ``load`` gives them back only when every one of those still matches (a
record that does not parse, or names other configurations, is ignored and measured again).
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

from .. import cache
from ..files import write_atomic
from ..version import __version__

FORMAT = 1


def _describe(config) -> dict:
    return {"kwargs": {name: repr(value) for name, value in sorted(config.kwargs.items())},
            "options": repr(sorted(config.launch_options().items()))}


def record_path(kernel, configs, key, device: str) -> Path:
    identity = json.dumps({"format": FORMAT, "aotk": __version__, "kernel": kernel.name,
                           "source": kernel.source_digest, "device": device,
                           "configs": [_describe(c) for c in configs], "key": repr(key)},
                          sort_keys=True)
    digest = hashlib.sha256(identity.encode()).hexdigest()
    return Path(cache.cache_dir()) / "autotune" / f"{kernel.name}-{digest[:32]}.json"


def load(kernel, configs, key, device: str):
    """(index of the winner among ``configs``, {index: times in ms}) or None."""
    try:
        record = json.loads(record_path(kernel, configs, key, device).read_text())
        described = [_describe(c) for c in configs]
        if record["format"] != FORMAT or record["configs"] != described:
            return None
        best = record["best"]
        timings = {int(i): [float(t) for t in times] for i, times in record["timings_ms"].items()}
        if not isinstance(best, int) or not 0 <= best < len(configs):
            return None
        return best, timings
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def store(kernel, configs, key, device: str, best: int, timings: dict):
    """Writes the record (atomically; a cache folder that cannot be written costs only the
    record)."""
    path = record_path(kernel, configs, key, device)
    record = {"format": FORMAT, "kernel": kernel.name, "device": device, "key": repr(key),
              "configs": [_describe(c) for c in configs], "best": best,
              "timings_ms": {str(i): [float(t) for t in times] for i, times in timings.items()}}
    try:
        write_atomic(path, json.dumps(record, indent=1))
    except OSError:
        pass
