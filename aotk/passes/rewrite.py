"""Helpers for passes that edit kir loops in place (``prefetch``, ``pipeline``).

In: kir ops and values. Out: new ops (``new_op``), copies of a slice of a loop body with
operands renamed (``clone_ops``), and the queries those rewrites need: who uses a value
(``users_of``), which body ops a value depends on (``body_slice``), how many trips a loop
with constant bounds runs (``trip_count``), each op with the list
that holds it (``ops_with_blocks``), and the loop shape both rewrites start from: dots whose
operands are loads of the body, seen directly or through size-1 views and transposes
(``dot_operand_loads``).
"""
from __future__ import annotations

from dataclasses import dataclass

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


def is_zero(value) -> bool:
    """Whether ``value`` is a constant zero (scalar, or a block splat or broadcast from one)."""
    owner = value.owner
    while owner is not None and owner.opcode in ("splat", "broadcast"):
        owner = owner.operands[0].owner
    return owner is not None and owner.opcode == "constant" and owner.attrs["value"] == 0


def constant_int(value):
    """The Python int a scalar ``constant`` op gives ``value``, else None."""
    owner = value.owner
    if owner is None or owner.opcode != "constant" or value.type.shape:
        return None
    constant = owner.attrs.get("value")
    return constant if isinstance(constant, int) and not isinstance(constant, bool) else None


def trip_count(loop) -> int | None:
    """The trips of a ``for`` with constant bounds and step, else None."""
    start, end, step = (constant_int(v) for v in loop.operands[:3])
    if None in (start, end, step):
        return None
    # Trips run from start while below end (up) or above it (down), as backend.control.
    direction = loop.attrs.get("direction")
    if direction == "up" and step > 0:
        return max(0, -(-(end - start) // step))
    if direction == "down" and step < 0:
        return max(0, -(-(start - end) // -step))
    return None


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


@dataclass
class DotOperands:
    """The dots of a loop body whose operands are all loads of that body (``dot_operand_loads``).

    A load may feed several dots, and reach a dot through views: ``permute`` and ``reshape``
    ops that only add or drop size-1 dims. The load's tile keeps its two dims of size > 1
    (``tile_shape``); each dot operand reads it as is or transposed."""
    dots: list          # the dots, in body order
    loads: list         # the distinct loads feeding them, in order of first use
    operands: list      # per dot: [(index into loads, transposed) for operand a, b]
    view_ops: list      # the permutes and reshapes between the loads and the dots
    load_ops: list      # the loads and the ops computing their addresses, in body order


def tile_shape(load) -> tuple:
    """A load's tile without its size-1 dims: the [rows, columns] tile that is staged."""
    return tuple(d for d in load.result.type.shape if d != 1)


def _view_of_load(value, body_ids: set):
    """(load, the views from it to ``value``, transposed) when ``value`` is a body load's
    tile seen through views that keep its two dims of size > 1 (module ``DotOperands``),
    else None."""
    views = []
    while value.owner is not None and value.owner.opcode in ("permute", "reshape") \
            and id(value.owner) in body_ids:
        views.append(value.owner)
        value = value.owner.operands[0]
    load = value.owner
    if load is None or id(load) not in body_ids or \
            load.opcode not in ("load", "descriptor_load") or len(tile_shape(load)) != 2:
        return None
    # Which of the tile's two dims each dim of the current view holds (None: size 1).
    next_axis = iter((0, 1))
    axes = [None if d == 1 else next(next_axis) for d in load.result.type.shape]
    for view in reversed(views):
        if view.opcode == "permute":
            axes = [axes[i] for i in view.attrs["order"]]
            continue
        before = [d for d, axis in zip(view.operands[0].type.shape, axes) if axis is not None]
        if [d for d in view.result.type.shape if d != 1] != before:
            return None
        kept = iter([axis for axis in axes if axis is not None])
        axes = [None if d == 1 else next(kept) for d in view.result.type.shape]
    if axes not in ([0, 1], [1, 0]):
        return None
    return load, views, axes == [1, 0]


def refusal(why: list | None, reason: str, op=None):
    """None, after appending ``reason`` (with ``op``'s source line) to ``why``: the answer
    of the loop analyses that say why a loop keeps its shape (dumped on the loop as
    ``not_pipelined``, ``passes.pipeline``)."""
    if why is not None:
        line = op.loc[1] if op is not None and op.loc is not None else None
        why.append(reason + (f" (line {line})" if line is not None else ""))
    return None


def dot_operand_loads(loop, mixed: bool = False, why: list | None = None,
                      excluded: frozenset = frozenset()) -> DotOperands | None:
    """The loop's dots and the loads feeding them when ``loop``'s body holds no nested
    regions, stores or side effects, at least one dot, and each dot operand is a load of
    the body (pointer or tensor-descriptor one), possibly seen through views
    (``DotOperands``), where those loads and views are read by nothing but each other and
    the dots' operands a and b, and the loads' addresses and masks are pure functions of
    the body's arguments and outside values; else None. The loop shape that moving the
    dots' loads to earlier trips (``prefetch``, ``pipeline``) starts from.

    With ``mixed`` (the pipeline's shape), an operand that is not such a load stays as it
    is: a load that something else reads as well, whose address depends on a load, or
    that is in ``excluded`` counts as no load (``pipeline_shape`` may still copy it ahead
    and read it back into registers). Reductions and scans may then sit in the body (their
    combine regions are pure), and ``if``s holding no loop, stores and atomics (whether
    they may write what is copied ahead is ``pipeline_shape``'s to check); the operand
    loads may be none. ``why``: where None is the answer, the reason is appended to it
    (``refusal``)."""
    ops = loop.regions[0].body
    for o in ops:
        if o.regions and not (mixed and (o.opcode in kir.COMBINING or o.opcode == "if")):
            return refusal(why, f"its body holds a nested {o.opcode}", o)
        if mixed and o.opcode == "if" and any(inner.opcode in ("for", "while")
                                              for inner in kir.walk(ops_of(o))):
            return refusal(why, "its body holds a loop inside an if", o)
        for inner in ([o] if not mixed else kir.walk([o])):
            writes = inner.opcode in ("store", "descriptor_store") or inner.opcode in kir.ATOMICS
            if (writes and not mixed) or (inner.opcode in kir.SIDE_EFFECT_OPS and not writes):
                return refusal(why, f"its body has a {inner.opcode}", inner)
            if mixed and inner.opcode == "descriptor_store":
                return refusal(why, f"its body has a {inner.opcode}", inner)
    dots = [o for o in ops if o.opcode == "dot"]
    if not dots:
        return refusal(why, "its body has no dot")
    body_ids = {id(o) for o in ops}
    users = users_of(ops)
    excluded = set(excluded)
    while True:
        shape = _operand_loads(ops, dots, body_ids, users, mixed, why, excluded)
        if not isinstance(shape, kir.Op):
            return shape
        excluded.add(id(shape))   # mixed: a load that cannot be staged for the dots alone


def ops_of(op) -> list:
    """The ops of every region of ``op``."""
    return [inner for region in op.regions for inner in region.body]


def _operand_loads(ops, dots, body_ids, users, mixed, why, excluded):
    """``dot_operand_loads`` over the loads not in ``excluded``: the DotOperands, None (a
    refusal), or, with ``mixed``, a load that fails a condition and must be excluded."""
    loads, operands, view_ops = [], [], {}
    for dot in dots:
        found = []
        for value in dot.operands[:2]:
            seen = _view_of_load(value, body_ids)
            if seen is not None and id(seen[0]) in excluded:
                seen = None
            if seen is None and mixed:
                found.append(None)
                continue
            if seen is None:
                return refusal(why, "an operand of a dot is not a load of the body (or a view "
                               "of one)", dot)
            load, views, transposed = seen
            if not any(load is known for known in loads):
                loads.append(load)
            view_ops.update((id(v), v) for v in views)
            found.append((next(i for i, known in enumerate(loads) if known is load),
                          transposed))
        operands.append(found)
    if not loads and not mixed:
        return refusal(why, "no operand of a dot is a load of the body")
    # Loads and views feed only views and the dots' operands a and b (not an accumulator).
    readers = set(view_ops) | {id(d) for d in dots}
    view_load = {}
    for dot, found in zip(dots, operands):
        for value, entry in zip(dot.operands[:2], found):
            if entry is not None:
                view = value
                while view.owner is not None and id(view.owner) in view_ops:
                    view_load[id(view.owner)] = loads[entry[0]]
                    view = view.owner.operands[0]
    for produced in loads + list(view_ops.values()):
        for user in users.get(produced.result, []):
            if id(user) not in readers or \
                    (user.opcode == "dot" and user.operands[2] is produced.result):
                if mixed:
                    return view_load.get(id(produced), produced)
                return refusal(why, f"a dot operand's load is also read by a {user.opcode}",
                               user)
    needed = {}
    for load in loads:
        for o in body_slice(load.result, body_ids):
            if o.opcode not in kir.PURE_OPS and o is not load:
                if mixed:
                    return load
                return refusal(why, f"a dot operand's address depends on a {o.opcode}", o)
            needed[id(o)] = o
    return DotOperands(dots, loads, operands, [o for o in ops if id(o) in view_ops],
                       [o for o in ops if id(o) in needed])


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
