"""The same build compiled by the installed Triton, for ``aotk inspect --triton``: how many
registers and spill bytes Triton's code needs for the kernel and configuration aotk built.

In: a kernel source file written against Triton's API (``import triton``; a file written for
aotk cannot be compiled by Triton), the function name, the build's ``Signature``,
constants, num_warps, num_stages and target. Out: ``{"registers": N, "spills": bytes}``
from the same ptxas aotk uses, run on Triton's PTX, or a ``TritonSideError`` saying why
there is no number. Triton compiles without a GPU (``triton.compile`` on an ``ASTSource``
for a ``GPUTarget``). Hints carry over as Triton's own specialization would: ``:16`` is
``tt.divisibility`` 16, ``:1`` a constexpr 1; ``:2`` .. ``:8`` have no Triton spelling and are
dropped (Triton's number is then for the less specialized kernel). A host tensor descriptor
(``HostDescriptorLayout``) is Triton's ``tensordesc<...>`` of that block shape.
"""
from __future__ import annotations

import importlib.util
import re
from pathlib import Path


class TritonSideError(Exception):
    """No Triton number for a build: the message says why in a few words."""


_modules: dict = {}


def load_triton_function(source: Path, function: str):
    """The ``@triton.jit`` function ``function`` of ``source``, imported with the real
    triton."""
    key = (str(source), function)
    if key not in _modules:
        if importlib.util.find_spec("triton") is None:
            raise TritonSideError("triton is not installed")
        text = Path(source).read_text()
        if not re.search(r"^\s*(import triton|from triton)", text, re.MULTILINE):
            raise TritonSideError("the source is written for aotk, not Triton")
        spec = importlib.util.spec_from_file_location(
            f"aotk_triton_side_{abs(hash(str(source)))}", source)
        module = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(module)
        except Exception as exc:  # noqa: BLE001 - the user's file, imported by Triton
            raise TritonSideError(f"Triton cannot import it: {type(exc).__name__}") from None
        fn = getattr(module, function, None)
        fn = getattr(fn, "fn", fn) if not hasattr(fn, "arg_names") else fn
        if not hasattr(fn, "arg_names"):
            raise TritonSideError(f"{function} is not a @triton.jit function")
        _modules[key] = fn
    return _modules[key]


def _as_triton(value):
    """A constexpr value as Triton takes it: aotk's dtypes become Triton's of that name."""
    from ..ir.types import DType
    if isinstance(value, DType):
        import triton.language as tl
        return getattr(tl, value.name)
    return value


def triton_resources(fn, signature, constants: dict, num_warps: int, num_stages: int,
                     target: str) -> dict:
    """{"registers", "spills"} of Triton's build of the Triton function ``fn`` for the same
    specialization."""
    from ..toolchain.ptxas import assemble
    ptx = triton_compile(fn, signature, constants, num_warps, num_stages, target).asm["ptx"]
    arch = re.search(r"^\.target\s+(sm_\w+)", ptx, re.MULTILINE).group(1)
    _, info = assemble(ptx, arch)
    return {"registers": info.get("registers"), "spills": info.get("spills")}


def triton_compile(fn, signature, constants: dict, num_warps: int, num_stages: int,
                   target: str):
    """Triton's ``CompiledKernel`` of the Triton function ``fn`` for the specialization
    aotk builds (``triton.compile``: through its cache, unless TRITON_ALWAYS_COMPILE=1)."""
    from ..ir.signature import HostDescriptorLayout
    # A host-built tensor descriptor is one parameter of Triton's, ``tensordesc<fp32[64,
    # 64]>``, where aotk's signature spells its base, shapes and strides.
    descriptors = {name: layout for name, layout in signature.descriptors}
    descriptors.update({name: value for name, value in constants.items()
                        if isinstance(value, HostDescriptorLayout)})
    if any(layout.padding != "zero" for layout in descriptors.values()):
        raise TritonSideError("a descriptor padded with NaN is not compared")
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from triton.runtime.autotuner import Autotuner, Heuristics
    while isinstance(fn, (Autotuner, Heuristics)):   # the kernel under the decorators
        fn = fn.fn
    types, constexprs, attrs = {}, {}, {}
    parameters = {p.name: p for p in signature.parameters}
    for index, name in enumerate(fn.arg_names):
        if name in descriptors:
            base = parameters[f"{name}_base"].type.element_ty.short
            shape = ", ".join(str(size) for size in descriptors[name].block_shape)
            types[name] = f"tensordesc<{base}[{shape}]>"
        elif name in parameters:
            parameter = parameters[name]
            if parameter.hint == 1:
                types[name], constexprs[name] = "constexpr", 1
                continue
            types[name] = parameter.type.short if not parameter.type.is_ptr() else \
                "*" + parameter.type.element_ty.short
            if parameter.hint == 16:
                attrs[(index,)] = [["tt.divisibility", 16]]
        else:
            types[name], constexprs[name] = "constexpr", _as_triton(constants.get(name))
    try:
        return triton.compile(ASTSource(fn, types, constexprs, attrs),
                              target=GPUTarget("cuda", int(target[3:]), 32),
                              options={"num_warps": num_warps, "num_stages": num_stages})
    except Exception as exc:  # noqa: BLE001 - Triton's own failure, reported in the table
        first = (str(exc).strip().splitlines() or [""])[-1][:80]
        raise TritonSideError(f"Triton cannot compile it: {type(exc).__name__}: {first}") \
            from None
