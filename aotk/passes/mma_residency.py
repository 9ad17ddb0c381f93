"""Accumulator residency: which values stay in a tensor-core accumulator's layout.

In: a kir ``Function`` and its ``LayoutPlan`` with the mma layout chosen for each ``dot``
(``passes.mma_layout``). Out: ``mma_residency`` gives (resident, carried): each value
computed where a dot left its accumulator (value -> ``Layout`` of an ``Mma``, sliced or
not) and, for each ``for`` op, the layout each loop-carried value keeps
(``carried_layout``), for each ``if`` op, the layout of each result.
``passes.assign_layouts`` takes both as facts: epilogues, reductions of dot results and
what a loop carries are then computed in the fragments, with no conversion through shared
memory (flash attention's softmax). ``fragment_views`` then names the mma.sync dots whose A
is the transpose of such a value, read from that value's own tile.
"""
from __future__ import annotations

from ..ir.kir import COMBINING, ELEMENTWISE_OPS, Function, walk
from .layouts import Layout, LayoutPlan
from .mma_layout import Mma
from .rewrite import users_of


def carried_layout(plan: LayoutPlan, region, value):
    """A loop-carried accumulator of a dot keeps the dot's mma layout; anything else its
    natural layout. The walk back from the yield follows ops of the carried value's shape
    only, and a dot counts only at that shape: flash attention's row sums l_i come from a
    reduction of the q @ k.T scores, not from an accumulator."""
    inside = {id(op) for op in walk(region.body)}
    pending, seen = [value], set()
    while pending:
        v = pending.pop()
        owner = v.owner
        if owner is None or id(owner) not in inside or id(v) in seen:
            continue
        seen.add(id(v))
        if v.type.shape != value.type.shape:
            continue
        if owner.opcode == "dot" and plan.mma.get(owner) is not None:
            return Layout(plan.mma[owner])
        if owner.opcode == "wgmma_wait":   # the value it passes on
            pending.append(next(operand for operand, result in
                                zip(owner.operands, owner.results) if result is v))
        elif owner.opcode == "if":          # what either branch yields for it
            index = owner.results.index(v)
            pending.extend(branch.terminator.operands[index] for branch in owner.regions)
        elif owner.result is not None:
            pending.extend(owner.operands)
    return plan.natural(value)


WILD = "carried"   # a loop-carried value while its layout is being guessed: fits any


def mma_residency(plan: LayoutPlan, function: Function) -> tuple:
    """(resident, carried): which values stay in a tensor-core accumulator layout, and the
    layout each loop carries each value in.

    Resident (value -> Layout of an ``Mma`` parent, sliced or not), following the values
    forward: a dot's result; elementwise ops whose block operands are resident in one
    layout (index values built from splats, constants and aranges fit any: they are
    recomputed where wanted, as a causal mask is; so do broadcasts of smaller blocks, whose
    sources are converted to the slice instead); ``broadcast`` of a resident value and
    ``expand_dims`` of a resident slice along its axis; what a ``wgmma_wait`` passes on of a
    resident value; a ``reduce`` of a resident value, in its slice along the axis
    (``backend.reduce`` reduces across the fragments). Flash attention's row maxima and
    sums, its probabilities p and the rescaled accumulator are then computed where q @ k.T
    left the scores, with no conversion through shared memory. Not resident in the end: an
    elementwise value of one resident operand whose users are all elementwise and computed
    elsewhere (``_drop_conversion_only``).

    An ``if`` result is resident where a branch yields a resident (unsliced) value: the
    other branch's value is converted at its yield. fla's chunk_gla_fwd_kernel_o adds a
    dot to its loop's accumulator under an ``if``: the accumulator converted to and from
    its mma layout twice a trip before.

    Carried (for op -> [Layout] per carried value; if op -> [Layout] per result): a dot's
    accumulator in its mma layout (``carried_layout``); a value the body computes
    resident, such as attention's running maximum and sum, in that layout, guessed by
    treating the block arguments as fitting any layout and then checked without the guess
    (where that guess leaves the next value fitting any layout, the layout its initial
    value is resident in); anything else its natural layout."""
    resident: dict = {}
    carried: dict = {}

    def layout_of(value):
        found = resident.get(value)
        if found is not None:
            return found
        owner = value.owner
        if owner is not None and owner.opcode in ("splat", "constant", "arange"):
            return WILD   # recomputed in whatever layout a user wants
        if owner is not None and owner.opcode == "broadcast":
            # A smaller block repeated (a row or column vector): where the result is
            # wanted in an accumulator's layout, that smaller block is converted to the
            # slice of it, not the accumulator to the block's layout. fla's chunk_o
            # scales q @ h by exp(g)[:, None] and masks q @ k by a causal mask of gates.
            return WILD
        return None

    def elementwise(op):
        found = set()
        for value in op.operands:
            layout = layout_of(value)
            if layout is None:
                return None
            found.add(layout)
        found.discard(WILD)
        if len(found) > 1:
            return None
        return found.pop() if found else WILD

    def visit(ops):
        for op in ops:
            if op.opcode == "for":
                loop(op)
                continue
            if op.regions and op.opcode not in COMBINING:
                for region in op.regions:   # if / while: their loops, their values
                    visit(region.body)
                if op.opcode == "if":
                    branch_results(op)
                continue
            if op.opcode == "wgmma_wait":   # registers passed through
                for value, result in zip(op.operands, op.results):
                    if resident.get(value) is not None:
                        resident[result] = resident[value]
                continue
            if op.result is None or op.regions and op.opcode != "reduce" or \
                    not op.result.type.shape:
                continue
            layout = None
            if op.opcode == "dot" and plan.mma.get(op) is not None:
                layout = Layout(plan.mma[op])
            elif op.opcode == "reduce" and len(op.operands) == 1:
                source = resident.get(op.operands[0])
                axis = op.attrs["axis"]
                if isinstance(source, Layout) and not source.sliced and \
                        op.operands[0].type.shape[axis] % source.blocked.tile(axis) == 0:
                    layout = Layout(source.blocked, (axis,))
            elif op.opcode == "expand_dims":
                source = layout_of(op.operands[0])
                if source is WILD:
                    layout = WILD
                elif isinstance(source, Layout) and source.sliced == (op.attrs["axis"],):
                    layout = Layout(source.blocked)
            elif op.opcode == "broadcast":
                source = layout_of(op.operands[0])
                if source is WILD or isinstance(source, Layout) and not source.sliced:
                    layout = source
            elif op.opcode in ELEMENTWISE_OPS:
                layout = elementwise(op)
            if layout is not None:
                resident[op.result] = layout

    def branch_results(op):
        layouts = []
        for index, result in enumerate(op.results):
            found = [resident.get(branch.terminator.operands[index]) for branch in op.regions]
            full = [lay for lay in found if isinstance(lay, Layout) and not lay.sliced and
                    isinstance(lay.blocked, Mma)]
            layouts.append(full[0] if full else plan.natural(result))
            if full:
                resident[result] = full[0]
        carried[op] = layouts

    def body_yields(body, guesses):
        """The yields' resident layouts with the block arguments resident in ``guesses``."""
        for arg, guess in zip(body.args[1:], guesses):
            resident.pop(arg, None)
            if guess is not None:
                resident[arg] = guess
        for op in walk(body.body):
            for result in op.results:
                resident.pop(result, None)
        visit(body.body)
        return [resident.get(v) for v in body.terminator.operands]

    def loop(op):
        body = op.regions[0]
        layouts = [carried_layout(plan, body, v) for v in body.terminator.operands]
        accumulators = [isinstance(lay, Layout) and isinstance(lay.blocked, Mma)
                        for lay in layouts]
        guesses = [lay if acc else WILD for lay, acc in zip(layouts, accumulators)]
        guessed = body_yields(body, guesses)
        for index, found in enumerate(guessed):
            if found is WILD:
                # The body fits any layout (it only blends the value with broadcast rows
                # and masks): the layout its initial value is resident in. fla's
                # triangular solves update a block of dot results row by row in a loop;
                # carried in their natural layout, they were converted on entry and every
                # trip's reductions of them ran across 16 lanes instead of 8.
                found = resident.get(op.operands[3 + index])
            if not accumulators[index] and isinstance(found, Layout) and \
                    isinstance(found.blocked, Mma) and \
                    op.results[index].type.shape == body.terminator.operands[index].type.shape:
                layouts[index] = found
        # Checked without the guess: a carried value keeps its layout only if the body
        # then computes its next value in it; otherwise its natural layout, and again.
        for _ in range(len(layouts) + 1):
            mma = [lay if isinstance(lay, Layout) and isinstance(lay.blocked, Mma) else None
                   for lay in layouts]
            yields = body_yields(body, mma)
            wrong = [i for i, lay in enumerate(mma)
                     if lay is not None and not accumulators[i] and yields[i] != lay]
            if not wrong:
                break
            for i in wrong:
                layouts[i] = plan.natural(body.terminator.operands[i])
        carried[op] = layouts
        for result, layout in zip(op.results, layouts):
            if isinstance(layout, Layout) and isinstance(layout.blocked, Mma):
                resident[result] = layout

    visit(function.body)
    resident = {v: lay for v, lay in resident.items() if lay is not WILD}
    _drop_conversion_only(function, resident)
    resident.update(operand_prologues(plan, function, resident))
    return resident, carried


def operand_prologues(plan: LayoutPlan, function: Function, resident: dict) -> dict:
    """{value: Layout}: a tensor-core dot's A computed by elementwise ops from loads a
    pipelined loop staged (and splats, constants, aranges, broadcasts of smaller blocks),
    each value used once: the chain is computed in the dot's mma layout over A's shape, its
    staged loads read from their stage in it, so A stays in registers
    (``backend.register_operands``) instead of being computed in its natural layout,
    stored to shared memory and read back behind a barrier. fla's chunk_fwd_kernel_h gates
    its keys, ``b_k * exp2(b_gk_last[:, None] - b_gk)``, before ``tl.dot(b_k, b_v, b_h)``;
    Triton reads both loads into the dot operand's layout and computes the gate there."""
    users = users_of(function.body)
    found = {}
    for op in walk(function.body):
        mma = plan.mma.get(op) if op.opcode == "dot" else None
        a = op.operands[0] if mma is not None else None
        if a is None or a in resident or a.owner is None \
                or a.owner.opcode not in ELEMENTWISE_OPS or not _a_stays_in_registers(plan, op):
            continue
        chain = _staged_prologue(a, users)
        for value in chain or ():
            found[value] = Layout(mma)
    return found


def _a_stays_in_registers(plan: LayoutPlan, op) -> bool:
    """Whether a dot takes an A computed in its mma layout from those registers
    (``backend.register_operands``): warps tile only M, A is not stored M-major, and A is
    16-bit, or fp32 on mma.sync (wgmma reads a tf32 A from shared memory only: the chain
    in fragments would only change how A is stored there)."""
    mma, a = plan.mma[op], op.operands[0]
    element = a.element
    fits = element.itemsize == 2 and element.is_floating() or \
        element.is_fp32() and mma.instruction == "mma.sync"
    return fits and mma.warps_per_cta[1] == 1 and not mma.warp_columns and \
        (op, 0) not in plan.stored_transposed


def _staged_prologue(a, users) -> list | None:
    """The values of ``a``'s elementwise chain down to its staged loads, or None where a
    value has another user, a leaf is something else, or no leaf is a staged load."""
    chain, pending, staged = [], [a], False
    while pending:
        value = pending.pop()
        owner = value.owner
        if owner is None:
            return None
        if owner.opcode in ("splat", "constant", "arange", "broadcast"):
            continue   # recomputed where wanted; a broadcast's source converted to the slice
        if len(users.get(value, ())) != 1 or value.type.shape != a.type.shape:
            return None
        if owner.opcode == "load" and "staged" in owner.attrs:
            chain.append(value)
            staged = True
        elif owner.opcode in ELEMENTWISE_OPS:
            chain.append(value)
            pending.extend(owner.operands)
        else:
            return None
    return chain if staged else None


def _drop_conversion_only(function: Function, resident: dict) -> None:
    """Takes out of ``resident`` the elementwise values of one resident operand that are
    kept in the fragments only to be converted: every user an elementwise op computed in
    another layout. Such a value is computed in its users' layout instead, from its
    operand's conversion there, which one conversion serves for all of them. liger's
    SwiGLU backward (dGU) scales the accumulator by a constant in two chains: each product
    was resident and went through shared memory on its own, two 64x128 fp32 conversions
    live at once where one of the accumulator serves both (sm_90: 255 registers and 64
    bytes spilled; 168 without the scaling). A value of two resident operands stays: it is
    one conversion where computing it elsewhere would be two."""
    users = users_of(function.body)
    changed = True
    while changed:
        changed = False
        for value in list(resident):
            owner = value.owner
            if owner is None or owner.opcode not in ELEMENTWISE_OPS or \
                    sum(operand in resident for operand in owner.operands) > 1:
                continue
            found = users.get(value, ())
            if found and all(user.opcode in ELEMENTWISE_OPS and user.result not in resident
                             for user in found):
                del resident[value]
                changed = True


def fragment_views(plan: LayoutPlan, function: Function, resident: dict) -> set:
    """{(dot, 0)}: mma.sync dots whose A is ``tl.trans(x)`` (``permute`` of order (1, 0))
    of a 2-d fp16 / bf16 / fp32 (tf32) value x resident in unsliced accumulator fragments.
    Such a dot stores x as it is, row-major, straight from its fragments, and reads that
    [K, M] tile M-major (``ldmatrix.trans`` for 16-bit elements, element loads for tf32):
    x^T is never computed, where it went through shared memory to be transposed into a
    blocked layout and was then stored again. A dot reading x as it is shares that tile
    (``backend.operand_tiles``). fla's chunk_bwd_kernel_dqkwg: ``dq += ds @ k`` and
    ``dk += tl.trans(ds) @ q`` over one stored ds, as Triton does. Only transposes that
    nothing else takes (another user computes it anyway)."""
    found = set()
    for op in walk(function.body):
        mma = plan.mma.get(op) if op.opcode == "dot" else None
        if mma is None or mma.instruction != "mma.sync" or (op, 0) in plan.stored_transposed:
            continue
        view = op.operands[0].owner
        if view is None or view.opcode != "permute" or tuple(view.attrs["order"]) != (1, 0):
            continue
        source = view.operands[0]
        layout = resident.get(source)
        if layout is None or layout.sliced or len(source.type.shape) != 2 or \
                source.element.itemsize not in (2, 4) or not source.element.is_floating():
            continue
        found.add((op, 0))
    uses: dict = {}
    for op in walk(function.body):
        for index, value in enumerate(op.operands):
            uses.setdefault(value, []).append((op, index))
    return {(dot, index) for dot, index in found
            if all(use in found for use in uses[dot.operands[0]])}
