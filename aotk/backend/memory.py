"""``load``, ``store`` and ``hint`` -> predicated PTX: one ``ld``/``st`` per vector, never a
branch.

In: the op, its pointers, masks and values in the op's layout (a load: its result's home; a
store: the layout of its rank, or its own where memory is contiguous along another
dimension, see ``passes.assign_layouts``), and the vector width (and, where it is not the
last, the dimension) the layout pass proved legal. Out: inline-asm calls such as
``@p ld.global.v4.b32 {...}, [addr];`` (``emit_load`` / ``emit_store``, which
``backend.pipeline`` reuses). A store is predicated on its mask and on the thread owning
each element, so replicas write nothing.
Inline asm pins the exact instruction the axis info licensed (the width is proven, not
hoped for) and keeps masked lanes as predicates. Both loads and stores are marked as having
side effects so LLVM keeps their order relative to each other, and as returning
(``llvm_types.returns``) so LLVM may still hoist loop-invariant work that follows them.
An eviction policy (``evict_first`` / ``evict_last``, no cache modifier) marks L1 with
``.L1::evict_*`` and, from sm_80, L2 through a ``createpolicy`` operand (``l2_policy``), as
Triton does.
"""
from __future__ import annotations

import llvmlite.ir as ir

from ..passes.layouts import SCALAR
from ..targets import has_l2_cache_hint
from .llvm_types import (I8, I16, I32, I64, call_asm, constant, inline_asm, llvm_type,
                         register_struct, returns)
from .registry import lowering, value_lowering
from .shared_rows import load_vector


def _memory_type(element):
    """Type of the bytes in memory: int1 is stored as one byte."""
    return I8 if element.is_bool() else llvm_type(element)


def _words(vector_bits: int):
    """(word bits, word count, asm constraint letter) for a vector of ``vector_bits``."""
    if vector_bits >= 32:
        return 32, vector_bits // 32, "r"
    if vector_bits == 16:
        return 16, 1, "h"
    return 8, 1, "r"   # a byte travels in a 32-bit register (ld.u8 zero-extends)


def _word_type(bits: int) -> ir.IntType:
    return I32 if bits in (8, 32) else I16


def _pack(builder, values, memory_type, word_bits, word_count):
    """Element values -> list of words, for asm operands."""
    vec = len(values)
    if word_bits == 8:
        return [builder.zext(values[0], I32)]
    vector = ir.Constant(ir.VectorType(memory_type, vec), None)
    for i, v in enumerate(values):
        vector = builder.insert_element(vector, v, ir.Constant(I32, i))
    if word_count == 1 and vec * memory_type_bits(memory_type) == word_bits:
        return [builder.bitcast(vector, _word_type(word_bits)) if vec > 1 else
                builder.bitcast(values[0], _word_type(word_bits))]
    words = builder.bitcast(vector, ir.VectorType(_word_type(word_bits), word_count))
    return [builder.extract_element(words, ir.Constant(I32, i)) for i in range(word_count)]


def _unpack(builder, words, memory_type, vec, word_bits):
    if word_bits == 8:
        return [builder.trunc(words[0], I8)]
    word_type = _word_type(word_bits)
    if len(words) == 1:
        if vec == 1:
            return [builder.bitcast(words[0], memory_type)]
        vector = builder.bitcast(words[0], ir.VectorType(memory_type, vec))
    else:
        packed = ir.Constant(ir.VectorType(word_type, len(words)), None)
        for i, w in enumerate(words):
            packed = builder.insert_element(packed, w, ir.Constant(I32, i))
        vector = builder.bitcast(packed, ir.VectorType(memory_type, vec))
    return [builder.extract_element(vector, ir.Constant(I32, i)) for i in range(vec)]


def memory_type_bits(memory_type) -> int:
    if isinstance(memory_type, ir.IntType):
        return memory_type.width
    return {"half": 16, "bfloat": 16, "float": 32, "double": 64}[str(memory_type)]


def _eviction(eviction: str) -> str:
    return f".L1::{eviction}" if eviction else ""


def _modifier(cache: str, eviction: str, policy) -> str:
    """The instruction's cache qualifiers: a cache modifier wins over an eviction policy
    (PTX takes no ``.L1::evict_*`` next to ``.cg``/``.cs``...)."""
    if cache:
        return cache
    return _eviction(eviction) + (".L2::cache_hint" if policy is not None else "")


def l2_policy(builder, target: str, cache: str, eviction: str):
    """The 64-bit L2 cache policy of an access evicting first or last, for its
    ``.L2::cache_hint`` operand; None where the access takes none (no such policy, a cache
    modifier, or a target before sm_80). One pure asm per op: LLVM may share and hoist it."""
    if cache or eviction not in ("evict_first", "evict_last") or not has_l2_cache_hint(target):
        return None
    return inline_asm(builder, f"createpolicy.fractional.L2::{eviction}.b64 $0, 1.0;", "=l",
                      [], I64, side_effect=False)


def emit_load(builder, address, predicate, element, vec, others, cache="", eviction="",
              volatile=False, policy=None):
    """Loads ``vec`` consecutive elements at ``address``; lanes off the predicate get ``others``.
    ``policy``: ``l2_policy``'s value, or None."""
    memory_type = _memory_type(element)
    word_bits, word_count, letter = _words(vec * memory_type_bits(memory_type))
    word_type = _word_type(word_bits)
    kind = ".u8" if word_bits == 8 else f".b{word_bits}"
    vector = f".v{word_count}" if word_count > 1 else ""
    modifier = _modifier(cache, eviction, policy)
    opcode = f"ld{'.volatile' if volatile else ''}.global{modifier}{vector}{kind}"
    outputs = [f"${i}" for i in range(word_count)]
    destination = "{" + ", ".join(outputs) + "}" if word_count > 1 else outputs[0]
    operands, constraints = [address], ["l"]
    lines, guard = [], ""
    if predicate is not None:
        other_words = _pack(builder, [_to_memory(builder, o, element) for o in others],
                            memory_type, word_bits, word_count)
        pred_index = word_count + 1
        for i, word in enumerate(other_words):
            lines.append(f"mov.b{32 if word_bits == 8 else word_bits} ${i}, ${pred_index + 1 + i};")
        guard = f"@${pred_index} "
        operands += [predicate] + other_words
        constraints += ["b"] + [letter] * len(other_words)
    source = f"[ ${word_count} ]"
    if policy is not None:   # the last operand
        source += f", ${word_count + len(operands)}"
        operands.append(policy)
        constraints.append("l")
    lines.append(f"{guard}{opcode} {destination}, {source};")
    result_type = register_struct(builder, [word_type] * word_count) if word_count > 1 \
        else word_type
    asm = ir.InlineAsm(ir.FunctionType(result_type, [o.type for o in operands]), " ".join(lines),
                       ",".join([f"={letter}"] * word_count + constraints), side_effect=True)
    result = returns(call_asm(builder, asm, operands))
    words = [builder.extract_value(result, i) for i in range(word_count)] if word_count > 1 \
        else [result]
    return [_from_memory(builder, v, element) for v in
            _unpack(builder, words, memory_type, vec, word_bits)]


def emit_store(builder, address, predicate, element, values, cache="", eviction="",
               policy=None):
    memory_type = _memory_type(element)
    vec = len(values)
    word_bits, word_count, letter = _words(vec * memory_type_bits(memory_type))
    kind = ".b8" if word_bits == 8 else f".b{word_bits}"
    vector = f".v{word_count}" if word_count > 1 else ""
    modifier = _modifier(cache, eviction, policy)
    words = _pack(builder, [_to_memory(builder, v, element) for v in values], memory_type,
                  word_bits, word_count)
    first = 2 if predicate is not None else 1
    sources = [f"${first + i}" for i in range(word_count)]
    source = "{" + ", ".join(sources) + "}" if word_count > 1 else sources[0]
    if policy is not None:
        source += f", ${first + word_count}"
    text = f"st.global{modifier}{vector}{kind} [ $0 ], {source};"
    operands, constraints = [address], ["l"]
    if predicate is not None:
        text = f"@$1 {text}"
        operands.append(predicate)
        constraints.append("b")
    operands += words
    constraints += [letter] * word_count
    if policy is not None:
        operands.append(policy)
        constraints.append("l")
    asm = ir.InlineAsm(ir.FunctionType(ir.VoidType(), [o.type for o in operands]), text,
                       ",".join(constraints), side_effect=True)
    returns(call_asm(builder, asm, operands))


def _to_memory(builder, value, element):
    return builder.zext(value, I8) if element.is_bool() else value


def _from_memory(builder, value, element):
    if element.is_bool():
        return builder.icmp_unsigned("!=", value, ir.Constant(I8, 0))
    return value



def vector_groups(ctx, op, layout, count, width=None) -> list:
    """Register indices grouped into vector accesses along the op's vector dimension (the
    last, or the plan's ``vector_dim``), at most ``width`` (default: the plan's vector width
    of ``op``) and what the layout holds in a run of a thread's registers. Registers run
    over the layout's parent axes, the last fastest: along another dimension, a group's
    registers are a fixed stride apart."""
    if width is None:
        width = ctx.plan.vector_width.get(op, 1)
    if layout is SCALAR:
        return [[0]]
    shape = op.operands[0].type.shape
    dist = ctx.threads.distribution(layout, shape)
    fastest = layout.blocked.order[0]
    axis = layout.parent_axis(ctx.plan.vector_dim.get(op, len(shape) - 1))
    if axis != fastest:
        width = 1
    width = min(width, min(layout.blocked.size_per_thread[fastest], dist.embedded[fastest]))
    stride = 1
    for later in dist.counts[axis + 1:]:
        stride *= later
    return [[start + lane * stride for lane in range(width)] for start in range(count)
            if (start // stride) % width == 0]


@value_lowering("load")
def lower_load(ctx, op, layout):
    if "staged" in op.attrs:
        return _read_stage(ctx, op, layout)
    pointers = ctx.regs(op.operands[0], layout)
    has_mask, has_other = op.attrs.get("has_mask"), op.attrs.get("has_other")
    masks = ctx.regs(op.operands[1], layout) if has_mask else None
    element = op.result.element
    if has_other:
        others = ctx.regs(op.operands[2], layout)
    else:
        others = [constant(element, 0)] * len(pointers)
    cache, eviction = op.attrs.get("cache", ""), op.attrs.get("eviction", "")
    policy = l2_policy(ctx.builder, ctx.target, cache, eviction)
    out = [None] * len(pointers)
    for group in vector_groups(ctx, op, layout, len(pointers)):
        loaded = emit_load(ctx.builder, pointers[group[0]],
                           masks[group[0]] if masks is not None else None, element, len(group),
                           [others[i] for i in group], cache, eviction,
                           op.attrs.get("volatile", False), policy)
        for register, value in zip(group, loaded):
            out[register] = value
    return out


def _read_stage(ctx, op, layout) -> list:
    """A load a pipelined loop copied ahead (``staged``): its block, read from this trip's
    slot of its plain tile (``backend.plain_tile``; masked-off elements were zero-filled)
    in vectors as wide as the load's own. Its pointers are not read: they are there for
    the layout pass, which proved the vectors from them."""
    b = ctx.builder
    staged = ctx.pipeline.staged[op.attrs["staged"]]
    (stage,) = ctx.regs(op.operands[-1], SCALAR)
    base = staged.stage_base(b, stage)
    element = op.result.element
    memory_type = _memory_type(element)
    indices = ctx.threads.logical_indices(op.result, layout)
    out = [None] * len(indices)
    # A vector runs along the load's vector dim: contiguous in the tile only where that
    # is the tile's fastest (as its copies wrote it); otherwise element by element.
    rank = op.result.type.rank
    along = ctx.plan.vector_dim.get(op, rank - 1)
    width = None if not rank or along == staged.tile.order[0] else 1
    for group in vector_groups(ctx, op, layout, len(indices), width):
        offset = b.add(base, staged.tile.element_offset(b, indices[group[0]]))
        address = ctx.shared.stage_pointer(offset, memory_type)
        loaded = load_vector(b, address, memory_type, len(group), memory_type_bits(
            memory_type) // 8)
        for register, value in zip(group, loaded):
            out[register] = _from_memory(b, value, element)
    return out


@lowering("store")
def lower_store(ctx, op):
    pointer = op.operands[0]
    # Stores anchor the natural layout of their pointer, or their own (passes.assign_layouts).
    layout = ctx.plan.access.get(op) or ctx.plan.natural(pointer)
    pointers = ctx.regs(pointer, layout)
    values = ctx.regs(op.operands[1], layout)
    masks = ctx.regs(op.operands[2], layout) if op.attrs.get("has_mask") else None
    b = ctx.builder
    owner = ctx.threads.owner(pointer, layout)
    element = pointer.element.element_ty
    cache, eviction = op.attrs.get("cache", ""), op.attrs.get("eviction", "")
    policy = l2_policy(b, ctx.target, cache, eviction)
    for group in vector_groups(ctx, op, layout, len(pointers)):
        predicate = masks[group[0]] if masks is not None else None
        if owner is not None:
            predicate = owner if predicate is None else b.and_(predicate, owner)
        emit_store(b, pointers[group[0]], predicate, element, [values[i] for i in group],
                   cache, eviction, policy)


@lowering("prefetch")
def lower_prefetch(ctx, op):
    """One ``prefetch.global.L1`` per run of a thread's registers contiguous along the
    fastest dimension (the run's first address; its line holds the rest, or the next
    prefetch's does), under the element's mask."""
    pointer, mask = op.operands
    layout = ctx.plan.natural(pointer)
    pointers, masks = ctx.regs(pointer, layout), ctx.regs(mask, layout)
    line = 16 // max(1, pointer.element.element_ty.itemsize)
    asm = ir.InlineAsm(ir.FunctionType(ir.VoidType(), [pointers[0].type, ir.IntType(1)]),
                       "@$1 prefetch.global.L1 [ $0 ];", "l,b", side_effect=True)
    for group in vector_groups(ctx, op, layout, len(pointers), line):
        returns(call_asm(ctx.builder, asm, [pointers[group[0]], masks[group[0]]]))


@value_lowering("hint")
def lower_hint(ctx, op, layout):
    """Hints only inform axis info; the value passes through."""
    return ctx.regs(op.operands[0], layout)
