"""``aotk.build``: manifest -> ``lib<name>.so``, ``<name>.h``, ``<name>.d``, ``<name>.pc``.

The steps, in order:
  manifest   build.manifest: read and validate aotk.toml
  plan       build.plan: load kernels, expand variants into dispatch-ordered builds
  compile    build.compile_builds: fatbins per build, in parallel, cached
  generate   build.cgen: header, dispatch C, fatbin assembly from templates/
  link       the system C compiler (``CC``, default ``cc``), with runtime/ compiled in
Intermediates stay in ``<out>/.aotk/<name>/`` for reading. Outputs are written to
temporary names and renamed, so a failed build leaves the previous outputs or none.
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from .. import cache, remote_cache
from ..version import __version__
from ..toolchain.errors import ToolchainError
from ..toolchain.libdevice import find_libdevice
from ..toolchain.locate import find_tool
from ..targets import capability
from ..toolchain.ptxas import find_ptxas, unbuildable_targets
from ..data import resource_dir
from ..files import write_atomic
from .cgen import generate, template
from .compile_builds import compile_builds
from .manifest import ManifestError, check_targets, load_manifest
from .plan import plan_builds

RUNTIME = resource_dir("runtime")


@dataclass
class BuildResult:
    library: Path
    header: Path
    depfile: Path
    pkgconfig: Path
    static_library: Path | None
    compiled: int        # builds compiled in this run (0: everything came from the cache)
    linked: bool         # False when the outputs were already up to date
    variants: list = field(default_factory=list)   # per build, in dispatch order: kernel,
    # index, name, whether it came from the cache, its cache key and per-target registers
    inputs: list = field(default_factory=list)   # every file the outputs depend on, beyond
    # the Python modules loaded: manifest, kernel sources, tuning file (which may not exist),
    # toolchain (for a build record)


def _compiler() -> list:
    return shlex.split(os.environ.get("CC", "cc"))


def _run(command, cwd, verbose):
    if verbose:
        print("aotk: " + " ".join(shlex.quote(str(c)) for c in command))
    result = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    if result.returncode != 0:
        raise ToolchainError(f"{command[0]} failed:\n{(result.stderr or result.stdout).strip()}")


def depfile_text(targets, prerequisites) -> str:
    """A Make depfile: ``targets`` depend on ``prerequisites`` (each also an empty rule)."""
    def escape(path):
        return str(path).replace(" ", "\\ ")
    lines = [" ".join(escape(t) for t in targets) + ": \\"]
    lines += [f"  {escape(p)} \\" for p in prerequisites[:-1]]
    lines.append(f"  {escape(prerequisites[-1])}")
    # An empty rule per prerequisite keeps make working when a kernel file is deleted.
    lines += [""] + [f"{escape(p)}:" for p in prerequisites]
    return "\n".join(lines) + "\n"


@contextlib.contextmanager
def _signals_held():
    """SIGINT and SIGTERM are delivered after the block, not inside it (main thread only)."""
    held = {signal.SIGINT, signal.SIGTERM}
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def build(manifest_path="aotk.toml", out_dir=None, jobs=None, verbose=False, static=False,
          progress=None, targets=None) -> BuildResult:
    """``targets`` (a list of sm_XY) replaces the manifest's ``library.targets``."""
    manifest, out, plans = prepare(manifest_path, out_dir, targets)
    cache.check_cache_dir()   # a CacheError names the folder before anything is compiled
    cap = cache.max_size()    # and a bad AOTK_CACHE_MAX_SIZE the variable
    remote_cache.new_build()
    compiled = compile_builds(plans, manifest.targets, jobs=jobs, verbose=verbose,
                              progress=progress)
    _warn_unpaired(manifest, plans, compiled)
    result = link(manifest, plans, compiled, out, static, verbose, jobs)
    if cap is not None:       # the entries this build used were touched: they go last
        cache.limit_size(cap)
    return result


def _warn_unpaired(manifest, plans, compiled):
    """One warning per variant (an autotuned kernel's: per config) that asks for num_ctas = 2
    where none of its builds pairs: only the producer warps of a loop written
    ``tl.range(..., warp_specialize=True)`` share tiles (sm_90, TMA), so elsewhere the option
    changes nothing and the user should know. A config that pairs in one build class (16-byte
    rows: TMA) and not in another (any size: pointer loads) is as meant."""
    for plan in plans:
        asked, paired = {}, set()
        for build in plan.builds:
            if build.variant.num_ctas != 2:
                continue
            config = build.variant.config
            key = ("config", config) if config is not None else ("variant", build.variant.index)
            asked.setdefault(key, build)
            if compiled[(plan.kernel.name, build.index)].metadata.get("cluster", 1) == 2:
                paired.add(key)
        for (kind, index), build in asked.items():
            if (kind, index) in paired:
                continue
            where = f"config {index} of {plan.kernel.function}'s @autotune" if kind == "config" \
                else f"kernel.{plan.kernel.name}.variant[{index}]"
            print(f"aotk: warning: {manifest.path}: {where} ({build.description}): num_ctas = 2 "
                  "pairs nothing: no loop written tl.range(..., warp_specialize=True) copies "
                  f"tiles by TMA on {', '.join(manifest.targets)}; its programs run alone",
                  file=sys.stderr)


def prepare(manifest_path, out_dir=None, targets=None) -> tuple:
    """(manifest, output folder, plans): the manifest read and checked, the output folder
    known usable, every build planned; nothing compiled or written."""
    manifest = load_manifest(manifest_path)
    if targets:
        try:
            manifest.targets = check_targets(list(targets))
        except ValueError as exc:
            raise ManifestError(f"--target: {exc}") from None
    missing = unbuildable_targets(manifest.targets)
    if missing:
        tool = find_ptxas()
        source = "--target" if targets else f"{manifest.path}: library.targets"
        raise ManifestError(
            f"{source}: the ptxas in use ({tool.path}, {tool.version}) cannot build "
            f"{', '.join(missing)}; point AOTK_PTXAS at a newer one, or leave "
            f"{'it' if len(missing) == 1 else 'them'} out: the fatbin's PTX (for "
            f"{min(manifest.targets, key=capability)}) still runs on such a GPU through "
            "the driver's JIT compiler")
    out = Path(out_dir) if out_dir is not None else manifest.out_dir
    out = out.resolve()
    for folder in [out, *out.parents]:
        if folder.exists():
            if not folder.is_dir():
                raise ManifestError(f"{manifest.path}: the output folder {out} cannot be made: "
                                    f"{folder} is a file (-o, or library.out_dir)")
            if not os.access(folder, os.W_OK | os.X_OK):
                raise ManifestError(f"{manifest.path}: the output folder {out} cannot be "
                                    f"written: {folder} is not writable")
            break
    return manifest, out, plan_builds(manifest)


def link(manifest, plans, compiled: dict, out: Path, static=False, verbose=False,
         jobs=None) -> BuildResult:
    """The library, header, depfile and .pc (and archive) from the compiled builds
    ({(kernel, index): CompiledBuild}): generated C compiled and linked, outputs replaced
    together, or left as they are when nothing changed."""
    files = generate(manifest, plans, compiled)
    name = manifest.name
    library, header = out / f"lib{name}.so", out / f"{name}.h"
    depfile, pkgconfig = out / f"{name}.d", out / f"{name}.pc"
    archive = out / f"lib{name}.a" if static else None

    fingerprint = hashlib.sha256()
    for file_name in sorted(files):
        content = files[file_name]
        fingerprint.update(file_name.encode() + (content.encode() if isinstance(content, str) else content))
    for runtime_file in sorted(RUNTIME.iterdir()):
        fingerprint.update(runtime_file.read_bytes())
    fingerprint.update(" ".join(_compiler()).encode() + str(static).encode())
    digest = fingerprint.hexdigest()
    work = out / ".aotk" / name
    stamp = work / "fingerprint"
    outputs = [library, header] + ([archive] if archive else [])
    try:   # (another build may be replacing the folder the stamp is in right now)
        up_to_date = stamp.read_text() == digest and all(p.exists() for p in outputs)
    except OSError:
        up_to_date = False

    dependencies = sorted({manifest.path} | {d for plan in plans for d in plan.dependencies})
    if not up_to_date:
        work.parent.mkdir(parents=True, exist_ok=True)
        # A folder of this build's own, renamed to .aotk/<name>/ at the end: two builds of
        # one manifest into one folder at once (make -j, two test workers) removed each
        # other's generated files there ("examples.h: No such file or directory").
        staging = Path(tempfile.mkdtemp(prefix=f"{name}.", dir=work.parent))
        umask = os.umask(0)
        os.umask(umask)
        staging.chmod(0o777 & ~umask)   # readable as the folder it replaces was, not 0700
        try:
            _compile_and_link(files, name, staging, static, verbose, jobs)
            (staging / "fingerprint").write_text(digest)
            out.mkdir(parents=True, exist_ok=True)
            # The outputs change together: SIGINT / SIGTERM wait until all are in place (a
            # build stopped before this point leaves the previous outputs untouched).
            with _signals_held():
                write_atomic(header, files[f"{name}.h"])
                if archive:
                    os.replace(staging / f"lib{name}.a.tmp", archive)
                os.replace(staging / f"lib{name}.so.tmp", library)
                _replace_folder(staging, work)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    else:
        # Nothing changed, but make asked because an input is newer: say the outputs are fresh.
        for path in outputs:
            os.utime(path)
    write_atomic(depfile, depfile_text([library, header], dependencies))
    write_atomic(pkgconfig, template("pkgconfig.pc.in").substitute(
        name=name, manifest_name=manifest.path.name,
        version=__version__))
    variants = [{"kernel": plan.kernel.name, "index": build.index,
                 "name": build.description,
                 "cached": compiled[(plan.kernel.name, build.index)].cached,
                 "key": compiled[(plan.kernel.name, build.index)].key,
                 "targets": compiled[(plan.kernel.name, build.index)].metadata.get("targets",
                                                                                   {})}
                for plan in plans for build in plan.builds]
    return BuildResult(library, header, depfile, pkgconfig, archive,
                       sum(1 for c in compiled.values() if not c.cached), not up_to_date,
                       variants,
                       dependencies + sorted({w for plan in plans for w in plan.watched})
                       + _toolchain_files())


def _compile_and_link(files: dict, name: str, work: Path, static: bool, verbose: bool,
                      jobs) -> None:
    """The generated files and the runtime written to ``work`` and compiled there into
    ``lib<name>.so.tmp`` (and ``lib<name>.a.tmp``)."""
    for file_name, content in files.items():
        write_atomic(work / file_name, content)
    for runtime_file in RUNTIME.iterdir():
        shutil.copyfile(runtime_file, work / runtime_file.name)
    # The generated C files in their order (the library's, then the kernels' files),
    # the runtime and the embedded fatbins.
    sources = [f for f in files if f.endswith(".c")] + ["aotk_runtime.c", f"{name}_fatbins.S"]
    objects = [source.rsplit(".", 1)[0] + ".o" for source in sources]
    flags = ["-O2", "-fPIC", "-std=c11", "-fvisibility=hidden", "-I."]
    commands = [_compiler() + flags + ["-c", source, "-o", obj]
                for source, obj in zip(sources, objects)]
    if verbose:   # printed here, in order: lines printed by the threads could interleave
        for command in commands:
            print("aotk: " + " ".join(shlex.quote(str(c)) for c in command))
    # As many C compilers at once as the build has jobs: a library of thousands of
    # variants is many files. The link takes the objects in the files' order.
    workers = max(1, min(jobs or os.cpu_count() or 1, len(sources)))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        list(pool.map(lambda command: _run(command, work, False), commands))
    _run(_compiler() + ["-shared", "-o", f"lib{name}.so.tmp"] + objects + ["-ldl", "-pthread"],
         work, verbose)
    if static:
        _run(["ar", "rcsD", f"lib{name}.a.tmp"] + objects, work, verbose)


def _replace_folder(new: Path, final: Path) -> None:
    """``new`` renamed to ``final``, the folder there before removed. Where another build
    puts its own folder there in between, ``new`` is left for the caller to remove: both
    hold the same build's files."""
    old = final.with_name(f"{final.name}.old-{os.getpid()}-{threading.get_ident()}")
    try:
        os.replace(final, old)
    except FileNotFoundError:
        old = None
    try:
        os.replace(new, final)
    except OSError:
        pass
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def _toolchain_files() -> list:
    """The tools and libraries a build's outputs depend on: ptxas, fatbinary, libdevice, the
    C compiler."""
    files = [find_ptxas().path, find_tool("fatbinary").path, find_libdevice()]
    compiler = shutil.which(_compiler()[0])
    return [Path(f) for f in files + ([compiler] if compiler else [])]
