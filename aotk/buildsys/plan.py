"""Manifest -> the ordered list of builds the library dispatches over.

In: a validated ``Manifest``. Out: per kernel, its ``JITFunction``, C parameter list,
declared pointer layouts and ``Build``s in dispatch order: for each variant (manifest
order), with ``specialize = "auto"`` (the variant's, else its kernel's), first the build
that assumes every pointer 16-byte aligned and every integer divisible by 16 (but a host
descriptor's leading extents: ``Signature.specialized``), then the generic one; ``"none"`` keeps only the generic build, ``"aligned"`` only the specialized
one. Checks against the Python function happen here: the signatures (parsed into
``Signature``s against its parameter names), constexpr values present, grid and ``when``
naming only scalar parameters and constants, the declared pointer layouts naming pointers
and integer parameters.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import sys

from ..errors import CompilationError
from ..ir.pointer_layouts import LayoutError, parse_layouts
from ..ir.signature import Signature, SignatureError
from .expressions import ExpressionError, to_total_c
from .manifest import RESERVED_C_NAMES, ManifestError, Variant, check_expression
from .heuristics import HeuristicError, condition, to_expression
from .sources import SourceError, load_kernel_wrappers
from .tuning import TuningFileError, describe_builds, kernel_tuning, tuning_path


@dataclass
class Build:
    index: int                 # position in dispatch order (the C variant index)
    variant: object            # manifest.Variant
    specialized: bool          # the aligned/divisible build ("auto" or "aligned")
    signature: Signature       # with the hints the build is compiled for
    description: str           # for the generated C comment and variant_name

    @property
    def constants(self) -> dict:
        """The variant's constexpr values, and the layout of each parameter the signature
        gives as a host tensor descriptor (tensordesc<...>)."""
        return {**self.variant.constants, **dict(self.signature.descriptors)}


@dataclass
class TunedDispatch:
    """How the library picks among an autotuned kernel's tuned variants: per arch ("sm_90"),
    the tuned points (values of ``key``, scalar parameters) and the tuned choice each one
    measured fastest; a call takes the choice of the nearest point (see cgen)."""
    key: list
    points: dict               # arch -> [(values tuple, choice index)]
    configs: list              # choice index -> (config index, config)
    tuning_file: str
    times: dict = field(default_factory=dict)   # arch -> the winner's ms at each point

    def measured(self, choice: int) -> list:
        """Where the tuned choice won: [{"arch", "point", "ms"}] (for the library's info)."""
        return [{"arch": arch, "point": dict(zip(self.key, values)), "ms": ms}
                for arch, points in self.points.items()
                for (values, won), ms in zip(points, self.times.get(arch, [None] * len(points)))
                if won == choice]


@dataclass
class KernelPlan:
    kernel: object             # manifest.Kernel
    function: object           # JITFunction
    parameters: tuple          # the kernel signature's SignatureParameters: the C API
    descriptors: tuple = ()    # (name, HostDescriptorLayout) of tensordesc<...> parameters
    pointer_layouts: tuple = ()   # the PointerLayouts the manifest declares
    builds: list = field(default_factory=list)
    dependencies: list = field(default_factory=list)
    tuned: TunedDispatch | None = None
    # Files whose appearance or change would change the build although they may not exist
    # (an autotuned kernel's tuning file): for the build record, not the depfile.
    watched: list = field(default_factory=list)


def _fail(manifest, key, message):
    raise ManifestError(f"{manifest.path}: {key}: {message}")


def _signature(manifest, key, text: str, function, constants=None) -> Signature:
    """The signature ``text`` gives, or where it is empty (a Triton-C kernel's entry without
    ``signature``) the one its C parameter list declares with ``constants`` as macros."""
    try:
        if not text:
            text = function.signature(constants or {})
        return Signature.parse(text, function.runtime_names, function.name)
    except SignatureError as exc:
        _fail(manifest, key, str(exc))
    except CompilationError as exc:
        _fail(manifest, key, f"from the C parameters: {exc}")


def _total_c(manifest, key, expression, floats, constants):
    """Checks now that the expression becomes total C (a divisor that is always zero, or
    ``%`` of a float, is an error naming the key)."""
    try:
        to_total_c(expression, floats, constants)
    except ExpressionError as exc:
        _fail(manifest, key, str(exc))


def plan_builds(manifest) -> list:
    plans = []
    for kernel in manifest.kernels:
        where = f"kernel.{kernel.name}"
        try:
            function, tuner, heuristics, dependencies = load_kernel_wrappers(
                kernel.source, kernel.function, kernel.redirect_triton)
        except SourceError as exc:
            _fail(manifest, f"{where}.function", str(exc))
        first = kernel.variants[0].constants if kernel.variants else {}
        kernel_signature = _signature(manifest, f"{where}.signature", kernel.signature, function,
                                      first)
        parameters = kernel_signature.parameters
        for parameter in parameters:
            if parameter.name in RESERVED_C_NAMES:
                _fail(manifest, f"{where}.function", f"parameter {parameter.name!r} of "
                      f"{kernel.function} is a C keyword or a name the generated C uses; "
                      "rename it")
        scalars = {p.name for p in parameters if not p.type.is_ptr()}
        try:
            pointer_layouts = parse_layouts(kernel.contiguous, kernel.strides, parameters,
                                            kernel_signature.descriptors)
        except LayoutError as exc:
            _fail(manifest, f"{where}.{exc.key}", str(exc))
        plan = KernelPlan(kernel, function, parameters, kernel_signature.descriptors,
                          pointer_layouts, dependencies=dependencies)
        variants = kernel.variants
        if tuner is not None and (not kernel.explicit_variants or kernel.tune is not None):
            variants, plan.tuned = _autotuned_variants(manifest, kernel, function, tuner,
                                                       scalars)
            tuning_file = tuning_path(manifest.path).resolve()
            plan.watched.append(tuning_file)
            if tuning_file.is_file():
                plan.dependencies.append(tuning_file)
        elif kernel.tune is not None:
            _fail(manifest, f"{where}.tune", f"{kernel.function} is not an @autotune kernel "
                  "whose variants come from its configs (it has no @autotune, or the "
                  "manifest lists [[kernel.variant]] tables)")
        if heuristics:
            variants = _with_heuristics(manifest, kernel, variants, heuristics)
        for variant in variants:
            vwhere = f"{where}.variant[{variant.index}]"
            missing = [c for c in function.constexpr_names
                       if c not in variant.constants and c not in function.defaults]
            if missing:
                _fail(manifest, f"{vwhere}.constants",
                      f"no value for constexpr parameter(s) {', '.join(sorted(missing))}")
            # A Triton-C kernel takes its constants as macros: any name.
            unknown = set(variant.constants) - function.constexpr_names \
                if not getattr(function, "constants_are_macros", False) else set()
            if unknown:
                _fail(manifest, f"{vwhere}.constants", f"{', '.join(sorted(unknown))} "
                      f"{'is not a' if len(unknown) == 1 else 'are not'} tl.constexpr "
                      f"parameter(s) of {function.name}")
            names = scalars | set(variant.constants)
            floats = {p.name for p in parameters if p.type.is_floating()}
            for g, expression in enumerate(kernel.grid):
                check_expression(manifest.path, f"{where}.grid[{g}]", expression, names)
                _total_c(manifest, f"{where}.grid[{g}]", expression, floats, variant.constants)
            if variant.when is not None:
                check_expression(manifest.path, f"{vwhere}.when", variant.when, names)
                _total_c(manifest, f"{vwhere}.when", variant.when, floats, variant.constants)
            signature = _signature(manifest, f"{vwhere}.signature", variant.signature, function,
                                   variant.constants)
            if signature.names != kernel_signature.names or \
                    signature.descriptors != kernel_signature.descriptors:
                _fail(manifest, f"{vwhere}.signature", "a variant's signature may change types "
                      "and hints, not the parameters or the descriptors' block shapes (they "
                      "make the C API): give that variant a kernel entry of its own")
            constants_text = ", ".join(f"{k}={v}" for k, v in variant.constants.items())
            label = f"{kernel.name}[{constants_text}]" if constants_text else kernel.name
            if variant.config is not None:   # from @autotune: which config, and its role
                label += f" config {variant.config}" + (
                    "" if plan.tuned is None else " tuned" if variant.tuned_choice is not None
                    else " fallback")
            if variant.specialize in ("auto", "aligned"):
                plan.builds.append(Build(len(plan.builds), variant, True,
                                         signature.specialized(), f"{label} aligned"))
            if variant.specialize != "aligned":
                plan.builds.append(Build(len(plan.builds), variant, False, signature,
                                         f"{label} generic" if variant.specialize == "auto"
                                         else label))
        _unique_descriptions(plan.builds)
        plans.append(plan)
    return plans


def _autotuned_variants(manifest, kernel, function, tuner, scalars: set) -> tuple:
    """An @autotune kernel listed without [[kernel.variant]], or with [kernel.tune]: the
    variants of each config the tuning file chose for one of the library's targets (nearest
    tuned point wins at run time), then of the fallback, its first config; without a tuning
    file, of the first config alone (with one warning). A config's variants are the
    manifest's [[kernel.variant]] tables (the builds each config gets: signature, when,
    specialize), or one plain variant."""
    where = f"kernel.{kernel.name}"
    classes = kernel.variants
    base = classes[0]
    configs = tuner.configs
    for c, build_class in enumerate(classes):
        clash = set(build_class.constants) & {name for config in configs
                                              for name in config.kwargs}
        if clash:
            key = f"{where}.variant[{c}].constants" if kernel.explicit_variants else \
                f"{where}.constants"
            _fail(manifest, key, f"sets {', '.join(sorted(clash))}, which the @autotune "
                  "configs set")
    for i, config in enumerate(configs):
        given = set(base.constants) | set(config.kwargs)
        missing = [c for c in function.constexpr_names
                   if c not in given and c not in function.defaults]
        if missing:
            _fail(manifest, f"{where}.function", f"config {i} of {kernel.function}'s "
                  f"@autotune ({config!r}) gives no value for constexpr parameter(s) "
                  f"{', '.join(sorted(missing))} (nor does the manifest's constants)")
    for i, config in enumerate(configs):
        if config.num_ctas not in (1, 2):
            _fail(manifest, f"{where}.function", f"config {i} of {kernel.function}'s "
                  f"@autotune ({config!r}) asks num_ctas={config.num_ctas!r}: aotk runs "
                  "programs alone (1) or in pairs sharing their TMA tiles (2)")
    for name in tuner.keys:
        if name not in scalars:
            _fail(manifest, f"{where}.function", f"the @autotune key names {name!r}, which is "
                  "not a scalar parameter of the signature (the library dispatches on those)")
    if kernel.tune is not None:
        for i, point in enumerate(kernel.tune.points):
            if sorted(point) != sorted(tuner.keys):
                _fail(manifest, f"{where}.tune.points[{i}]", f"gives {sorted(point)}, the "
                      f"@autotune key is {tuner.keys}")

    def variants_of(config_index, choice):
        config = configs[config_index]
        return [Variant(build_class.index, {**build_class.constants, **config.kwargs},
                        build_class.when, config.num_warps, config.num_stages,
                        build_class.signature, build_class.specialize,
                        config.maxnreg if config.maxnreg is not None else build_class.maxnreg,
                        config_index, choice, enable_fp_fusion=build_class.enable_fp_fusion,
                        num_ctas=config.num_ctas if config.num_ctas != 1
                        else build_class.num_ctas)
                for build_class in classes]

    path = tuning_path(manifest.path)
    unusable = False
    try:
        tuned = kernel_tuning(path, kernel.name, function.source_digest, configs,
                              list(tuner.keys), describe_builds(kernel))
    except TuningFileError as exc:
        print(f"aotk: warning: {exc}; building {kernel.name}'s first config for every "
              "shape (run `aotk tune` on a GPU)", file=sys.stderr)
        tuned, unusable = None, True
    archs = [arch for arch in manifest.targets if tuned is not None and tuned.points(arch)]
    if not archs:
        if tuned is None and not unusable and len(configs) > 1:
            print(f"aotk: warning: {where}: no tuning for it in {path.name}: building its first "
                  f"config of {len(configs)} for every shape (run `aotk tune` on a GPU)",
                  file=sys.stderr)
        return variants_of(0, None), None
    chosen, points, times = [], {}, {}
    for arch in archs:
        points[arch], times[arch] = [], []
        for point in tuned.points(arch):
            if point.config not in chosen:
                chosen.append(point.config)
            points[arch].append((tuple(point.key[name] for name in tuner.keys),
                                 chosen.index(point.config)))
            times[arch].append(point.ms[point.config])
    variants = [v for k, c in enumerate(chosen) for v in variants_of(c, k)]
    variants += variants_of(0, None)
    return variants, TunedDispatch(list(tuner.keys), points,
                                   [(c, configs[c]) for c in chosen], path.name, times)


def _with_heuristics(manifest, kernel, variants: list, heuristics: dict) -> list:
    """Each variant made to hold only where its ``@heuristics`` values are what a launch
    would compute: the value the variant gives becomes part of its condition; a value it
    does not give is built for both truth values when the heuristic is a comparison, and is
    an error otherwise. A heuristic aotk cannot turn into C needs the variant's own
    ``when``."""
    where = f"kernel.{kernel.name}"
    translated = {}
    for name, function in heuristics.items():
        try:
            translated[name] = to_expression(function)
        except HeuristicError as exc:
            translated[name] = str(exc)
    result = []
    for variant in variants:
        expanded = [variant]
        for name in heuristics:
            rule = translated[name]
            vwhere = f"{where}.variant[{variant.index}]"
            if isinstance(rule, str):   # not translatable: why
                if name not in variant.constants:
                    _fail(manifest, f"{vwhere}.constants", f"no value for {name}, which "
                          f"@heuristics computes with a function aotk cannot turn into C "
                          f"({rule}): give its value and a `when` under which it holds")
                if variant.when is None:
                    _fail(manifest, f"{vwhere}.when", f"{name} = {variant.constants[name]!r} "
                          f"comes from @heuristics through a function aotk cannot turn into "
                          f"C ({rule}): give this variant a `when` under which it holds")
                continue
            expression, is_truth = rule
            following = []
            for current in expanded:
                if name in current.constants:
                    values = [current.constants[name]]
                elif is_truth:
                    values = [True, False]
                else:
                    _fail(manifest, f"{vwhere}.constants", f"no value for {name}, which "
                          f"@heuristics computes as {expression}: list the values it takes, "
                          "one [[kernel.variant]] each (a heuristic that is a comparison is "
                          "built for both values by itself)")
                for value in values:
                    clause = condition(expression, is_truth, value)
                    when = clause if current.when is None else f"({current.when}) && {clause}"
                    following.append(dataclasses.replace(
                        current, constants={**current.constants, name: value}, when=when))
            expanded = following
        result += expanded
    return result


def _unique_descriptions(builds: list):
    """Variant names must tell builds apart (``NAME_KERNEL_variant_name``, select() in
    Python): where a build reads like an earlier one (variants differing only in `when` or
    in their signature's hints), it gets its manifest variant index."""
    seen = set()
    for build in builds:
        if build.description in seen:
            build.description += f" #{build.variant.index}"
        seen.add(build.description)
