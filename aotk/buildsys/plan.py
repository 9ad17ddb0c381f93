"""Manifest -> the ordered list of builds the library dispatches over.

In: a validated ``Manifest``. Out: per kernel, its ``JITFunction``, C parameter list and
``Build``s in dispatch order: for each variant (manifest order), with ``specialize =
"auto"`` (the variant's, else its kernel's), first the build that assumes every pointer
16-byte aligned and every integer divisible by 16, then the generic one; ``"none"`` keeps
only the generic build, ``"aligned"`` only the specialized one. Checks against the Python
function happen here: the signatures (parsed into ``Signature``s against its parameter
names), constexpr values present, grid and ``when`` naming only scalar parameters and
constants.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..ir.signature import Signature, SignatureError
from .expressions import ExpressionError, to_total_c
from .manifest import RESERVED_C_NAMES, ManifestError, check_expression
from .sources import SourceError, load_kernel


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
class KernelPlan:
    kernel: object             # manifest.Kernel
    function: object           # JITFunction
    parameters: tuple          # the kernel signature's SignatureParameters: the C API
    descriptors: tuple = ()    # (name, HostDescriptorLayout) of tensordesc<...> parameters
    builds: list = field(default_factory=list)
    dependencies: list = field(default_factory=list)


def _fail(manifest, key, message):
    raise ManifestError(f"{manifest.path}: {key}: {message}")


def _signature(manifest, key, text: str, function) -> Signature:
    try:
        return Signature.parse(text, function.runtime_names, function.name)
    except SignatureError as exc:
        _fail(manifest, key, str(exc))


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
            function, dependencies = load_kernel(kernel.source, kernel.function,
                                                 kernel.redirect_triton)
        except SourceError as exc:
            _fail(manifest, f"{where}.function", str(exc))
        kernel_signature = _signature(manifest, f"{where}.signature", kernel.signature, function)
        parameters = kernel_signature.parameters
        for parameter in parameters:
            if parameter.name in RESERVED_C_NAMES:
                _fail(manifest, f"{where}.function", f"parameter {parameter.name!r} of "
                      f"{kernel.function} is a C keyword or a name the generated C uses; "
                      "rename it")
        scalars = {p.name for p in parameters if not p.type.is_ptr()}
        plan = KernelPlan(kernel, function, parameters, kernel_signature.descriptors,
                          dependencies=dependencies)
        for variant in kernel.variants:
            vwhere = f"{where}.variant[{variant.index}]"
            missing = [c for c in function.constexpr_names
                       if c not in variant.constants and c not in function.defaults]
            if missing:
                _fail(manifest, f"{vwhere}.constants",
                      f"no value for constexpr parameter(s) {', '.join(sorted(missing))}")
            unknown = set(variant.constants) - function.constexpr_names
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
            signature = _signature(manifest, f"{vwhere}.signature", variant.signature, function)
            if signature.names != kernel_signature.names or \
                    signature.descriptors != kernel_signature.descriptors:
                _fail(manifest, f"{vwhere}.signature", "a variant's signature may change types "
                      "and hints, not the parameters or the descriptors' block shapes (they "
                      "make the C API): give that variant a kernel entry of its own")
            constants_text = ", ".join(f"{k}={v}" for k, v in variant.constants.items())
            label = f"{kernel.name}[{constants_text}]" if constants_text else kernel.name
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


def _unique_descriptions(builds: list):
    """Variant names must tell builds apart (``NAME_KERNEL_variant_name``, select() in
    Python): where a build reads like an earlier one (variants differing only in `when` or
    in their signature's hints), it gets its manifest variant index."""
    seen = set()
    for build in builds:
        if build.description in seen:
            build.description += f" #{build.variant.index}"
        seen.add(build.description)
