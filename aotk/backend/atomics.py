"""``atomic_rmw`` / ``atomic_cas`` -> predicated inline PTX ``atom`` instructions.

In: the op, its operands' registers in the natural layout of the pointer's rank (atomics
are layout roots, see ``passes.layouts``). Out: the old values, as registers in that layout.

- Each element is applied once: the atom is predicated on the mask AND on the thread owning
  the element (``Distribution.owner_predicate``; thread 0 for a scalar). Threads holding a
  replica get the owner's old value through the shared scratch buffer when it is used.
- ``atom.global.<sem>.<scope>.<op>.<type>`` (qualifiers need sm_70+, as does f16 add; ptxas
  takes them for every target). Values travel as integers of their width (b16 / b32 / b64
  registers).
- bf16 add exists as an instruction from sm_90 on; before, it is a loop of 16-bit
  compare-and-swaps (``atom.cas.b16``, sm_70+) around an fp32 add rounded to bf16.
- Float adds on sm_90 take vectors, as Triton emits them: ``atom.add.v4.f32`` (16 bytes),
  ``atom.add.noftz.v8.f16``, over a thread's consecutive elements where axis info proves the
  addresses contiguous and aligned and the mask constant across them (as for a vector
  store). A quarter of the atomics for a 4-wide fp32 row (liger's dW / dphi partial sums).
  Each element is still added atomically on its own; only the instruction count changes.
"""
from __future__ import annotations

import llvmlite.ir as ir

from ..passes.layouts import memory_vector_width
from ..targets import has_bf16_atom_add, has_vector_atom_add
from .llvm_types import I16, I32, I64, call_asm, llvm_type, register_struct, returns
from .memory import vector_groups
from .registry import lowering, scratch
from .shared_rows import row_major_index

_PTX_OP = {"add": "add", "max": "max", "min": "min", "and": "and", "or": "or", "xor": "xor",
           "xchg": "exch"}
_WORD = {16: I16, 32: I32, 64: I64}
_LETTER = {16: "h", 32: "r", 64: "l"}


def _ptx_type(kind: str, element) -> str:
    bits = element.bits
    if kind == "add":
        if element.bits == 16:
            return "noftz.bf16" if element.is_bf16() else "noftz.f16"
        return f"f{bits}" if element.is_floating() else f"u{bits}"
    if kind in ("max", "min"):
        return f"{'s' if element.is_int_signed() else 'u'}{bits}"
    return f"b{bits}"


def _to_word(builder, value, element):
    return builder.bitcast(value, _WORD[element.bits]) if element.is_floating() else value


def _from_word(builder, word, element):
    return builder.bitcast(word, llvm_type(element)) if element.is_floating() else word


def emit_atom(builder, instruction: str, address, predicate, words: list, bits: int,
              outputs: int = 1) -> list:
    """``@p <instruction> d, [address], words...``: the old words, ``outputs`` of them.
    Lanes off the predicate read 0s. One output is a scalar atom (``words``: its sources, two
    for a compare-and-swap); more are a vector atom, whose destinations and sources (one word
    each) PTX writes as brace lists."""
    letter = _LETTER[bits]
    first = outputs + (2 if predicate is not None else 1)
    destinations = ", ".join(f"${i}" for i in range(outputs))
    sources = ", ".join(f"${first + i}" for i in range(len(words)))
    if outputs > 1:
        destinations, sources = f"{{{destinations}}}", f"{{{sources}}}"
    text = f"{instruction} {destinations}, [${outputs}], {sources};"
    operands, constraints = [address], [f"=&{letter}"] * outputs + ["l"]
    if predicate is not None:
        # Zero first, so masked-off lanes read as a load without `other` would.
        zeros = " ".join(f"mov.b{bits} ${i}, 0;" for i in range(outputs))
        text = f"{zeros} @${outputs + 1} {text}"
        operands.append(predicate)
        constraints.append("b")
    operands += words
    constraints += [letter] * len(words)
    result = _WORD[bits] if outputs == 1 else register_struct(builder, [_WORD[bits]] * outputs)
    asm = ir.InlineAsm(ir.FunctionType(result, [o.type for o in operands]), text,
                       ",".join(constraints), side_effect=True)
    call = returns(call_asm(builder, asm, operands))
    if outputs == 1:
        return [call]
    return [builder.extract_value(call, i) for i in range(outputs)]


def _vector_width(ctx, op, element) -> int:
    """Elements one atom may add: >1 only for a float add on sm_90 (16 bytes at most)."""
    if op.opcode != "atomic_rmw" or op.attrs["kind"] != "add" or not element.is_floating() \
            or element.bits not in (16, 32) or not has_vector_atom_add(ctx.target):
        return 1
    return memory_vector_width(op, ctx.infos)


def _bf16_add_loop(ctx, address, predicate, value, qualifiers: str):
    """bf16 atomic add as a compare-and-swap loop; returns the old bits (i16)."""
    b = ctx.builder
    kernel = ctx.kernel
    start = b.block
    first_try, loop, done = (kernel.append_basic_block(f"bf16_add.{part}")
                             for part in ("load", "loop", "done"))
    if predicate is not None:
        b.cbranch(predicate, first_try, done)
    else:
        b.branch(first_try)
    b.position_at_end(first_try)
    # Any starting guess is safe: the compare-and-swap checks it.
    pointer = b.inttoptr(address, ir.PointerType(addrspace=1))
    guess = b.load(pointer, typ=I16)
    b.branch(loop)
    b.position_at_end(loop)
    expected = b.phi(I16)
    expected.add_incoming(guess, first_try)
    total = b.fadd(b.fpext(b.bitcast(expected, value.type), ir.FloatType()),
                   b.fpext(value, ir.FloatType()))
    desired = b.bitcast(b.fptrunc(total, value.type), I16)
    (seen,) = emit_atom(b, f"atom.global{qualifiers}.cas.b16", address, None,
                        [expected, desired], 16)
    expected.add_incoming(seen, loop)
    b.cbranch(b.icmp_unsigned("!=", seen, expected), loop, done)
    b.position_at_end(done)
    old = b.phi(I16)
    old.add_incoming(seen, loop)
    if predicate is not None:
        old.add_incoming(ir.Constant(I16, 0), start)
    return old


@lowering("atomic_rmw", "atomic_cas")
def lower_atomic(ctx, op) -> list:
    """The old values (registers in the pointer's natural layout), however the result is used."""
    b = ctx.builder
    pointer = op.operands[0]
    layout = ctx.plan.natural(pointer)
    element = op.result.element
    addresses = ctx.regs(pointer, layout)
    qualifiers = f".{op.attrs['sem']}.{op.attrs['scope']}"
    if op.opcode == "atomic_cas":
        operand_regs = [ctx.regs(v, layout) for v in op.operands[1:3]]
        masks = None
        instruction = f"atom.global{qualifiers}.cas.b{element.bits}"
    else:
        operand_regs = [ctx.regs(op.operands[1], layout)]
        masks = ctx.regs(op.operands[2], layout) if op.attrs.get("has_mask") else None
        kind = op.attrs["kind"]
        instruction = f"atom.global{qualifiers}.{_PTX_OP[kind]}.{_ptx_type(kind, element)}"
    owner = ctx.threads.owner(pointer, layout)
    loop_bf16 = op.opcode == "atomic_rmw" and element.is_bf16() and \
        not has_bf16_atom_add(ctx.target)
    width = 1 if loop_bf16 else _vector_width(ctx, op, element)
    groups = vector_groups(ctx, op, layout, len(addresses), width) if width > 1 else None
    if groups is not None and max(len(g) for g in groups) > 1:
        old = _vector_adds(ctx, instruction, addresses, masks, operand_regs[0], owner,
                           groups, element)
        if owner is not None and op.result in ctx.plan.demands:
            old = _share_with_replicas(ctx, op.result, layout, old, owner)
        return [old]
    old = []
    for index, address in enumerate(addresses):
        predicate = masks[index] if masks is not None else None
        if owner is not None:
            predicate = owner if predicate is None else b.and_(predicate, owner)
        values = [regs[index] for regs in operand_regs]
        if loop_bf16:
            word = _bf16_add_loop(ctx, address, predicate, values[0], qualifiers)
        else:
            (word,) = emit_atom(b, instruction, address, predicate,
                                [_to_word(b, v, element) for v in values], element.bits)
        old.append(_from_word(b, word, element))
    if owner is not None and op.result in ctx.plan.demands:
        old = _share_with_replicas(ctx, op.result, layout, old, owner)
    return [old]


def _vector_adds(ctx, instruction, addresses, masks, values, owner, groups, element):
    """One vector atom per group of a thread's consecutive registers (``.v2/.v4/.v8``
    before the type); the old values, per register."""
    b = ctx.builder
    head, _, ptx_type = instruction.rpartition(".")
    old = [None] * len(addresses)
    for group in groups:
        predicate = masks[group[0]] if masks is not None else None
        if owner is not None:
            predicate = owner if predicate is None else b.and_(predicate, owner)
        words = [_to_word(b, values[i], element) for i in group]
        vector = f"{head}.v{len(group)}.{ptx_type}" if len(group) > 1 else instruction
        results = emit_atom(b, vector, addresses[group[0]], predicate, words, element.bits,
                            outputs=len(group))
        for index, word in zip(group, results):
            old[index] = _from_word(b, word, element)
    return old


def _share_with_replicas(ctx, value, layout, registers, owner):
    """Owners write their old values to shared memory; every thread reads its elements."""
    b = ctx.builder
    memory_type = llvm_type(value.element)
    addresses = [ctx.shared.pointer(row_major_index(b, indices, value.type.shape,
                                                    element_bytes=value.element.itemsize),
                                    memory_type)
                 for indices in ctx.threads.logical_indices(value, layout)]
    ctx.shared.begin_use()
    with b.if_then(owner):
        for register, address in zip(registers, addresses):
            b.store(register, address)
    ctx.shared.barrier()
    return [b.load(address, typ=memory_type) for address in addresses]


@scratch("atomic_rmw", "atomic_cas")
def atomic_scratch_bytes(plan, op) -> int:
    """Scratch bytes for handing old values to replicas: 0 when no thread holds a replica or
    the old values are unused."""
    if op.result not in plan.demands:
        return 0
    shape = op.result.type.shape
    itemsize = op.result.element.itemsize
    if not shape:
        return itemsize
    blocked = plan.natural(op.operands[0]).blocked
    if all(blocked.tile(axis) <= size for axis, size in enumerate(shape)):
        return 0
    numel = 1
    for size in shape:
        numel *= size
    return numel * itemsize
