"""LLVM IR -> optimized LLVM IR -> PTX, through llvmlite's NVPTX target.

In: the llvmlite module from ``backend.lower``, the target arch, ``num_warps``. Out: the
optimized LLVM IR text and the PTX text. libdevice is linked only when the kernel calls a
``__nv_*`` function, and only what those functions need: the O3 pipeline simplifies every
function of a module before it drops the unused ones, so the whole of libdevice (575
functions) cost 40 ms of O3 per kernel. Each process reduces libdevice to the functions a
set of ``__nv_*`` names needs once, and links that.
``nvvm.reqntid`` tells ptxas the exact CTA size, as Triton's ``.reqntid`` does.
"""
from __future__ import annotations

import functools
import re

import llvmlite.binding as llvm

TRIPLE = "nvptx64-nvidia-cuda"
# The PTX ISA a target's PTX declares: 8.0 (ptxas from CUDA 12.0 on) from Turing up to
# Hopper; the first versions that know Blackwell for it (CUDA 12.8). A kernel whose inline
# PTX needs a newer ISA declares that one (VECTOR_ATOM: sm_90's vector atom adds, 8.1).
PTX_FEATURES = {"sm_100": "+ptx86", "sm_120": "+ptx87"}
DEFAULT_PTX_FEATURES = "+ptx80"
# Its literal first: with a leading \b (or a lookbehind) Python's re tried every position
# of the module's text, 9 ms of a 128x256 matmul's 285 KB; the word boundary before it is
# checked on the matches instead (0.2 ms).
VECTOR_ATOM = re.compile(r"atom\.[\w.:]*\.v[248]\.b?f(16|32)\b")


@functools.lru_cache(maxsize=None)
def _initialize():
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    # Address arithmetic as Triton's (it sets the same option): an i32 offset scaled onto
    # a 64-bit base is one mad.wide.s32/u32, not mul.wide then add.s64, after which ptxas
    # kept more registers (liger, ptxas 13: 32 -> 15 of 138 sm_90 builds over Triton by
    # 10%). The option is process-wide, given once, and exists from LLVM 22 (off there by
    # default); an unknown option would end the process.
    if llvm.llvm_version_info >= (22,):
        llvm.set_option("aotk", "-nvptx-mad-wide-opt")
    # Shared, constant and local pointers are 32-bit, as in Triton's data layout
    # (p3:32:32...): one register per shared address, not a 64-bit pair (liger's
    # neighborhood attention av kernel on sm_90: 56 -> 46 registers, Triton 48).
    llvm.set_option("aotk", "-nvptx-short-ptr")
    return True


@functools.lru_cache(maxsize=None)
def target_machine(arch: str, features: str | None = None):
    _initialize()
    target = llvm.Target.from_triple(TRIPLE)
    features = features or PTX_FEATURES.get(arch.rstrip("a"), DEFAULT_PTX_FEATURES)
    return target.create_target_machine(cpu=arch, features=features, opt=3)


def ptx_features(arch: str, module_text: str) -> str:
    """The PTX ISA the kernel's PTX declares: the target's, or 8.1 where its inline PTX has
    a vector atom (sm_90 only; later targets' ISAs are newer already)."""
    features = PTX_FEATURES.get(arch.rstrip("a"), DEFAULT_PTX_FEATURES)
    if features == DEFAULT_PTX_FEATURES and _has_vector_atom(module_text):
        return "+ptx81"
    return features


def _has_vector_atom(text: str) -> bool:
    return any(match.start() == 0 or not (text[match.start() - 1].isalnum()
                                          or text[match.start() - 1] == "_")
               for match in VECTOR_ATOM.finditer(text))


@functools.lru_cache(maxsize=1)
def _libdevice_bitcode() -> bytes:
    from ..toolchain.libdevice import find_libdevice
    with open(find_libdevice(), "rb") as f:
        return f.read()


def _drop_unused_functions(module, target_machine_) -> None:
    """GlobalDCE alone: removes the internal functions and globals nothing references."""
    passes = llvm.create_new_module_pass_manager()
    passes.add_global_dead_code_eliminate_pass()
    passes.run(module, llvm.create_pass_builder(
        target_machine_, llvm.create_pipeline_tuning_options(speed_level=0)))


_FLOAT_ARITHMETIC = re.compile(r"= (fadd|fsub|fmul) (?!contract)")


@functools.lru_cache(maxsize=64)
def _libdevice_for(names: frozenset, arch: str, contract: bool = True) -> bytes:
    """libdevice's bitcode reduced to the functions ``names`` and what they call: every
    other function internalized, then dropped. With ``contract`` (the kernel's
    enable_fp_fusion), its float adds, subtractions and products may contract into FMAs, as
    the kernel's own do: Triton fuses libdevice's as well (its whole module is compiled
    with FP-op fusion), so ptxas sees mul.f32, not mul.rn.f32, inside them."""
    tm = target_machine(arch)
    library = llvm.parse_bitcode(_libdevice_bitcode())
    library.triple = TRIPLE
    library.data_layout = str(tm.target_data)
    for function in library.functions:
        if not function.is_declaration and function.name not in names:
            function.linkage = "internal"
    _drop_unused_functions(library, tm)
    if contract:
        library = llvm.parse_assembly(_FLOAT_ARITHMETIC.sub(r"= \1 contract ", str(library)))
    return library.as_bitcode()


# What libdevice's functions are called; the lowering declares those it calls.
LIBDEVICE_PREFIX = "__nv_"
_LIBDEVICE_REFERENCE = re.compile(r'@"?' + LIBDEVICE_PREFIX)


def uses_libdevice(module_text: str) -> bool:
    """Does the lowered module call libdevice (which ``optimize`` links in for its arch)?"""
    return _LIBDEVICE_REFERENCE.search(module_text) is not None


def llvm_version() -> str:
    return ".".join(map(str, llvm.llvm_version_info))


def _with_block_size(text: str, kernel_name: str, threads: int, maxnreg=None) -> str:
    """Tags the kernel definition with its CTA size and, when given, the most registers a
    thread may use (``.maxnreg``; llvmlite.ir has no string attributes)."""
    pattern = re.compile(r'^(define ptx_kernel void @"?' + re.escape(kernel_name) + r'"?\(.*\))',
                         re.MULTILINE)
    text, count = pattern.subn(r"\1 #0", text, count=1)
    if count != 1:
        raise AssertionError("kernel definition not found in the LLVM module")
    # The exact CTA size (.reqntid) and nothing about CTAs per SM, as Triton: with
    # .minnctapersm 1 beside it, ptxas 13 took every register one CTA could have and
    # hoisted liger's mhc_pre loads of all four unrolled steps (186 registers, 110 without,
    # Triton 64); matmul and attention compile the same or better without it.
    registers = f' "nvvm.maxnreg"="{maxnreg}"' if maxnreg else ""
    # libdevice's __nvvm_reflect("__CUDA_FTZ") reads 1, as in Triton (its enable_reflect_ftz,
    # on by default): fp32 math through libdevice flushes denormals as Triton's does.
    return text + (f'\nattributes #0 = {{ "nvvm.reqntid"="{threads}"{registers} }}\n'
                   '!llvm.module.flags = !{!900}\n!900 = !{i32 4, !"nvvm-reflect-ftz", i32 1}\n')


def optimize(module_text: str, arch: str, kernel_name: str, num_warps: int, maxnreg=None,
             contract: bool = True):
    """Returns the optimized llvmlite binding module. ``contract``: libdevice's float
    arithmetic may contract into FMAs (the kernel's enable_fp_fusion)."""
    tm = target_machine(arch)
    # A context of its own, freed with the module: LLVM keeps a context's types, constants
    # and inline asm for the context's life, so in the global one every compile's stayed,
    # and a named struct type came back renamed (%floatx128.7) in later compiles' LLVM IR.
    context = llvm.create_context()
    module = llvm.parse_assembly(_with_block_size(module_text, kernel_name, num_warps * 32,
                                                  maxnreg), context)
    module.triple = TRIPLE
    module.data_layout = str(tm.target_data)
    module.verify()
    needed = frozenset(f.name for f in module.functions
                       if f.is_declaration and f.name.startswith(LIBDEVICE_PREFIX))
    if needed:
        module.link_in(llvm.parse_bitcode(_libdevice_for(needed, arch, contract), context))
        for function in module.functions:
            if not function.is_declaration and function.name != kernel_name:
                function.linkage = "internal"
        _drop_unused_functions(module, tm)
    options = llvm.create_pipeline_tuning_options(speed_level=3)
    builder = llvm.create_pass_builder(tm, options)
    builder.getModulePassManager().run(module, builder)
    return module


def emit_ptx(module_text: str, arch: str, kernel_name: str, num_warps: int,
             maxnreg=None, contract: bool = True) -> tuple[str, str]:
    module = optimize(module_text, arch, kernel_name, num_warps, maxnreg, contract)
    machine = target_machine(arch, ptx_features(arch, module_text))
    return str(module), machine.emit_assembly(module)
