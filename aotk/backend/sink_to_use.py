"""What a thread's sum tree adds is computed one register at a time (LLVM IR, in place).

In: the llvmlite ``ir.Module`` that ``backend.lower`` built, the ids of the instructions that
keep their place (a thread's reduction trees) and of those whose inputs sink to them (the
trees ``backend.reduce`` emits depth first: sums and the other non-max/min combines).
Out: the same module, each block reordered: the pure instructions such a tree takes, and
what they take in the block in turn, each come right before their first user; every other
instruction keeps its place and order.

Why: the lowering emits one kir op at a time over all of a thread's registers, so a row
kernel computes 32 maxima, then 32 logarithms, then 32 products, and all 32 of each are live
at once before the tree sums them. NVPTX keeps the IR's order within a block and ptxas
schedules from it: liger's kl_div row kernel (16,384 columns, 16 warps) took 82 registers
that way, one CTA per SM, 299 us against Triton's 260 (H200, the same launch). Each
register's chain computed where the tree takes it needs 35 registers: 240 us.

Only what a sum tree takes moves. A maximum's tree keeps its inputs where they were: ptxas
issues a row's loads before a maximum best when the maxima come after them (liger's cross
entropy with its argmax: 166 us as before, 171 with its maximum's inputs moved too). And
sinking every pure instruction to its first use took a matmul epilogue that stores two
products (liger's SwiGLU dGU, sm_90) from 168 registers to 255.
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
        return isinstance(callee, ir.Function) and callee.name.startswith(_PURE_CALL_PREFIXES)
    if isinstance(instruction, _PURE_CLASSES):
        return True
    return type(instruction) is ir.Instruction and instruction.opname in _PURE_OPNAMES


def _operands(instruction):
    if isinstance(instruction, ir.PhiInstr):
        return ()   # its values arrive from the end of a predecessor
    if isinstance(instruction, ir.CallInstr):
        return instruction.args
    return getattr(instruction, "operands", ())


def _inputs_of(instructions, keep, sinks) -> set:
    """ids of the block's pure instructions that the ``sinks`` of the block take, directly
    or through other such instructions; those in ``keep`` stay (the walk goes on through
    them: a tree's inner combines take the tree's inputs too)."""
    pure = {id(i) for i in instructions if _is_pure(i)}
    found = set()
    work = [i for i in instructions if id(i) in sinks]
    while work:
        for operand in _operands(work.pop()):
            if id(operand) in pure and id(operand) not in found:
                found.add(id(operand))
                work.append(operand)
    return found - keep


def sink_block(block: ir.Block, keep=frozenset(), sinks=frozenset()) -> None:
    """Reorders ``block``'s instructions as the module docstring says: the pure inputs of
    ``sinks`` (instruction ids) come just before their first user, those in ``keep`` and
    all the rest stay in order."""
    instructions = block.instructions
    movable = _inputs_of(instructions, keep, sinks)
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
    for function in module.functions:
        for block in function.blocks:
            sink_block(block, keep, sinks)
