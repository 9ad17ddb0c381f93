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
from dataclasses import asdict, dataclass

from .errors import CompilationError
from .ir.kir import walk
from .ir.signature import Signature, runtime_parameter_names
from .options import CompileOptions
from .passes import axis_info
from .passes.assign_layouts import assign_layouts
from .passes.descriptors import lower_descriptors
from .passes.pipeline import MAX_PIPELINE_BYTES, pipeline_dot_loops, tma_loads
from .passes.prefetch import prefetch_dot_operands
from .targets import SHARED_BYTES_PER_BLOCK, has_ampere_mma, has_async_copy, has_wgmma

STAGES = ("kir", "gir", "llir", "ptx", "cubin")


@dataclass
class CompiledKernel:
    """Every stage of one compile, by name in pipeline order (``asm``), with what it was
    compiled for. ``asm["kir"]`` is the kir.Function (str() gives the listing), ``gir``
    the layouts chosen, for reading; ``cubin`` is bytes, the others text."""
    name: str
    asm: dict
    metadata: dict
    signature: Signature
    options: CompileOptions

    kir = property(lambda self: self.asm["kir"])
    gir = property(lambda self: self.asm["gir"])
    llir = property(lambda self: self.asm["llir"])
    ptx = property(lambda self: self.asm["ptx"])
    cubin = property(lambda self: self.asm["cubin"])

    def dump(self, directory: str) -> list[str]:
        """Writes every stage and the metadata to ``directory``; returns the paths written."""
        os.makedirs(directory, exist_ok=True)
        contents = [(stage, self.asm[stage]) for stage in STAGES]
        contents.append(("json", json.dumps(self.metadata, indent=2, sort_keys=True)))
        written = []
        for extension, content in contents:
            path = os.path.join(directory, f"{self.name}.{extension}")
            if isinstance(content, bytes):
                with open(path, "wb") as f:
                    f.write(content)
            else:
                with open(path, "w") as f:
                    f.write(str(content))
            written.append(path)
        return written


# What the 160 KB pipeline budget leaves of an A100 block: kept free on every target.
PIPELINE_RESERVE = SHARED_BYTES_PER_BLOCK["sm_80"] - MAX_PIPELINE_BYTES


def pipeline_budget(target: str) -> int:
    """The shared memory dot pipelines may take on ``target``: 160 KB, or less where the
    block limit minus ``PIPELINE_RESERVE`` is less (the 99 KB GPUs)."""
    limit = SHARED_BYTES_PER_BLOCK[target.rstrip("a")]
    return min(MAX_PIPELINE_BYTES, limit - PIPELINE_RESERVE)


def compile(kernel, signature, constants=None, num_warps=4, num_stages=3, target="sm_90",
            debug=None, tma=True, maxnreg=None, num_ctas=1, *,
            options: CompileOptions | None = None):
    """Compiles one specialization. ``signature``: text, a {param: entry} mapping or a
    ``Signature``. ``options`` replaces the keyword options, which must then be left out.
    ``tma=False`` keeps tensor-descriptor loads on pointer loads even where TMA could copy
    them (the JIT launcher's build for sizes a tensor map cannot describe)."""
    from .backend.lower import lower_to_llvm
    from .backend.ptx import emit_ptx
    from .backend.tma import grid_constant_params
    from .toolchain.ptxas import assemble

    keywords = dict(num_warps=num_warps, num_stages=num_stages, target=target, debug=debug,
                    tma=tma, maxnreg=maxnreg, num_ctas=num_ctas)
    if options is None:
        options = CompileOptions(**keywords)
    elif keywords != {k: v for k, v in asdict(CompileOptions()).items() if k in keywords}:
        raise TypeError("compile() takes options= or the keyword options, not both")
    num_warps, num_stages, target, tma = (options.num_warps, options.num_stages,
                                          options.target, options.tma)
    # A runtime parameter given in ``constants`` as None is not in the signature; one given
    # a HostDescriptorLayout is there as its base, shape and strides, and so is one the
    # signature writes as tensordesc<...>.
    signature = Signature.parse(signature, runtime_parameter_names(kernel.runtime_names,
                                                                   constants or {}), kernel.name)
    constants = {**(constants or {}), **dict(signature.descriptors)}
    function = kernel.kir(signature, constants=constants, debug=options.debug,
                          num_warps=num_warps, target=target)
    wgmma = has_wgmma(target)
    # Passes below may rewrite the kir; the memoized function stays as generated.
    function = copy.deepcopy(function)
    # Without cp.async (sm_75) no loop is pipelined through shared memory; the register
    # prefetch below still issues its dot's loads one trip early.
    pipelined = num_stages > 1 and has_async_copy(target)
    # Tensor-descriptor loads that feed a pipelined wgmma loop become TMA copies; every
    # other descriptor op becomes pointer loads and stores first.
    budget = pipeline_budget(target)
    tma_copied = tma_loads(function, num_warps, num_stages, wgmma, budget) \
        if pipelined and tma else set()
    lower_descriptors(function, keep=tma_copied)
    if num_stages > 1:
        if pipelined:
            pipeline_dot_loops(function, axis_info.analyze(function), num_warps, num_stages,
                               wgmma, budget)
        prefetch_dot_operands(function, num_warps)
    left = [op for op in walk(function.body) if op.opcode == "descriptor_load"]
    assert not left, "a TMA loop was not pipelined"
    infos = axis_info.analyze(function)
    plan = assign_layouts(function, infos, num_warps, wgmma, has_ampere_mma(target))
    arch = target + "a" if plan.uses_wgmma else target
    module, shared_bytes = lower_to_llvm(function, plan, infos, target)
    limit = SHARED_BYTES_PER_BLOCK[target]
    if shared_bytes > limit:
        source = kernel.source_info
        raise CompilationError(
            f"{function.name} needs {shared_bytes} bytes of shared memory, but a block on "
            f"{target} may use at most {limit}: use smaller blocks, fewer num_stages or "
            "num_warps, or leave this target out", source.filename, source.first_line)
    llvm_text = grid_constant_params(str(module), len(function.tensor_maps))
    llir, ptx = emit_ptx(llvm_text, arch, function.name, num_warps, options.maxnreg)
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
    stages = dict(zip(STAGES, (function, plan.listing(function), llir, ptx, cubin)))
    compiled = CompiledKernel(function.name, stages, metadata, signature, options)
    dump_dir = os.environ.get("AOTK_DUMP")
    if dump_dir:
        compiled.dump(dump_dir)
    return compiled
