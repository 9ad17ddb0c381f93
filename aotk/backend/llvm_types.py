"""kir element types -> llvmlite IR types (bfloat included, which llvmlite lacks), and the
small IR-building helpers every op family uses (constants, declared functions, inline asm)."""
from __future__ import annotations

import re
import struct

import llvmlite.ir as ir
from llvmlite.ir.instructions import CallInstrAttributes
from llvmlite.ir.types import _BaseFloatType

from ..ir import float8


class BFloatType(_BaseFloatType):
    """LLVM's ``bfloat``; constants print as ``0xRXXXX`` (the top half of an fp32)."""
    null = "0xR0000"
    intrinsic_name = "bf16"

    def __str__(self):
        return "bfloat"

    def format_constant(self, value):
        return "0xR%04X" % float_to_bf16_bits(float(value))


BFloatType._create_instance()


def float_to_bf16_bits(value: float) -> int:
    bits = struct.unpack("<I", struct.pack("<f", value))[0]
    if value != value:
        return 0x7FC0
    # Round to nearest even on the dropped 16 bits.
    bits += 0x7FFF + ((bits >> 16) & 1)
    return (bits >> 16) & 0xFFFF


I1, I8, I16, I32, I64 = (ir.IntType(n) for n in (1, 8, 16, 32, 64))


def llvm_type(element) -> ir.Type:
    if element.is_ptr():
        return I64   # addresses travel as integers; memory ops turn them into PTX operands
    if element.is_fp8():
        return I8    # its code: only casts look inside (backend.float8)
    if element.is_floating():
        return {16: BFloatType() if element.is_bf16() else ir.HalfType(), 32: ir.FloatType(),
                64: ir.DoubleType()}[element.bits]
    return ir.IntType(element.bits)


def constant(element, value) -> ir.Constant:
    """``value`` as an LLVM constant of ``element``'s register type (integers wrap)."""
    ty = llvm_type(element)
    if element.is_fp8():
        return ir.Constant(ty, float8.encode(element.float8_format, float(value)))
    if element.is_floating():
        return ir.Constant(ty, float(value))
    if element.is_bool():
        return ir.Constant(I1, int(bool(value)))
    if element.is_ptr():
        return ir.Constant(ty, int(value))
    return ir.Constant(ty, int(value) & ((1 << element.bits) - 1))


def declare_function(module, name: str, return_type, argument_types):
    """The module's function ``name``, declared on first use."""
    function = module.globals.get(name)
    if function is None:
        function = ir.Function(module, ir.FunctionType(return_type, argument_types), name=name)
    return function


class _CallAttributes(CallInstrAttributes):
    """A call site's attributes, ``willreturn`` included (llvmlite's list lacks it)."""
    _known = CallInstrAttributes._known | frozenset(("willreturn",))


def returns(call):
    """Marks an inline-asm ``call`` with side effects (a global load, store or atomic) as one
    that returns and throws nothing, which PTX memory instructions do. LLVM cannot know it of
    an asm: without the mark, nothing after such a call in a loop body is sure to run, so
    LICM keeps a loop-invariant pure asm after it (fp32 ``div.full``, ``1.0 / n`` in liger's
    jsd) inside the loop, where Triton computes it once before. The asm keeps its side
    effects: LLVM neither drops it nor reorders it against the others."""
    call.attributes = _CallAttributes(("nounwind", "willreturn"))
    return call


def register_struct(builder, types) -> ir.Type:
    """The struct of registers a multi-output asm returns, as a type named in the module's
    context (``f32x128``), so that each asm call and ``extractvalue`` prints its name, not
    every field: a 128x256 wgmma matmul's 768 extractvalues of a literal 128-float struct
    were three quarters of its 1 MB LLVM text, printed by llvmlite and parsed by LLVM."""
    types = list(types)
    if all(t == types[0] for t in types):
        name = f"{types[0]}x{len(types)}"
    else:
        name = "_".join(str(t) for t in types)
    struct = builder.module.context.get_identified_type(name)
    if struct.is_opaque:
        struct.set_body(*types)
    return struct


# PTX that a warp or the block executes together: barriers, `.sync` / `.aligned` forms
# (mma, ldmatrix, wgmma, shfl, elect, setmaxnreg, ...), votes, matches and reductions.
_COLLECTIVE = re.compile(r"\b(?:bar|barrier|elect|shfl|vote|match|redux|activemask)\b|"
                         r"\.sync\b|\.aligned\b")


def call_asm(builder, asm: ir.InlineAsm, args):
    """Calls ``asm``, marked ``convergent`` when its PTX is collective (as clang marks CUDA's
    inline asm): LLVM must not make such a call depend on more control flow. Unmarked, jump
    threading copied a `bar.sync` into both sides of a one-thread branch (the elected
    thread's mbarrier init vs the others), so the warp split over two barriers and hung."""
    return builder.call(asm, args, attrs=("convergent",) if _COLLECTIVE.search(asm.asm) else ())


def cta_barrier(builder, threads=None):
    """``bar.sync 0`` (every thread of the CTA), or with ``threads`` the named barrier 1 of
    that many (the compute warps, once a producer warp has left: ``backend.warp_specialize``)."""
    text = "bar.sync 0;" if threads is None else f"bar.sync 1, {threads};"
    call_asm(builder, ir.InlineAsm(ir.FunctionType(ir.VoidType(), []), text, "",
                                   side_effect=True), [])


def inline_asm(builder, text: str, constraints: str, args, return_type=ir.VoidType(),
               side_effect=True):
    """Calls PTX ``text`` with ``args`` bound to its ``constraints``; returns the result."""
    function_type = ir.FunctionType(return_type, [a.type for a in args])
    return call_asm(builder, ir.InlineAsm(function_type, text, constraints,
                                          side_effect=side_effect), args)
