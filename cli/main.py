"""``aotk``: a thin click layer over library functions.

  aotk compile FILE.py:FUNCTION --signature ... -D NAME=VALUE -o DIR   every stage to DIR
  aotk build [MANIFEST] [-o DIR] [-j N] [-v] [--static]               lib<name>.so + header
  aotk build --emit-ninja FILE                                         the same, as a Ninja file
  aotk tune [MANIFEST] [--kernel NAME]                                 measure @autotune configs
  aotk cache verify | clean | stats                                    check / empty / measure the cache
  aotk doctor                                                          which tools are used
User errors print one line on stderr and exit 1; no traceback.
"""
from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import click

from . import buildrecord

# aotk itself (the compiler, numpy, llvmlite: 0.1 s) is imported by each command that needs
# it, so that a no-op `aotk build` answers from its build record without it.


class UserError(click.ClickException):
    def show(self, file=None):
        click.echo(f"aotk: error: {self.message}", err=True)


def parse_define(text: str):
    """``NAME=VALUE`` -> (name, int | float | bool | str)."""
    name, sep, raw = text.partition("=")
    if not sep or not name.isidentifier():
        raise UserError(f"-D expects NAME=VALUE, got {text!r}")
    for convert in (int, float):
        try:
            return name, convert(raw)
        except ValueError:
            pass
    if raw in ("True", "False"):
        return name, raw == "True"
    return name, raw


def load_kernel(spec: str):
    """``path/to/file.py:function`` -> the @aotk.jit function it names (a file that imports
    triton gets aotk in its place, as in a manifest)."""
    import aotk
    from aotk.buildsys import sources
    path_text, sep, function = spec.rpartition(":")
    if not sep or not function:
        raise UserError(f"expected FILE.py:FUNCTION, got {spec!r}")
    path = Path(path_text)
    if not path.is_file():
        raise UserError(f"{path}: no such file")
    try:
        kernel, _ = sources.load_kernel(path, function)
    except aotk.CompilationError as exc:
        raise UserError(str(exc)) from None
    except sources.SourceError as exc:
        raise UserError(str(exc)) from None
    return kernel


def _show_version(context, parameter, value):
    if value and not context.resilient_parsing:
        from aotk.version import __version__
        click.echo(f"aotk, version {__version__}")
        context.exit()


def _show_cmake_dir(context, parameter, value):
    if value and not context.resilient_parsing:
        from aotk.data import resource_dir
        click.echo(resource_dir("cmake"))
        context.exit()


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--version", is_flag=True, expose_value=False, is_eager=True,
              callback=_show_version, help="Show the version and exit.")
@click.option("--cmake-dir", is_flag=True, expose_value=False, is_eager=True,
              callback=_show_cmake_dir,
              help="Print the folder of aotk's CMake package (for -Daotk_DIR) and exit.")
def main():
    """aotk: ahead-of-time GPU kernels from Triton-style Python."""


@main.command("compile")
@click.argument("kernel_spec", metavar="FILE.py:FUNCTION")
@click.option("--signature", "-s", required=True, help='e.g. "*fp32:16, *fp32:16, i32"')
@click.option("-D", "defines", multiple=True, metavar="NAME=VALUE", help="constexpr values")
@click.option("--num-warps", default=4, show_default=True)
@click.option("--num-stages", default=3, show_default=True)
@click.option("--target", default="sm_90", show_default=True)
@click.option("-o", "--out-dir", default="build", show_default=True, type=click.Path())
def compile_command(kernel_spec, signature, defines, num_warps, num_stages, target, out_dir):
    """Compile one kernel and write every stage (kir, gir, lowered, llir, ptx, cubin, json)."""
    import aotk
    from aotk.toolchain import ToolchainError
    constants = dict(parse_define(d) for d in defines)
    kernel = load_kernel(kernel_spec)
    try:
        options = aotk.CompileOptions(num_warps=num_warps, num_stages=num_stages,
                                      target=target)
        signature = aotk.Signature.parse(signature, kernel.runtime_names, kernel.name)
        compiled = aotk.compile(kernel, signature, constants, options=options)
    except (aotk.CompilationError, ToolchainError, ValueError, TypeError) as exc:
        raise UserError(str(exc)) from None
    for path in compiled.dump(out_dir):
        click.echo(path)


@main.command("outputs")
@click.argument("manifest", default="aotk.toml", type=click.Path())
@click.option("-o", "--out-dir", type=click.Path(), help="output folder (default: the manifest's out_dir)")
def outputs_command(manifest, out_dir):
    """Print the files `aotk build MANIFEST` writes, one NAME=PATH a line (library, archive,
    header, depfile, pkgconfig): what build systems such as CMake's aotk_add_library declare
    before the first build. Compiles nothing."""
    from aotk.buildsys.manifest import ManifestError, load_manifest
    try:
        parsed = load_manifest(manifest)
    except (ManifestError, OSError) as exc:
        raise UserError(str(exc)) from None
    folder = Path(out_dir).resolve() if out_dir else (Path(manifest).parent / parsed.out_dir).resolve()
    name = parsed.name
    for key, file in (("library", f"lib{name}.so"), ("archive", f"lib{name}.a"),
                      ("header", f"{name}.h"), ("depfile", f"{name}.d"),
                      ("pkgconfig", f"{name}.pc")):
        click.echo(f"{key}={folder / file}")


@main.command("build")
@click.argument("manifest", default="aotk.toml", type=click.Path())
@click.option("-o", "--out-dir", type=click.Path(), help="output folder (default: the manifest's out_dir)")
@click.option("-j", "--jobs", type=int, help="parallel compilations (default: all cores)")
@click.option("-v", "--verbose", is_flag=True, help="show every tool invocation")
@click.option("--static", is_flag=True, help="also write lib<name>.a")
@click.option("--target", "targets", multiple=True, metavar="SM_XY",
              help="build for this target instead of library.targets (repeatable)")
@click.option("--json", "report_path", type=click.Path(dir_okay=False), metavar="FILE",
              help="write a build report (every variant, cached or compiled) to FILE")
@click.option("--emit-ninja", "ninja_path", type=click.Path(dir_okay=False), metavar="FILE",
              help="write the build as a Ninja file (an edge per variant, then the link) "
                   "instead of building")
@click.option("--cache-url", metavar="URL",
              help="a shared compile cache (fsspec URL: file://, s3://, ...) read through and "
                   "written back; AOTK_CACHE_URL sets it too")
def build_command(manifest, out_dir, jobs, verbose, static, targets, report_path, ninja_path,
                  cache_url):
    """Build MANIFEST (default ./aotk.toml) into lib<name>.so, <name>.h and <name>.d."""
    if cache_url:
        os.environ["AOTK_CACHE_URL"] = cache_url   # the compile workers inherit it
    if ninja_path:
        return _emit_ninja(manifest, out_dir, static, targets, ninja_path)
    started_ns = time.time_ns()
    record = buildrecord.up_to_date(manifest, out_dir, static, targets)
    if record is not None:
        if verbose:
            click.echo("aotk: nothing changed since the last build (its record: "
                       f"{buildrecord.record_path(manifest, buildrecord.output_folder(manifest, out_dir))})")
        if report_path:
            _write_report(report_path, {**(record.get("report") or {}), "up_to_date": True,
                                        "seconds": (time.time_ns() - started_ns) / 1e9})
        for path in record["printed"]:
            click.echo(path)
        return
    import aotk
    from aotk.buildsys.builder import build
    from aotk.buildsys.manifest import ManifestError
    from aotk.cache import CacheError
    from aotk.toolchain import ToolchainError
    progress = _BuildProgress(terminal=sys.stderr.isatty(), verbose=verbose)
    received = []

    def stop(signum, frame):
        received.append(signum)
        raise KeyboardInterrupt
    # SIGTERM (a Makefile's or CI's kill) stops the build as Ctrl-C does: the compile
    # workers go with it, the outputs stay as they were, the status is 128 + the signal.
    signal.signal(signal.SIGTERM, stop)
    result = None
    try:
        result = build(manifest, out_dir=out_dir, jobs=jobs, verbose=verbose, static=static,
                       progress=progress, targets=list(targets) or None)
        progress.close()
        _finish_build(manifest, static, targets, started_ns, result, report_path)
    except (ManifestError, aotk.CompilationError, ToolchainError, CacheError) as exc:
        raise UserError(str(exc)) from None
    except KeyboardInterrupt:
        # A signal held while the outputs were installed arrives right after: the build is
        # then complete, but stopped all the same (a stopped build's status, for make).
        progress.close()
        click.echo("\naotk: error: build interrupted; " +
                   ("its outputs were already written, complete" if result is not None
                    else "the outputs are as they were"), err=True)
        sys.exit(128 + (received[0] if received else signal.SIGINT))
    finally:
        progress.close()


def _finish_build(manifest, static, targets, started_ns, result, report_path):
    """The closing summary, the --json report, the build record and the output paths."""
    outputs = [path for path in (result.library, result.header, result.depfile,
                                 result.pkgconfig, result.static_library) if path is not None]
    seconds = (time.time_ns() - started_ns) / 1e9
    report = {"library": str(result.library), "outputs": [str(p) for p in outputs],
              "variants": result.variants, "compiled": result.compiled,
              "cached": sum(1 for v in result.variants if v["cached"]),
              "relinked": result.linked}
    click.echo(f"aotk: {result.library.name}: {len(result.variants)} variants, "
               f"{result.compiled} compiled, {report['cached']} from the cache"
               f"{'' if result.linked else ', outputs already up to date'} ({seconds:.1f} s)",
               err=True)
    if report_path:
        _write_report(report_path, {**report, "up_to_date": False, "seconds": seconds})
    buildrecord.write(manifest, result.library.parent, static, targets, started_ns,
                      result.inputs, outputs, report)
    for path in outputs:
        click.echo(str(path))


def _emit_ninja(manifest, out_dir, static, targets, ninja_path):
    import aotk
    from aotk.buildsys.builder import prepare
    from aotk.buildsys.manifest import ManifestError
    from aotk.buildsys.ninja import emit
    try:
        loaded, out, plans = prepare(manifest, out_dir, list(targets) or None)
        emit(loaded, plans, out, Path(ninja_path).resolve(), static, list(targets))
    except (ManifestError, aotk.CompilationError) as exc:
        raise UserError(str(exc)) from None
    except OSError as exc:
        raise UserError(f"--emit-ninja {ninja_path}: cannot be written: {exc.strerror}") from None
    click.echo(ninja_path)


@main.command("compile-variant", hidden=True)
@click.argument("manifest", type=click.Path())
@click.argument("kernel")
@click.argument("index", type=int)
@click.option("-o", "out_file", required=True, type=click.Path(dir_okay=False))
@click.option("--target", "targets", multiple=True, metavar="SM_XY")
def compile_variant_command(manifest, kernel, index, out_file, targets):
    """One variant build of MANIFEST into OUT_FILE (a Ninja edge of --emit-ninja)."""
    import aotk
    from aotk.buildsys.manifest import ManifestError
    from aotk.buildsys.ninja import compile_variant
    from aotk.cache import CacheError
    from aotk.toolchain import ToolchainError
    try:
        compile_variant(manifest, kernel, index, out_file, list(targets) or None)
    except (ManifestError, aotk.CompilationError, ToolchainError, CacheError) as exc:
        raise UserError(str(exc)) from None


@main.command("link", hidden=True)
@click.argument("manifest", type=click.Path())
@click.option("-o", "--out-dir", required=True, type=click.Path())
@click.option("--static", is_flag=True)
@click.option("--target", "targets", multiple=True, metavar="SM_XY")
def link_command(manifest, out_dir, static, targets):
    """The library of MANIFEST from the variant files (the last Ninja edge of --emit-ninja)."""
    import aotk
    from aotk.buildsys.manifest import ManifestError
    from aotk.buildsys.ninja import link_variants
    from aotk.toolchain import ToolchainError
    try:
        link_variants(manifest, out_dir, static, list(targets) or None)
    except (ManifestError, aotk.CompilationError, ToolchainError) as exc:
        raise UserError(str(exc)) from None


class _BuildProgress:
    """What a long command shows while it works: on a terminal, click's progress bar;
    elsewhere (make, CI logs) one line per step done; with -v, nothing more (every build
    and tool call is printed already)."""

    def __init__(self, terminal: bool, verbose: bool, label: str = "compiling",
                 unit: str = "build"):
        self.terminal, self.verbose, self.label, self.unit = terminal, verbose, label, unit
        self.bar, self.shown = None, 0

    def __call__(self, done, total: int, what: str):
        if self.verbose:
            return
        if not self.terminal:
            verb = "compiled" if self.unit == "build" else "tuned"
            click.echo(f"aotk: {verb} {what} ({done}/{total})", err=True)
        else:
            if self.bar is None:
                self.bar = click.progressbar(length=total, label=self.label, file=sys.stderr,
                                             show_pos=True)
                self.bar.__enter__()
            self.bar.update(done - self.shown, what)
        self.shown = done

    def close(self):
        if self.bar is not None:
            self.bar.__exit__(None, None, None)
            self.bar = None


def _write_report(path: str, report: dict):
    """The --json build report, written whole or not at all."""
    import json

    from aotk.files import write_atomic
    try:
        write_atomic(path, json.dumps(report, indent=1, default=str) + "\n")
    except OSError as exc:
        raise UserError(f"--json {path}: cannot be written: {exc.strerror}") from None


@main.command("tune")
@click.argument("manifest", default="aotk.toml", type=click.Path())
@click.option("--kernel", "kernels", multiple=True, metavar="NAME",
              help="tune only this kernel (repeatable)")
def tune_command(manifest, kernels):
    """Measure the @autotune configs of MANIFEST's kernels that have a [kernel.tune] table on
    this GPU, and write the winners to <manifest>.tuning.json for `aotk build` (needs a GPU)."""
    import aotk
    from aotk.buildsys.manifest import ManifestError
    from aotk.buildsys.tune import render, tune
    from aotk.buildsys.tuning import tuning_path
    from aotk.toolchain import ToolchainError

    progress = _BuildProgress(terminal=sys.stderr.isatty(), verbose=False, label="tuning",
                              unit="point")
    started = time.perf_counter()
    try:
        rows = tune(manifest, list(kernels) or None, progress=progress)
    except (ManifestError, aotk.CompilationError, ToolchainError) as exc:
        raise UserError(str(exc)) from None
    finally:
        progress.close()
    click.echo(render(rows, time.perf_counter() - started))
    click.echo(f"wrote {tuning_path(manifest)}")


@main.command("inspect")
@click.argument("target", type=click.Path(exists=True))
@click.option("--triton", "against_triton", is_flag=True,
              help="beside each variant, Triton's registers and spills for the same kernel "
                   "and configuration (a manifest whose sources import triton)")
def inspect_command(target, against_triton):
    """Table of each variant's registers, spills, shared memory and vector width.
    TARGET is a lib<name>.so built by aotk or an aotk.toml manifest."""
    import aotk
    from aotk.buildsys.inspect import inspect_rows, render
    from aotk.buildsys.manifest import ManifestError
    from aotk.toolchain import ToolchainError
    try:
        click.echo(render(*inspect_rows(target, against_triton), against_triton))
    except (ManifestError, aotk.CompilationError, ToolchainError, ValueError, OSError) as exc:
        raise UserError(str(exc)) from None


@main.group("cache")
def cache_group():
    """The compile cache (AOTK_CACHE_DIR, else ~/.cache/aotk)."""


@cache_group.command("verify")
def cache_verify():
    """Read back every entry; remove the damaged ones (they are rebuilt when next needed)."""
    from aotk import cache
    checked, removed = cache.verify_all()
    for entry, why in removed:
        click.echo(f"removed {entry}: {why}")
    click.echo(f"{checked} entries checked in {cache.cache_dir()}, {len(removed)} removed")


@cache_group.command("stats")
def cache_stats():
    """Entries and size of the cache (and its cap, AOTK_CACHE_MAX_SIZE)."""
    from aotk import cache
    try:
        figures = cache.stats()
    except cache.CacheError as exc:
        raise UserError(str(exc)) from None
    kinds = ", ".join(f"{count} {kind}" for kind, count in sorted(figures["kinds"].items()))
    cap = figures["max_bytes"]
    click.echo(f"{figures['folder']}: {figures['entries']} entries"
               + (f" ({kinds})" if kinds else "") + f", {figures['bytes'] / 1e6:.1f} MB"
               + (f" of at most {cap / 1e6:.1f} MB (AOTK_CACHE_MAX_SIZE; the least recently "
                  "used go first)" if cap is not None else ", no size cap"))


@cache_group.command("clean")
def cache_clean():
    """Remove every entry."""
    from aotk import cache
    entries, size = cache.clean()
    click.echo(f"removed {entries} entries ({size / 1e6:.1f} MB) from {cache.cache_dir()}")


@main.command()
def doctor():
    """Show the toolchain aotk uses and where each piece comes from."""
    from aotk.toolchain.doctor import report
    rows = report()
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        click.echo(f"{key:<{width}}  {value}")
