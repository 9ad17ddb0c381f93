"""What only a thread's sum tree takes is computed one register at a time (LLVM IR, in place).

In: the llvmlite ``ir.Module`` that ``backend.lower`` built, the ids of the instructions that
keep their place (a thread's reduction trees) and of those whose inputs sink to them (the
trees ``backend.reduce`` emits depth first: sums through a special function,
``computed_with_special_functions``, and the other non-max/min combines).
Out: the same module, each block reordered: the pure instructions whose values only such a
tree takes (directly or through one another) each come right before their first user;
every other instruction keeps its place and order.

Why: the lowering emits one kir op at a time over all of a thread's registers, so a row
kernel computes 32 maxima, then 32 logarithms, then 32 products, and all 32 of each are live
at once before the tree sums them. NVPTX keeps the IR's order within a block and ptxas
schedules from it: liger's kl_div row kernel (16,384 columns, 16 warps) took 82 registers
that way, one CTA per SM, 299 us against Triton's 260 (H200, the same launch). Each
register's chain computed where the tree takes it needs 35 registers: 240 us.

What moves is narrow on purpose. A maximum's tree keeps its inputs where they were: ptxas
issues a row's loads before a maximum best when the maxima come after them (liger's cross
entropy with its argmax: 166 us either way, 171 with its maximum's inputs moved too). A
value something else also takes stays: moving a softmax's exponentials or an attention
row's probabilities toward their sum leaves the division or the dot that also takes them
(measured neither way; the code of those kernels stays as it was). And sinking every pure
instruction to its first use took a matmul epilogue that stores two products (liger's
SwiGLU dGU, sm_90) from 168 registers to 255.
"""
from __future__ import annotations

import llvmlite.ir as ir

# Calls without side effects: libdevice's math and these LLVM/NVVM intrinsics.
_PURE_CALL_PREFIXES = ("__nv_", "llvm.fma.", "llvm.fabs.", "llvm.maxnum.", "llvm.minnum.",
                       "llvm.maximum.", "llvm.minimum.", "llvm.floor.", "llvm.ceil.",
                       "llvm.rint.", "llvm.nvvm.sqrt.", "llvm.nvvm.div.", "llvm.nvvm.ex2.")
_PURE_CLASSES = (ir.CastInstr, ir.CompareInstr, ir.SelectInstr, ir.GEPInstr,
                 ir.ExtractValue, ir.InsertValue, ir.ExtractElement, ir.InsertElement,
                 ir.ShuffleVector)
_PURE_OPNAMES = frozenset((
    "add", "sub", "mul", "udiv", "sdiv", "urem", "srem", "shl", "lshr", "ashr", "and", "or",
    "xor", "fadd", "fsub", "fmul", "fdiv", "frem", "fneg"))


def _is_pure(instruction) -> bool:
    if isinstance(instruction, ir.CallInstr):
        callee = instruction.callee
        # (a libdevice function that writes through a pointer, as __nv_sincosf, is not)
        return isinstance(callee, ir.Function) and \
            callee.name.startswith(_PURE_CALL_PREFIXES) and \
            not any(isinstance(arg.type, ir.PointerType) for arg in instruction.args)
    if isinstance(instruction, _PURE_CLASSES):
        return True
    return type(instruction) is ir.Instruction and instruction.opname in _PURE_OPNAMES


def _operands(instruction):
    if isinstance(instruction, ir.PhiInstr):
        return ()   # its values arrive from the end of a predecessor
    if isinstance(instruction, ir.CallInstr):
        return instruction.args
    return getattr(instruction, "operands", ())


# What the SFU (MUFU) computes, or a division (a reciprocal there): libdevice's math and the
# NVVM approximations.
_SPECIAL_FUNCTION_PREFIXES = ("__nv_", "llvm.nvvm.ex2.", "llvm.nvvm.lg2.", "llvm.nvvm.sqrt.",
                              "llvm.nvvm.rsqrt.", "llvm.nvvm.rcp.", "llvm.nvvm.div.",
                              "llvm.nvvm.sin.", "llvm.nvvm.cos.", "llvm.sqrt.")


def computed_with_special_functions(values, block: ir.Block) -> bool:
    """Does any of ``values`` come, through pure instructions of ``block``, from an
    exponential, logarithm, root, sine, cosine or division? ``backend.reduce`` emits such a
    sum depth first with its inputs sunk to it, and a sum of plain products level by level
    (why: its docstring)."""
    seen, work = set(), list(values)
    while work:
        value = work.pop()
        if not isinstance(value, ir.Instruction) or id(value) in seen or \
                value.parent is not block or not _is_pure(value):
            continue
        seen.add(id(value))
        if isinstance(value, ir.CallInstr) and \
                value.callee.name.startswith(_SPECIAL_FUNCTION_PREFIXES):
            return True
        if type(value) is ir.Instruction and value.opname == "fdiv":
            return True
        work.extend(_operands(value))
    return False


def _inputs_of(block, keep, sinks, users) -> set:
    """ids of the block's pure instructions that only the ``sinks`` of the block take,
    directly or through other such instructions; those in ``keep`` stay. A value something
    else also takes (the probabilities of an attention row, summed and fed to a dot; a
    softmax's exponentials, summed and divided) stays where it is: moved, it would leave
    its other users or lengthen what they hold."""
    instructions = block.instructions
    pure = {id(i) for i in instructions if _is_pure(i)}
    found = set()
    work = [i for i in instructions if id(i) in sinks]
    while work:
        for operand in _operands(work.pop()):
            if id(operand) in pure and id(operand) not in found:
                found.add(id(operand))
                work.append(operand)
    found -= keep
    by_id = {id(i): i for i in instructions}
    # Drop what has a user outside the movable set and the sinks, then what only fed it.
    work = list(found)
    while work:
        candidate = work.pop()
        if candidate not in found:
            continue
        if all(user.parent is block and (id(user) in found or id(user) in sinks)
               for user in users.get(candidate, ())):
            continue
        found.discard(candidate)
        work.extend(id(o) for o in _operands(by_id[candidate]) if id(o) in found)
    return found


def _users(function) -> dict:
    """id(value) -> the instructions of ``function`` that take it."""
    users = {}
    for block in function.blocks:
        for instruction in block.instructions:
            operands = [value for value, _ in instruction.incomings] \
                if isinstance(instruction, ir.PhiInstr) else _operands(instruction)
            for operand in operands:
                users.setdefault(id(operand), []).append(instruction)
    return users


def sink_block(block: ir.Block, keep=frozenset(), sinks=frozenset(), users=None) -> None:
    """Reorders ``block``'s instructions as the module docstring says: the pure inputs of
    ``sinks`` (instruction ids) come just before their first user, those in ``keep`` and
    all the rest stay in order. ``users``: ``_users`` of the block's function."""
    instructions = block.instructions
    if not any(id(i) in sinks for i in instructions):
        return
    movable = _inputs_of(block, keep, sinks, users if users is not None
                         else _users(block.parent))
    if not movable:
        return
    order, placed = [], set()

    def place(root):
        # Operands first, depth first and in operand order, without recursion (a chain
        # over a row runs to hundreds of operands deep).
        stack = [(root, iter(_operands(root)))]
        while stack:
            instruction, operands = stack[-1]
            for operand in operands:
                if id(operand) in movable and id(operand) not in placed:
                    placed.add(id(operand))
                    stack.append((operand, iter(_operands(operand))))
                    break
            else:
                stack.pop()
                order.append(instruction)

    for instruction in instructions:
        if id(instruction) not in movable:
            placed.add(id(instruction))
            place(instruction)
    assert len(order) == len(instructions), "an instruction was lost or placed twice"
    block.instructions[:] = order


def sink_to_first_use(module: ir.Module, keep=frozenset(), sinks=frozenset()) -> None:
    """Every block of ``module`` through ``sink_block`` (``keep`` and ``sinks``: the
    ``LoweringContext``'s ``placed_in_order`` and ``inputs_sunk_to``)."""
    if not sinks:
        return
    for function in module.functions:
        users = None
        for block in function.blocks:
            if any(id(i) in sinks for i in block.instructions):
                users = users if users is not None else _users(function)
                sink_block(block, keep, sinks, users)
