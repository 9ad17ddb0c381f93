"""``aotk.compile``: one kernel, one signature -> kir, LLVM IR, PTX and a cubin.

The pipeline, one line per stage:
  kir     frontend: Python AST -> typed block SSA, specialized on types, hints, constexprs
  (desc)  passes.descriptors: tensor-descriptor loads and stores become pointer ones, except
          those a pipelined wgmma loop copies with TMA (passes.pipeline.tma_loads)
  (pipe)  passes.pipeline: with num_stages > 1, loads feeding a dot become cp.async (or TMA)
          copies num_stages - 1 trips ahead into shared memory; passes.prefetch: loops it
          could not pipeline get their dot's loads issued one trip early, in registers
  axis    passes.axis_info: contiguity / divisibility / constancy of every value
  gir     passes.assign_layouts: a distributed layout per value, vector width per memory op, and
          which tensor-core instruction computes each dot (wgmma on sm_90, else mma.sync)
  llir    backend.lower: registers per thread, predicated vector memory ops
  ptx     backend.ptx: llvmlite O3 + libdevice, NVPTX code generation
  cubin   toolchain.ptxas
A kernel that uses Hopper-only instructions (wgmma) is compiled for ``sm_90a``, the
arch-specific variant of sm_90: ``metadata["arch"]`` names what the PTX and cubin target.
Set ``AOTK_DUMP=DIR`` to write every stage of every compile to DIR.
"""
from __future__ import annotations

import copy
import json
import os
from dataclasses import dataclass, field

from .ir.types import HINTS_TEXT, SIGNATURE_HINTS, parse_type
from .ir.kir import walk
from .passes import axis_info
from .passes.assign_layouts import assign_layouts
from .passes.descriptors import lower_descriptors
from .passes.pipeline import pipeline_dot_loops, tma_loads
from .passes.prefetch import prefetch_dot_operands

SUPPORTED_TARGETS = ("sm_80", "sm_86", "sm_89", "sm_90")


@dataclass
class CompiledKernel:
    name: str
    kir: object          # kir.Function; str() gives the listing
    gir: str             # the layouts chosen, for reading
    llir: str
    ptx: str
    cubin: bytes
    metadata: dict = field(default_factory=dict)

    def dump(self, directory: str) -> list[str]:
        """Writes every stage to ``directory``; returns the paths written."""
        os.makedirs(directory, exist_ok=True)
        written = []
        for extension, content in (("kir", str(self.kir)), ("gir", self.gir),
                                   ("llir", self.llir), ("ptx", self.ptx), ("cubin", self.cubin),
                                   ("json", json.dumps(self.metadata, indent=2, sort_keys=True))):
            path = os.path.join(directory, f"{self.name}.{extension}")
            with open(path, "wb" if isinstance(content, bytes) else "w") as f:
                f.write(content)
            written.append(path)
        return written


def parse_signature(kernel, signature) -> tuple[dict, dict]:
    """``"*fp32:16, i32"`` or ``{param: "*fp32:16"}`` -> ({param: type}, {param: hint})."""
    names = kernel.runtime_names
    if isinstance(signature, dict):
        unknown = set(signature) - set(names)
        if unknown:
            raise ValueError(f"signature names {sorted(unknown)} which are not runtime "
                             f"parameters of {kernel.name} ({', '.join(names)})")
        items = [(n, signature[n]) for n in names if n in signature]
        missing = [n for n in names if n not in signature]
        if missing:
            raise ValueError(f"signature lacks a type for {', '.join(missing)}")
    else:
        parts = [p.strip() for p in str(signature).split(",") if p.strip()]
        if len(parts) != len(names):
            raise ValueError(f"signature has {len(parts)} entries but {kernel.name} has "
                             f"{len(names)} runtime parameters ({', '.join(names)})")
        items = list(zip(names, parts))
    types, hints = {}, {}
    for name, text in items:
        text = str(text).strip()
        type_text, _, hint_text = text.partition(":")
        types[name] = parse_type(type_text)
        if hint_text:
            hint = int(hint_text)
            if hint not in SIGNATURE_HINTS:
                raise ValueError(f"hint :{hint} on {name} is not supported ({HINTS_TEXT})")
            if hint == 1 and not types[name].is_int():
                raise ValueError(f"hint :1 needs an integer parameter, {name} is {types[name]}")
            if types[name].is_floating():
                raise ValueError(f"float parameter {name} cannot carry a hint")
            hints[name] = hint
    return types, hints


def target_has_async_copy(target: str) -> bool:
    """cp.async exists from sm_80 on."""
    return int(target[3:].rstrip("a")) >= 80


def target_has_wgmma(target: str) -> bool:
    """wgmma exists on sm_90 only, as the arch-specific target sm_90a (not on later GPUs)."""
    return target == "sm_90"


def compile(kernel, signature, constants=None, num_warps=4, num_stages=3, target="sm_90",
            debug=None, tma=True):
    """Compiles one specialization. ``tma=False`` keeps tensor-descriptor loads on pointer
    loads even where TMA could copy them (the JIT launcher's build for sizes a tensor map
    cannot describe)."""
    from .backend.lower import lower_to_llvm
    from .backend.ptx import emit_ptx
    from .backend.tma import grid_constant_params
    from .toolchain.ptxas import assemble

    if target not in SUPPORTED_TARGETS:
        raise ValueError(f"unsupported target {target!r}; expected one of {', '.join(SUPPORTED_TARGETS)}")
    if num_warps < 1 or num_warps & (num_warps - 1) or num_warps > 32:
        raise ValueError(f"num_warps must be a power of two from 1 to 32, got {num_warps}")
    types, hints = parse_signature(kernel, signature)
    function = kernel.kir(types, hints, constants or {}, debug)
    wgmma = target_has_wgmma(target)
    # Passes below may rewrite the kir; the memoized function stays as generated.
    function = copy.deepcopy(function)
    pipelined = num_stages > 1 and target_has_async_copy(target)
    # Tensor-descriptor loads that feed a pipelined wgmma loop become TMA copies; every
    # other descriptor op becomes pointer loads and stores first.
    tma_copied = tma_loads(function, num_warps, num_stages, wgmma) if pipelined and tma \
        else set()
    lower_descriptors(function, keep=tma_copied)
    if num_stages > 1:
        if pipelined:
            pipeline_dot_loops(function, axis_info.analyze(function), num_warps, num_stages,
                               wgmma)
        prefetch_dot_operands(function, num_warps)
    left = [op for op in walk(function.body) if op.opcode == "descriptor_load"]
    assert not left, "a TMA loop was not pipelined"
    infos = axis_info.analyze(function)
    plan = assign_layouts(function, infos, num_warps, wgmma)
    arch = target + "a" if plan.uses_wgmma else target
    module, shared_bytes = lower_to_llvm(function, plan, infos, target)
    llvm_text = grid_constant_params(str(module), len(function.tensor_maps))
    llir, ptx = emit_ptx(llvm_text, arch, function.name, num_warps)
    cubin, ptxas_info = assemble(ptx, arch)
    vector_widths = sorted({w for w in plan.vector_width.values()})
    metadata = {
        "name": function.name, "target": target, "arch": arch, "num_warps": num_warps,
        "num_stages": num_stages, "shared": int(shared_bytes),
        "registers": ptxas_info.get("registers"), "spills": ptxas_info.get("spills"),
        "wgmma_serialized": ptxas_info.get("wgmma_serialized", False),
        "vector_widths": vector_widths,
        # Passed after the params, encoded by the launcher (cuTensorMapEncodeTiled).
        "tensor_maps": [recipe.to_json() for recipe in function.tensor_maps],
    }
    compiled = CompiledKernel(function.name, function, plan.listing(function), llir, ptx, cubin,
                              metadata)
    dump_dir = os.environ.get("AOTK_DUMP")
    if dump_dir:
        compiled.dump(dump_dir)
    return compiled
