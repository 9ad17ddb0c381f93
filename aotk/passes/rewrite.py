"""Helpers for passes that edit kir loops in place (``prefetch``, ``pipeline``).

In: kir ops and values. Out: new ops (``new_op``), copies of a slice of a loop body with
operands renamed (``clone_ops``), and the queries those rewrites need: who uses a value
(``users_of``), which body ops a value depends on (``body_slice``), each op with the list
that holds it (``ops_with_blocks``).
"""
from __future__ import annotations

from ..ir import kir
from ..ir import types as T
from ..ir.types import BlockType


def ops_with_blocks(block: list):
    """(the list holding op, op) for every op, nested ones included."""
    for op in block:
        yield block, op
        for region in op.regions:
            yield from ops_with_blocks(region.body)


def upward_for_loops(function: kir.Function) -> list:
    """(the list holding it, loop) for every ``for`` counting up, nested ones included,
    collected before any rewrite inserts ops around them (what ``prefetch`` and
    ``pipeline`` rewrite)."""
    return [(block, op) for block, op in ops_with_blocks(function.body)
            if op.opcode == "for" and op.attrs.get("direction") == "up"]


def users_of(ops) -> dict:
    """value -> the ops (nested ones included) that take it as an operand."""
    users: dict = {}
    for op in kir.walk(ops):
        for value in op.operands:
            users.setdefault(value, []).append(op)
    return users


def body_slice(value, body_ops: set) -> list:
    """Ops of a loop body (``body_ops``: their ids) that ``value`` depends on, itself
    included; values defined outside the body end the walk."""
    found, pending = {}, [value]
    while pending:
        v = pending.pop()
        owner = v.owner
        if owner is None or id(owner) not in body_ops or id(owner) in found:
            continue
        found[id(owner)] = owner
        pending.extend(owner.operands)
    return list(found.values())


def new_op(opcode, operands, result_type, **attrs) -> kir.Op:
    """An op with a fresh result of ``result_type`` (None: no result)."""
    result = kir.Value(result_type) if result_type is not None else None
    op = kir.Op(opcode, list(operands), result, attrs)
    if result is not None:
        result.owner = op
    return op


def constant(value, element) -> kir.Op:
    return new_op("constant", [], BlockType(element), value=value)


def clone_ops(ops, mapping: dict, in_range=None) -> list:
    """Copies ``ops`` with operands renamed through ``mapping`` (which gains the copies'
    results). With ``in_range`` (an int1 scalar), loads are masked by it as well."""
    copies = []
    for op in ops:
        operands = [mapping.get(v, v) for v in op.operands]
        attrs = dict(op.attrs)
        if op.opcode == "load" and in_range is not None:
            shape = op.result.type.shape
            splat = new_op("splat", [in_range], BlockType(T.int1, shape)) if shape else None
            guard = splat.result if splat is not None else in_range
            copies += [splat] if splat is not None else []
            if attrs.get("has_mask"):
                combined = new_op("and", [operands[1], guard], BlockType(T.int1, shape))
                copies.append(combined)
                operands[1] = combined.result
            else:
                operands.insert(1, guard)
                attrs["has_mask"] = True
        copy = new_op(op.opcode, operands, op.result.type, **attrs)
        copy.loc = op.loc
        copy.result.hint_name = op.result.hint_name
        mapping[op.result] = copy.result
        copies.append(copy)
    return copies


def dot_operand_loads(loop) -> tuple | None:
    """(dot, [load a, load b], their address ops in body order) when ``loop``'s body holds
    no nested regions, stores or side effects, exactly one dot, and its two operands are
    distinct loads (pointer or tensor-descriptor ones) used by nothing else whose
    addresses and masks are pure functions of the body's arguments and outside values;
    else None. The loop shape that moving a dot's loads to earlier trips (``prefetch``,
    ``pipeline``) starts from."""
    ops = loop.regions[0].body
    if any(o.regions or o.opcode in ("store", "descriptor_store")
           or o.opcode in kir.SIDE_EFFECT_OPS for o in ops):
        return None
    dots = [o for o in ops if o.opcode == "dot"]
    if len(dots) != 1:
        return None
    dot = dots[0]
    users = users_of(ops)
    loads = [v.owner for v in dot.operands[:2]]
    if any(l is None or l.opcode not in ("load", "descriptor_load")
           or users.get(l.result) != [dot] for l in loads) \
            or loads[0] is loads[1]:
        return None
    body_ids = {id(o) for o in ops}
    needed = {}
    for load in loads:
        for o in body_slice(load.result, body_ids):
            needed[id(o)] = o
    if any(o.opcode not in kir.PURE_OPS and o not in loads for o in needed.values()):
        return None
    return dot, loads, [o for o in ops if id(o) in needed]


def remove_unused_pure_ops(body: list) -> None:
    """Drops pure ops of a region body whose results nothing reads (a rewrite's leftovers:
    the address arithmetic of loads it replaced). Body values are visible only inside the
    body, so its own users are all there are."""
    while True:
        users = users_of(body)
        dead = [o for o in body if o.opcode in kir.PURE_OPS and not o.regions
                and not any(users.get(r) for r in o.results)]
        if not dead:
            return
        body[:] = [o for o in body if not any(o is d for d in dead)]
