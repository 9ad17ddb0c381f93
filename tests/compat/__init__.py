"""Installed Triton kernel libraries loaded through aotk's import redirection (liger.py,
fla.py), and what their loaders share."""
from __future__ import annotations

import contextlib
import os
import sys


@contextlib.contextmanager
def fresh_package(package: str):
    """Imports inside get new modules of ``package``; afterwards sys.modules is as before
    (so the library loaded with the real triton and with aotk can live in one process)."""
    saved = {n: m for n, m in sys.modules.items() if n.split(".")[0] == package}
    for name in saved:
        del sys.modules[name]
    try:
        yield
    finally:
        for name in [n for n in sys.modules if n.split(".")[0] == package]:
            del sys.modules[name]
        sys.modules.update(saved)


@contextlib.contextmanager
def interpreting():
    """AOTK_INTERPRET=1 for the duration: a library's host code launches on the CPU
    interpreter."""
    previous = os.environ.get("AOTK_INTERPRET")
    os.environ["AOTK_INTERPRET"] = "1"
    try:
        yield
    finally:
        if previous is None:
            del os.environ["AOTK_INTERPRET"]
        else:
            os.environ["AOTK_INTERPRET"] = previous


def autotune_variants(modules: dict, launches) -> list:
    """(launch, constants, num_warps, num_stages) for every config of every autotuned
    kernel among ``launches`` (the interpreter runs only each kernel's first config): its
    constexprs as the launch bound them, the config's own replaced. ``modules``: the
    library's modules, searched for autotuners (``@autotune`` under or over
    ``@heuristics``). Configs with a ``pre_hook`` are left out: the hook rewrites the
    launch's arguments (liger's descriptors' block shapes), which a replay does not have."""
    from aotk.autotune import Autotuner, Heuristics
    tuners = {}
    for module in modules.values():
        for value in list(vars(module).values()):
            inner, tuner = value, None
            while isinstance(inner, (Autotuner, Heuristics)):
                tuner = inner if isinstance(inner, Autotuner) else tuner
                inner = inner.fn
            if tuner is not None:
                tuners[id(inner)] = tuner
    variants, seen = [], set()
    for launch in launches:
        tuner = tuners.get(id(launch.kernel))
        for config in tuner.configs if tuner is not None else ():
            if config.pre_hook is not None:
                continue
            constants = {**launch.constants, **{name: value for name, value in
                                                config.kwargs.items() if name in launch.constants}}
            key = (id(launch.kernel), launch.signature, repr(sorted(constants.items())),
                   config.num_warps, config.num_stages)
            if key not in seen:
                seen.add(key)
                variants.append((launch, constants, config.num_warps, config.num_stages))
    return variants


def compile_failures(variants, target: str, allowed=lambda error: False) -> list:
    """(kernel name, constants, num_warps, error) of each ``autotune_variants`` entry that
    does not compile for ``target``, but for errors ``allowed`` accepts."""
    import aotk
    failed = []
    for launch, constants, num_warps, num_stages in variants:
        try:
            aotk.compile(launch.kernel, launch.signature, constants, num_warps, num_stages,
                         target=target)
        except Exception as error:   # noqa: BLE001 - every failure is returned
            if not allowed(error):
                failed.append((launch.kernel.__name__, constants, num_warps, repr(error)[:200]))
    return failed
