"""Builds -> fatbins, in parallel, through a content-addressed cache.

In: the ``KernelPlan``s and the manifest's targets. Out: per build a ``CompiledBuild``
(fatbin bytes, entry name, shared memory, per-target registers/spills/vector widths).
The cache key is the kir listing of the build (``kir.cache_listing``: it fixes everything
code generation sees: source, inlined callees, types, hints, constants) with options, targets and the aotk, LLVM
and ptxas versions; entries are written atomically. ``verbose`` prints each build and
every tool call, the workers' included; ``progress(done, total, what)`` hears of each
compiled build.
"""
from __future__ import annotations

import ctypes
import dataclasses
import json
import os
import signal
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

from .. import cache
from ..ir import kir
from ..options import CompileOptions
from ..targets import capability
from ..toolchain.locate import show_commands


@dataclass
class CompiledBuild:
    fatbin: bytes
    metadata: dict     # name, shared, num_warps, targets: {arch: {registers, spills, ...}}
    cached: bool
    key: str = ""      # the cache key: builds with one key are one specialization


def _start_worker(parent: int, verbose: bool):
    """Runs first in each worker: ``aotk build -v`` shows the tools it runs, and the worker
    is killed when the build process dies, however it dies (SIGKILL included), so a killed
    build leaves no worker behind (Linux's PR_SET_PDEATHSIG; elsewhere the pool's own
    shutdown is all there is)."""
    show_commands(verbose)
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)   # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:   # the parent died before prctl took effect
        os._exit(1)


def _compile_one(job) -> tuple:
    """Runs in a worker process: one build for every target, packed into a fatbin."""
    from ..compiler import compile
    from ..toolchain.fatbinary import pack
    from .sources import load_kernel
    source, function_name, triton_as_aotk, signature, constants, options, targets, key = job
    kernel, _ = load_kernel(source, function_name, triton_as_aotk)
    cubins, per_target, lowest, name, shared, tensor_maps = {}, {}, None, None, 0, []
    threads, cluster = 0, 1
    # Oldest GPU first (sm_100 after sm_90): the fatbin's PTX is the oldest target's, which
    # every newer GPU can compile, and a newer target whose IR is the same assembles it
    # rather than running LLVM again (compiler.shares_ptx).
    for target in sorted(targets, key=capability):
        compiled = compile(kernel, signature, constants, older=lowest,
                           options=dataclasses.replace(options, target=target))
        # A kernel on wgmma is an sm_90a cubin: the fatbin entry says so.
        cubins[compiled.metadata["arch"]] = compiled.cubin
        per_target[target] = {k: compiled.metadata[k] for k in (
            "arch", "ptx_arch", "registers", "spills", "vector_widths", "shared", "threads",
            "cluster")}
        # The most any of its cubins needs; the runtime launches each GPU's cubin with its
        # own amount (per_target), which can be less (a 99 KB GPU's pipelines are shorter).
        name, shared = compiled.name, max(shared, compiled.metadata["shared"])
        # Only the TMA (sm_90a) cubin reads the tensor maps; the others ignore the extra
        # launch parameters.
        tensor_maps = compiled.metadata.get("tensor_maps") or tensor_maps
        lowest = lowest or compiled
        threads = max(threads, compiled.metadata.get("threads", 32 * options.num_warps))
        cluster = max(cluster, compiled.metadata.get("cluster", 1))
    fatbin = pack(cubins, lowest.options.target, lowest.ptx)
    metadata = {"name": name, "shared": shared, "num_warps": options.num_warps,
                "threads": threads, "cluster": cluster, "targets": per_target,
                "tensor_maps": tensor_maps}
    return fatbin, metadata


def compile_builds(plans, targets, jobs=None, verbose=False, progress=None) -> dict:
    """{(kernel name, build index): CompiledBuild}. Builds that are the same specialization
    (one cache key: the same kir, options and targets, whichever kernel entries or variants
    they come from) are compiled once."""
    versions = cache.versions()
    results, pending, sharing = {}, [], {}
    # The kir for the lowest target stands for all of them: the targets are in the key, and a
    # kernel that asks tl.target_info differs only as they do.
    lowest = min(targets, key=capability)
    listings = {}   # what decides a kir -> its listing, generated once each
    for plan in plans:
        for build in plan.builds:
            # Kernel entries that name one source function (each loaded on its own) and
            # variants that repeat a specialization have one kir: a manifest of 2,000 variants
            # over 8 specializations generates 8, not 2,000.
            specialization = (str(plan.kernel.source), plan.kernel.function,
                              plan.kernel.redirect_triton, build.signature,
                              repr(sorted(build.constants.items())), build.variant.num_warps)
            kir_text = listings.get(specialization)
            if kir_text is None:
                kir_text = listings[specialization] = kir.cache_listing(plan.function.kir(
                    build.signature, constants=build.constants,
                    num_warps=build.variant.num_warps, target=lowest))
            options = CompileOptions(num_warps=build.variant.num_warps,
                                     num_stages=build.variant.num_stages,
                                     maxnreg=build.variant.maxnreg,
                                     num_ctas=build.variant.num_ctas,
                                     enable_fp_fusion=build.variant.enable_fp_fusion)
            # One entry for every target: the fatbin holds them all.
            key_options = {**options.cache_key(), "targets": sorted(targets)}
            del key_options["target"]
            key = cache.cache_key(kir_text, key_options, versions)
            ident = (plan.kernel.name, build.index)
            if key in sharing:   # an identical specialization seen already
                sharing[key].append(ident)
                continue
            sharing[key] = [ident]
            hit = cache.load(key, kind="fatbin")
            if hit is not None:
                results[ident] = CompiledBuild(hit[0], hit[1], True, key)
                continue
            pending.append((ident, (str(plan.kernel.source), plan.kernel.function,
                                    plan.kernel.redirect_triton, build.signature,
                                    build.constants, options, list(targets), key)))
    if verbose:
        for ident, job in pending:
            print(f"aotk: compiling {ident[0]} build {ident[1]}: signature '{job[3]}' "
                  f"constants {json.dumps(job[4], sort_keys=True, default=repr)} targets "
                  f"{','.join(job[6])}", flush=True)
    workers = max(1, min(jobs or os.cpu_count() or 1, len(pending)))
    if pending:
        if workers == 1:
            show_commands(verbose)
            outputs = map(_compile_one, [job for _, job in pending])
        else:
            executor = ProcessPoolExecutor(max_workers=workers, initializer=_start_worker,
                                           initargs=(os.getpid(), verbose))
            outputs = executor.map(_compile_one, [job for _, job in pending])
        try:
            for done, ((ident, job), (fatbin, metadata)) in enumerate(zip(pending, outputs), 1):
                # Stored by this process, not the worker: one writer for the local cache and
                # one for the shared one (one warning if it is out of reach).
                cache.store(job[-1], fatbin, metadata, kind="fatbin")
                results[ident] = CompiledBuild(fatbin, metadata, False, job[-1])
                if progress:
                    progress(done, len(pending), f"{ident[0]} build {ident[1]}")
        except BaseException:
            # A failed compile or an interrupt: no job starts after this one.
            if workers > 1:
                executor.shutdown(wait=False, cancel_futures=True)
            raise
        finally:
            show_commands(False)
        if workers > 1:
            executor.shutdown()
    for idents in sharing.values():
        first = results[idents[0]]
        for ident in idents[1:]:
            results[ident] = CompiledBuild(first.fatbin, first.metadata, True, first.key)
    return results
