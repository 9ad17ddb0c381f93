"""What a pipelined loop carries for its copies (``passes.pipeline``): the rewrite shifts
the carried values its operand addresses read S-1 trips ahead; these helpers reshape them
first.

In: the loop, its ``LoopShape`` (``pipeline_shape``) and the users of every value. Out: the
same loop where each shifted pointer block that advances by a loop-invariant scalar is
carried as that scalar's running sum (``carry_offsets``), and where a shifted value read
after the loop has an unshifted copy carried beside it (``keep_unshifted``).
"""
from __future__ import annotations

from ..ir import kir
from ..ir import types as T
from ..ir.types import BlockType
from .rewrite import body_slice, clone_ops, constant, new_op


def keep_unshifted(function, loop, index: int, update_ops: list) -> None:
    """Carries a copy of carried value ``index`` that the rewrite leaves unshifted: a new
    block argument from the same initial value, advanced by a copy of the ops computing
    the original's next value, and a new loop result that every reader of the original's
    result after the loop takes instead."""
    region = loop.regions[0]
    terminator = region.terminator
    original = region.args[1 + index]
    copy = kir.Value(original.type, hint_name=original.hint_name)
    region.args.append(copy)
    mapping = {original: copy}
    advanced = clone_ops(update_ops, mapping)
    region.body[-1:-1] = advanced
    terminator.operands.append(mapping.get(terminator.operands[index],
                                           terminator.operands[index]))
    loop.operands.append(loop.operands[3 + index])
    old_result = loop.results[index]
    result = kir.Value(old_result.type, hint_name=old_result.hint_name)
    result.owner = loop
    loop.results.append(result)
    for op in kir.walk(function.body):
        op.operands[:] = [result if value is old_result else value for value in op.operands]


def carry_offsets(parent: list, loop, shape, users) -> None:
    """Each shifted pointer block that every trip advances by one loop-invariant scalar
    (``p += s``, the usual ``ptrs += BLOCK_K * stride``) becomes its initial value, read
    from outside the loop, plus a carried i64 scalar: ``offset += s`` (widened as
    ``addptr`` widens it), the addresses ``addptr(initial, splat(offset))``: the same
    pointers (both sums wrap modulo 2**64). The splat is ``opaque`` (``backend.views``),
    so that LLVM's loop strength reduction cannot turn the sums back into one 64-bit
    induction variable per register of the block: ptxas kept those as unpaired 32-bit
    halves and paired them again by MOVs every trip (flash attention, hd128: 8 pointers, 8
    MOVs). The loop carries one uniform scalar; each copy's address is one add to an
    invariant pointer. Edits ``shape`` (``load_ops``, ``update_slice``) to match. Values
    read after the loop (``kept``) stay as they are."""
    region = loop.regions[0]
    terminator = region.terminator
    body_ids = {id(o) for o in region.body}
    load_ids = {id(o) for o in shape.load_ops}
    for index in shape.shifted:
        arg = region.args[1 + index]
        update = terminator.operands[index].owner
        if index in (shape.kept or []) or not arg.type.shape or not arg.element.is_ptr() \
                or update is None or update.opcode != "addptr" or update.operands[0] is not arg \
                or id(update) not in body_ids:
            continue
        step = update.operands[1].owner
        if step is None or step.opcode != "splat":
            continue
        scalar = step.operands[0]
        if not scalar.element.is_int() or scalar.element.bits < 8 or any(
                value in region.args for o in body_slice(scalar, body_ids)
                for value in o.operands) or scalar in region.args:
            continue
        if any(user is not terminator for user in users.get(update.result, [])) or any(
                user is not update and id(user) not in load_ids
                for user in users.get(arg, [])):
            continue
        offset = kir.Value(BlockType(T.int64), hint_name=f"{arg.hint_name or 'pointer'}_offset")
        region.args[1 + index] = offset
        initial = loop.operands[3 + index]
        zero = constant(0, T.int64)
        parent.insert(parent.index(loop), zero)
        loop.operands[3 + index] = zero.result
        spread = new_op("splat", [offset], BlockType(T.int64, arg.type.shape), opaque=True)
        address = new_op("addptr", [initial, spread.result], arg.type)
        address.result.hint_name = arg.hint_name
        for o in shape.load_ops:
            o.operands = [address.result if value is arg else value for value in o.operands]
        region.body[0:0] = [spread, address]
        shape.load_ops[0:0] = [spread, address]
        load_ids |= {id(spread), id(address)}
        advance = []
        if scalar.element.bits < 64:
            advance.append(new_op("cast", [scalar], BlockType(T.int64)))
        advance.append(new_op("add", [offset, (advance[-1].result if advance else scalar)],
                              BlockType(T.int64)))
        region.body[-1:-1] = advance
        terminator.operands[index] = advance[-1].result
        del shape.update_slice[id(update)]
        if users.get(step.result, []) == [update]:
            shape.update_slice.pop(id(step), None)
        shape.update_slice.update({id(o): o for o in advance})
        result = kir.Value(BlockType(T.int64))
        result.owner = loop
        loop.results[index] = result
