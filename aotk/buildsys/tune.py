"""``aotk tune``: an autotuned kernel's configs measured on this machine's GPU at the points the
manifest declares, the winners written to the tuning file that ``aotk build`` reads.

In: a manifest whose kernels name an ``@autotune`` function and have a ``[kernel.tune]``
table (points: the key's values; arguments: each pointer parameter's element count and each
other scalar's value, C expressions over the key; work: the FLOP or bytes of one call). Out:
per point, every config the pruning hooks keep timed with ``do_bench`` (the median of
about ``rep`` ms of calls after ``warmup`` ms, as the decorator gives them; ``reset_to_zero``
/ ``restore_value`` / hooks honoured, as in a JIT launch). Each config runs from a
one-kernel library built as ``aotk build`` builds it (the manifest's signature and
specialization: the aligned build where the arguments allow, else the generic one), so the
times are those of the code the tuned library will run, the fastest recorded per GPU arch in ``<manifest stem>.tuning.json``;
rows for the table the command prints. Inputs are random (normal floats, small integers);
a config that does not compile or launch on this GPU is recorded as not run.
"""
from __future__ import annotations

import json
import math
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..errors import CompilationError
from ..ir.signature import Signature, SignatureError
from ..launch.arguments import TORCH_DTYPES
from ..toolchain.errors import ToolchainError
from .expressions import ExpressionError, evaluate
from .manifest import ManifestError, load_manifest
from .sources import SourceError, load_kernel_and_tuner
from .tuning import TunedPoint, describe_builds, tuning_path, write_kernel


@dataclass
class TuneRow:
    kernel: str
    point: dict
    config: int          # the winner's index
    description: str     # the winner, as Config's repr
    ms: float
    work_per_s: float | None
    unit: str            # "TFLOP/s" or "GB/s"
    measured: int        # configs that ran
    failed: int          # configs that did not compile or launch


def _fail(manifest, key, message):
    raise ManifestError(f"{manifest.path}: {key}: {message}")


def _torch_dtype(torch, element):
    """The torch dtype of an aotk element type (launch.arguments' table, read backwards)."""
    name = next((name for name, dtype in TORCH_DTYPES.items() if dtype == element), None)
    return getattr(torch, name.split(".", 1)[1], None) if name else None


def _buffer(torch, dtype, count: int, fill: tuple, bounds=None):
    """A CUDA tensor of ``count`` elements filled as ``fill`` says (``bounds``: the
    integers' low and high, evaluated)."""
    if fill[0] == "zeros":
        return torch.zeros(count, device="cuda", dtype=dtype)
    if fill[0] == "ones":
        return torch.ones(count, device="cuda", dtype=dtype)
    if fill[0] == "integers":
        return torch.randint(bounds[0], bounds[1], (count,), device="cuda").to(dtype)
    if dtype.is_floating_point:
        return torch.randn(count, device="cuda").to(dtype)
    if dtype == torch.bool:
        return torch.randint(0, 2, (count,), device="cuda").bool()
    return torch.randint(-8, 8, (count,), device="cuda").to(dtype)


def tuning_arguments(manifest, kernel, signature, point, torch) -> dict:
    """The launch's runtime arguments at ``point``: tensors (random, or as the argument's
    ``fill`` says) and the scalars, each from its ``tune.arguments`` expression over the key
    and the device's names (num_sms)."""
    where = f"kernel.{kernel.name}.tune.arguments"
    # The device names of grids and `when`s (num_sms) have their values here too: a
    # persistent kernel's workspace is sized by them.
    device = {"num_sms": torch.cuda.get_device_properties(
        torch.cuda.current_device()).multi_processor_count}
    values = {}
    for parameter in signature.parameters:
        name = parameter.name
        if name in kernel.tune.fills and not parameter.type.is_ptr():
            _fail(manifest, f"{where}.{name}.fill", f"{name} is a scalar ({parameter.type}): "
                  "only a pointer parameter's buffer is filled")
        if name in point:
            values[name] = point[name]
            continue
        if name not in kernel.tune.arguments:
            _fail(manifest, f"{where}.{name}", "missing: give the element count of a pointer "
                  "parameter, or the value of a scalar, as a C expression over the key")
        try:
            value = evaluate(kernel.tune.arguments[name], {**device, **point})
        except ExpressionError as exc:
            _fail(manifest, f"{where}.{name}", str(exc))
        fill = kernel.tune.fills.get(name, ("random",))
        if parameter.type.is_ptr():
            dtype = _torch_dtype(torch, parameter.type.element_ty)
            if dtype is None:
                _fail(manifest, f"{where}.{name}", f"aotk tune cannot make a tensor of "
                      f"{parameter.type}")
            bounds = None
            if fill[0] == "integers":
                try:
                    bounds = [evaluate(bound, {**device, **point}) for bound in fill[1:]]
                except ExpressionError as exc:
                    _fail(manifest, f"{where}.{name}.fill", str(exc))
                if bounds[0] >= bounds[1]:
                    _fail(manifest, f"{where}.{name}.fill", f"integers({bounds[0]}, "
                          f"{bounds[1]}) at {point} holds no value")
            values[name] = _buffer(torch, dtype, int(value), fill, bounds)
        else:
            values[name] = value
    return values


def _toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    return json.dumps(str(value))    # a TOML basic string reads JSON's escapes


def config_launcher(work: Path, manifest, kernel, config, index: int, arch: str, errors):
    """The launcher of a one-kernel library holding ``config`` built as the manifest builds
    it (each of its [[kernel.variant]] build classes, or the kernel's signature and
    specialization, for this GPU's arch): what ``aotk build`` will put in the library, so
    that what is measured is what will run. False (and the error kept) when the config does
    not build."""
    from ..launch.library import load
    from .builder import build
    folder = work / f"{kernel.name}_config{index}"
    folder.mkdir(parents=True, exist_ok=True)
    lines = ["[library]", 'name = "tune"', f'targets = ["{arch}"]',
             f"redirect_triton = {_toml_value(kernel.redirect_triton)}", "", "[[kernel]]",
             f'name = "{kernel.name}"', f"source = {_toml_value(str(kernel.source.resolve()))}",
             f'function = "{kernel.function}"', f"signature = {_toml_value(kernel.signature)}",
             "grid = [" + ", ".join(_toml_value(g) for g in kernel.grid) + "]"]
    for build_class in kernel.variants:   # the builds the library gives each config
        constants = {**build_class.constants, **config.kwargs}
        lines += ["", "[[kernel.variant]]",
                  "constants = { " + ", ".join(f"{name} = {_toml_value(value)}"
                                               for name, value in constants.items()) + " }",
                  f"signature = {_toml_value(build_class.signature)}",
                  f"num_warps = {config.num_warps}", f"num_stages = {config.num_stages}",
                  f'specialize = "{build_class.specialize}"']
        if build_class.when is not None:
            lines.append(f"when = {_toml_value(build_class.when)}")
        maxnreg = config.maxnreg if config.maxnreg is not None else build_class.maxnreg
        if maxnreg is not None:
            lines.append(f"maxnreg = {maxnreg}")
        if not build_class.enable_fp_fusion:
            lines.append("enable_fp_fusion = false")
        num_ctas = config.num_ctas if config.num_ctas != 1 else build_class.num_ctas
        if num_ctas != 1:
            lines.append(f"num_ctas = {num_ctas}")
    (folder / "aotk.toml").write_text("\n".join(lines) + "\n")
    try:
        result = build(folder / "aotk.toml", out_dir=folder / "build")
    except (ManifestError, CompilationError, ToolchainError) as exc:
        errors[index] = str(exc).splitlines()[0]
        return False
    return getattr(load(result.library), kernel.name)


def tune(manifest_path, kernels=None, progress=None) -> list:
    """Measures and writes the tuning file; returns a TuneRow per (kernel, point).
    ``progress(done, total, text)`` is told after each tuned point."""
    try:
        import torch
    except ImportError:
        raise ManifestError("aotk tune measures on a GPU through torch, which is not "
                            "installed (pip install torch)") from None
    if not torch.cuda.is_available():
        raise ManifestError("aotk tune needs a CUDA GPU: none is visible here")
    from ..launch.device import current_device
    manifest = load_manifest(manifest_path)
    chosen = [k for k in manifest.kernels if k.tune is not None and
              (not kernels or k.name in kernels)]
    if kernels:
        unknown = set(kernels) - {k.name for k in manifest.kernels if k.tune is not None}
        if unknown:
            raise ManifestError(f"{manifest.path}: no kernel with a [kernel.tune] table named "
                                f"{', '.join(sorted(unknown))}")
    if not chosen:
        raise ManifestError(f"{manifest.path}: no kernel has a [kernel.tune] table")
    major, minor = torch.cuda.get_device_capability()
    arch, device = f"sm_{major}{minor}", current_device()
    path = tuning_path(manifest.path)
    scratch = Path(tempfile.mkdtemp(prefix="aotk-tune-"))
    rows = []
    jobs = [(kernel, point) for kernel in chosen for point in kernel.tune.points]
    done = 0
    for kernel in chosen:
        where = f"kernel.{kernel.name}"
        try:
            function, tuner, _ = load_kernel_and_tuner(kernel.source, kernel.function,
                                                       kernel.redirect_triton)
        except SourceError as exc:
            _fail(manifest, f"{where}.function", str(exc))
        if tuner is None:
            _fail(manifest, f"{where}.tune", f"{kernel.function} is not an @autotune kernel")
        try:
            signature = Signature.parse(kernel.signature, function.runtime_names, function.name)
        except SignatureError as exc:
            _fail(manifest, f"{where}.signature", str(exc))
        constants = dict(kernel.variants[0].constants)
        points = []
        libraries, errors = {}, {}   # config index -> its library's launcher (False: none)
        for point in kernel.tune.points:
            if sorted(point) != sorted(tuner.keys):
                _fail(manifest, f"{where}.tune.points", f"{point} does not give the @autotune "
                      f"key {tuner.keys}")
            arguments = tuning_arguments(manifest, kernel, signature, point, torch)
            values = [arguments[p.name] for p in signature.parameters]
            kept = tuner.prune_configs({**arguments, **constants})
            times = []
            for index, config in enumerate(tuner.configs):
                launcher = libraries.get(index)
                if config in kept and launcher is None:
                    launcher = libraries[index] = config_launcher(
                        scratch, manifest, kernel, config, index, arch, errors)
                if config in kept and launcher is not False:
                    measured, error = tuner.bench_config(
                        None, (), {**arguments, **constants}, config,
                        run=lambda launcher=launcher: launcher(*values))
                    if error:
                        errors.setdefault(index, error)
                    times.append(None if math.isinf(measured[0]) else measured[0])
                else:
                    times.append(None)
            ran = [i for i, t in enumerate(times) if t is not None]
            if not ran:
                _fail(manifest, f"{where}.tune", f"no config of {kernel.function} ran at "
                      f"{point} on {device}: " + "; ".join(
                          f"config {i}: {e}" for i, e in sorted(errors.items())))
            best = min(ran, key=lambda i: times[i])
            rate = None   # the winner's work per second, where the manifest gives the work
            if kernel.tune.work:
                try:
                    rate = evaluate(kernel.tune.work, point) / (times[best] * 1e-3)
                except ExpressionError as exc:
                    _fail(manifest, f"{where}.tune.work", str(exc))
            points.append(TunedPoint(dict(point), best, times, rate))
            done += 1
            if progress:
                progress(done, len(jobs), f"{kernel.name} at " + ", ".join(
                    f"{k}={v}" for k, v in point.items()))
            unit = "TFLOP/s" if kernel.tune.work_unit == "flop" else "GB/s"
            rows.append(TuneRow(kernel.name, dict(point), best, repr(tuner.configs[best]),
                                times[best], rate, unit, len(ran),
                                len(kept) - len(ran)))
        write_kernel(path, kernel.name, function.source_digest, tuner.configs,
                     list(tuner.keys), arch, device, points, describe_builds(kernel))
    torch.cuda.synchronize()
    shutil.rmtree(scratch, ignore_errors=True)
    return rows


def render(rows: list, seconds: float) -> str:
    """The table ``aotk tune`` prints."""
    lines = ["| kernel | point | best config | ms | rate | configs run / failed |",
             "|---|---|---|---|---|---|"]
    for row in rows:
        point = ", ".join(f"{k}={v}" for k, v in row.point.items())
        rate = "" if row.work_per_s is None else (
            f"{row.work_per_s / 1e12:.1f} {row.unit}" if row.unit == "TFLOP/s"
            else f"{row.work_per_s / 1e9:.0f} {row.unit}")
        lines.append(f"| {row.kernel} | {point} | {row.config}: {row.description} | "
                     f"{row.ms:.4f} | {rate} | {row.measured} / {row.failed} |")
    lines.append(f"\ntuned {len(rows)} point(s) in {seconds:.1f} s")
    return "\n".join(lines)
