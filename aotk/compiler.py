"""``aotk.compile``: one kernel, one signature -> kir, LLVM IR, PTX and a cubin.

The pipeline, one line per stage:
  kir     frontend: Python AST -> typed block SSA, specialized on types, hints, constexprs
  (acc)   passes.dot_accumulate: d + dot(a, b, 0) becomes dot(a, b, d), as Triton folds it
  (loop)  passes.loop_invariant: one-trip loops folded; loads that every trip of a loop
          without writes repeats moved before it
  (desc)  passes.descriptors: tensor-descriptor loads and stores become pointer ones, except
          those a pipelined wgmma loop copies with TMA (passes.pipeline.tma_loads)
  (pipe)  passes.pipeline: with num_stages > 1, loads feeding a dot become cp.async (or TMA)
          copies num_stages - 1 trips ahead into shared memory, whose stages may take the
          whole block unless the kernel then needs more than it has (then the stages keep
          PIPELINE_RESERVE free); passes.prefetch: loops it could not pipeline get their
          dot's loads issued one trip early, in registers
  axis    passes.axis_info: contiguity / divisibility / constancy of every value
  gir     passes.assign_layouts: a distributed layout per value, vector width per memory op, and
          which tensor-core instruction computes each dot (wgmma on sm_90, else mma.sync)
  lowered backend.lower: LLVM IR, registers per thread, predicated vector memory ops
  llir    backend.ptx: that IR after libdevice linking and O3
  ptx     backend.ptx: NVPTX code generation
  cubin   toolchain.ptxas
A kernel that uses Hopper-only instructions (wgmma) is compiled for ``sm_90a``, the
arch-specific variant of sm_90: ``metadata["arch"]`` names what the PTX and cubin target.
Set ``AOTK_DUMP=DIR`` to write every stage of every compile to DIR.
"""
from __future__ import annotations

import contextlib
import gc
import json
import os
from dataclasses import asdict, dataclass, replace

from .errors import CompilationError
from .ir.kir import DESCRIPTOR_OPS, clone_function, walk
from .ir.signature import Signature, runtime_parameter_names
from .options import CompileOptions
from .passes import axis_info
from .passes.assign_layouts import assign_layouts
from .passes.descriptors import lower_descriptors
from .passes.dot_accumulate import fold_dot_accumulators
from .passes.pipeline import pipeline_dot_loops, tma_loads
from .passes.pipeline_shape import MAX_PIPELINE_BYTES
from .passes.loop_invariant import hoist_loop_invariants
from .passes.next_trip_prefetch import prefetch_next_trip
from .passes.prefetch import prefetch_dot_operands
from .passes.tma_stores import tma_store_candidates, tma_stores
from .passes.unused_results import drop_unused_if_results
from .targets import (SHARED_BYTES_PER_BLOCK, capability, has_ampere_mma, has_async_copy,
                      has_wgmma)

STAGES = ("kir", "gir", "lowered", "llir", "ptx", "cubin")


@dataclass
class CompiledKernel:
    """Every stage of one compile, by name in pipeline order (``asm``), with what it was
    compiled for. ``asm["kir"]`` is the kir.Function (str() gives the listing), ``gir``
    the layouts chosen, for reading; ``lowered`` the LLVM IR as the backend wrote it,
    ``llir`` the same after LLVM's optimization; ``cubin`` is bytes, the others text."""
    name: str
    asm: dict
    metadata: dict
    signature: Signature
    options: CompileOptions

    kir = property(lambda self: self.asm["kir"])
    gir = property(lambda self: self.asm["gir"])
    lowered = property(lambda self: self.asm["lowered"])
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


# What the 160 KB pipeline budget leaves of an A100 block: kept free for the shared memory
# a loop's body may need besides its stages (layout conversions, reductions), when the
# stages alone would not leave room for it.
PIPELINE_RESERVE = SHARED_BYTES_PER_BLOCK["sm_80"] - MAX_PIPELINE_BYTES


def pipeline_budget(target: str) -> int:
    """The shared memory dot pipelines may take on ``target`` while keeping the reserve:
    160 KB, or less where the block limit minus ``PIPELINE_RESERVE`` is less (the 99 KB
    GPUs)."""
    limit = SHARED_BYTES_PER_BLOCK[target.rstrip("a")]
    return min(MAX_PIPELINE_BYTES, limit - PIPELINE_RESERVE)


def whole_block_budget(target: str) -> int:
    """The shared memory dot pipelines may take on ``target`` when nothing else needs any
    while their stages are live: the whole block. The stages' bytes (``passes.pipeline``)
    already count their alignment and TMA mbarriers, and what runs after a loop reuses
    its stages' bytes (its drain comes first), so only the loop body's other users can
    push the kernel past the block limit: ``compile`` then retries with ``pipeline_budget``."""
    return SHARED_BYTES_PER_BLOCK[target.rstrip("a")]


@dataclass
class _Lowered:
    """One run of the passes and the backend over a copy of the kir."""
    function: object       # the rewritten kir.Function
    plan: object           # its LayoutPlan
    module: object         # the llvmlite module
    shared_bytes: int
    fits: bool             # within the block limit, layout conversions padded
    stage_bytes: int       # the most any pipelined loop's stages (and mbarriers) take


def _lower(generated, kernel_options: CompileOptions, target: str, budget: int) -> _Lowered:
    """The passes and the backend over a copy of ``generated`` (the memoized kir stays as
    it is), the dot pipelines' stages taking at most ``budget`` bytes."""
    from .backend.lower import lower_to_llvm
    from .backend.pipeline import plan_buffers

    num_warps, num_stages = kernel_options.num_warps, kernel_options.num_stages
    wgmma = has_wgmma(target)
    function = clone_function(generated)
    drop_unused_if_results(function)
    fold_dot_accumulators(function)
    hoist_loop_invariants(function)
    # Without cp.async (sm_75) no loop is pipelined through shared memory; the register
    # prefetch below still issues its dot's loads one trip early.
    pipelined = num_stages > 1 and has_async_copy(target)
    # Tensor-descriptor loads that feed a pipelined wgmma loop become TMA copies; every
    # other descriptor op becomes pointer loads and stores first.
    # Both read the unrewritten kir's axis info (one analysis, where descriptors exist).
    descriptors = wgmma and kernel_options.tma and \
        any(op.opcode in DESCRIPTOR_OPS for op in walk(function.body))
    before = axis_info.analyze(function) if descriptors else None
    tma_copied = tma_loads(function, num_warps, num_stages, wgmma, budget, before) \
        if pipelined and descriptors else set()
    # Descriptor stores with a tensor map are TMA stores from shared memory (sm_90 on).
    tma_stored = tma_store_candidates(function, before) if descriptors else set()
    lower_descriptors(function, keep=tma_copied | tma_stored)
    if num_stages > 1:
        if pipelined:
            # num_ctas=2: the producer warps of a pair of programs share the TMA tiles
            # both copy (``passes.multicast``; warp-specialized loops only).
            pipeline_dot_loops(function, axis_info.analyze(function), num_warps, num_stages,
                               wgmma, budget, multicast=wgmma and kernel_options.num_ctas == 2)
        prefetch_dot_operands(function, num_warps)
        prefetch_next_trip(function, num_warps)
    tma_stores(function, tma_stored)
    left = [op for op in walk(function.body) if op.opcode == "descriptor_load"]
    assert not left, "a TMA loop was not pipelined"
    infos = axis_info.analyze(function)
    plan = assign_layouts(function, infos, num_warps, wgmma, has_ampere_mma(target))
    module, shared_bytes, padded = lower_to_llvm(function, plan, infos, target,
                                                 kernel_options.enable_fp_fusion)
    fits = shared_bytes <= SHARED_BYTES_PER_BLOCK[target] and padded
    stage_bytes = max(plan_buffers(function).loop_bytes.values(), default=0)
    return _Lowered(function, plan, module, shared_bytes, fits, stage_bytes)


# LLVM module text (with what else shapes its code) -> (llir, ptx, cubin, ptxas info), the
# last few this process produced. Specializations that lower to the same module share them:
# an autotuner's num_stages=3 config whose stages did not fit and came down to 2 is its
# num_stages=2 config (liger's fused MLP: 16 of its 32 configs), and LLVM and ptxas are most
# of a compile.
_MACHINE_CODE: dict = {}
MACHINE_CODE_ENTRIES = 32


def forget_machine_code() -> None:
    """Empties the memo: the next compile of any module runs LLVM and ptxas (what a
    benchmark of cold compiles needs)."""
    _MACHINE_CODE.clear()


def _machine_code(llvm_text: str, arch: str, name: str, num_warps: int, maxnreg,
                  fp_fusion: bool) -> tuple:
    from .backend.ptx import emit_ptx
    from .toolchain.ptxas import assemble_with_register_room
    # fp_fusion: a module without float arithmetic of its own reads the same either way,
    # but the libdevice functions it calls contract only with it.
    key = (llvm_text, arch, name, num_warps, maxnreg, fp_fusion)
    found = _MACHINE_CODE.get(key)
    if found is None:
        llir, ptx = emit_ptx(llvm_text, arch, name, num_warps, maxnreg, fp_fusion)
        ptx, cubin, info = assemble_with_register_room(ptx, arch)
        if len(_MACHINE_CODE) >= MACHINE_CODE_ENTRIES:
            _MACHINE_CODE.pop(next(iter(_MACHINE_CODE)))   # the oldest
        found = _MACHINE_CODE[key] = (llir, ptx, cubin, info)
    llir, ptx, cubin, info = found
    return llir, ptx, cubin, dict(info)


def shares_ptx(older: CompiledKernel, llvm_text: str, options: CompileOptions) -> bool:
    """May a compile with these options, lowered to ``llvm_text``, take ``older``'s PTX?

    Where the lowered IR is the same, the newer target uses no instruction of its own
    (wgmma, TMA and sm_90's vector atoms lower differently), so the older target's PTX,
    which every newer GPU runs, is this one's: as with nvcc's
    ``-gencode arch=compute_80,code=[sm_80,sm_90]``, LLVM runs once and ptxas once per
    target. Not where the module calls libdevice: that IR is not the same for every target
    (its __nvvm_reflect("__CUDA_ARCH") branches pick code per arch). Not from an
    arch-specific target (sm_90a), whose PTX no other GPU runs.

    What LLVM would choose otherwise for the newer target alone, over the 1,073 modules
    that the codegen and liger tests compile for sm_80 or sm_90, each given to LLVM for
    both: the two PTX differ beyond the .target line in 15, 6 that call libdevice and 9
    where sm_90's has add.bf16 or mul.bf16 and sm_80's fma.rn.bf16 with a 1.0 factor or a
    -0 addend, the same bits. The example library's 38 builds of same IR: the sm_90 SASS
    of the sm_80 PTX is, instruction for instruction, that of LLVM's own sm_90 PTX.
    """
    from .backend.ptx import uses_libdevice
    older_target = older.options.target
    return (older.lowered == llvm_text
            and older.options == replace(options, target=older_target)
            and capability(older_target) < capability(options.target)
            and not older.metadata["ptx_arch"].endswith("a")
            and not uses_libdevice(llvm_text))


def compile(kernel, signature, constants=None, num_warps=4, num_stages=3, target="sm_90",
            debug=None, tma=True, maxnreg=None, num_ctas=1, enable_fp_fusion=True, *,
            options: CompileOptions | None = None, older: CompiledKernel | None = None):
    """Compiles one specialization. ``signature``: text, a {param: entry} mapping or a
    ``Signature``. ``options`` replaces the keyword options, which must then be left out.
    ``tma=False`` keeps tensor-descriptor loads on pointer loads even where TMA could copy
    them (the JIT launcher's build for sizes a tensor map cannot describe).
    ``older``: this specialization compiled for an older target (a library built for
    several); where this target's lowered LLVM IR is the same, ptxas assembles that PTX
    for this target and LLVM does not run again (``shares_ptx``); ``metadata["ptx_arch"]``
    says whose PTX a cubin came from."""
    with _cyclic_collection_paused():
        return _compile(kernel, signature, constants, num_warps, num_stages, target, debug,
                        tma, maxnreg, num_ctas, enable_fp_fusion, options, older)


@contextlib.contextmanager
def _cyclic_collection_paused():
    """Python's cyclic collector off for one compile, back on after (unless it was off).
    A compile allocates some 100,000 short-lived objects, llvmlite's IR above all, whose
    parent links make cycles: the collector ran about 50 times inside a matmul compile, for
    74 of its 559 ms outside ptxas (bench/compile_speed.py's 128x256 case), and found
    little to free before the compile ended. Paused, it runs once after the compile and
    frees what the compile left: 41 ms."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _compile(kernel, signature, constants, num_warps, num_stages, target, debug, tma,
             maxnreg, num_ctas, enable_fp_fusion, options, older):
    from .backend.tma import grid_constant_params
    from .toolchain.ptxas import assemble_with_register_room

    keywords = dict(num_warps=num_warps, num_stages=num_stages, target=target, debug=debug,
                    tma=tma, maxnreg=maxnreg, num_ctas=num_ctas,
                    enable_fp_fusion=enable_fp_fusion)
    if options is None:
        options = CompileOptions(**keywords)
    elif keywords != {k: v for k, v in asdict(CompileOptions()).items() if k in keywords}:
        raise TypeError("compile() takes options= or the keyword options, not both")
    num_warps, num_stages, target = options.num_warps, options.num_stages, options.target
    # A runtime parameter given in ``constants`` as None is not in the signature; one given
    # a HostDescriptorLayout is there as its base, shape and strides, and so is one the
    # signature writes as tensordesc<...>.
    signature = Signature.parse(signature, runtime_parameter_names(kernel.runtime_names,
                                                                   constants or {}), kernel.name)
    constants = {**(constants or {}), **dict(signature.descriptors)}
    generated = kernel.kir(signature, constants=constants, debug=options.debug,
                           num_warps=num_warps, target=target)
    # The stages may take the whole block. Where that leaves too little for the loop body's
    # other shared memory (or only unpadded conversions fit), the stages keep the reserve
    # instead: a second run, only when the first used more than the reserved budget.
    lowered = _lower(generated, options, target, whole_block_budget(target))
    if not lowered.fits and lowered.stage_bytes > pipeline_budget(target):
        lowered = _lower(generated, options, target, pipeline_budget(target))
    limit = SHARED_BYTES_PER_BLOCK[target]
    if lowered.shared_bytes > limit and lowered.stage_bytes:
        # The body needs more than the reserve beside the stages (its dots store operands
        # that the loop copies ahead as plain tiles): the stages give up the difference,
        # down to none (the loop then runs unpipelined).
        over = lowered.shared_bytes - limit
        lowered = _lower(generated, options, target, max(0, lowered.stage_bytes - over))
    function, plan, shared_bytes = lowered.function, lowered.plan, lowered.shared_bytes
    arch = target + "a" if plan.uses_wgmma else target
    if shared_bytes > limit:
        source = kernel.source_info
        raise CompilationError(
            f"{function.name} needs {shared_bytes} bytes of shared memory, but a block on "
            f"{target} may use at most {limit}: use smaller blocks, fewer num_stages or "
            "num_warps, or leave this target out", source.filename, source.first_line)
    llvm_text = grid_constant_params(str(lowered.module), len(function.tensor_maps))
    # A producer warp (``passes.warp_specialize``) runs beside the num_warps compute warps.
    producer_warps = int(any(op.opcode == "producer_warp" for op in walk(function.body)))
    # Programs that compare their tiles with a partner's (``passes.multicast``) launch in
    # clusters of two where the grid's x is even; alone, they share nothing.
    cluster = 2 if any(op.opcode == "cluster_pair" for op in walk(function.body)) else 1
    if older is not None and shares_ptx(older, llvm_text, options):
        llir, ptx_arch = older.llir, older.metadata["ptx_arch"]
        ptx, cubin, ptxas_info = assemble_with_register_room(older.ptx, arch)
    else:
        ptx_arch = arch
        llir, ptx, cubin, ptxas_info = _machine_code(llvm_text, arch, function.name,
                                                     num_warps + producer_warps,
                                                     options.maxnreg,
                                                     options.enable_fp_fusion)
    vector_widths = sorted({w for w in plan.vector_width.values()})
    metadata = {
        "name": function.name, "target": target, "arch": arch, "ptx_arch": ptx_arch,
        "num_warps": num_warps,
        "threads": 32 * (num_warps + producer_warps),
        "cluster": cluster,
        "num_stages": num_stages, "shared": int(shared_bytes),
        "registers": ptxas_info.get("registers"), "spills": ptxas_info.get("spills"),
        "wgmma_serialized": ptxas_info.get("wgmma_serialized", False),
        "vector_widths": vector_widths,
        # Passed after the params, encoded by the launcher (cuTensorMapEncodeTiled).
        "tensor_maps": [recipe.to_json() for recipe in function.tensor_maps],
    }
    stages = dict(zip(STAGES, (function, plan.listing(function), llvm_text, llir, ptx, cubin)))
    compiled = CompiledKernel(function.name, stages, metadata, signature, options)
    dump_dir = os.environ.get("AOTK_DUMP")
    if dump_dir:
        compiled.dump(dump_dir)
    return compiled
