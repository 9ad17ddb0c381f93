"""The demand table and the solver of layout assignment (``passes.assign_layouts``' steps 2
and 3).

In: a ``LayoutPlan`` holding the facts (blocked layouts, mma layouts, access layouts), the
values ``mma_residency`` keeps in accumulator fragments and the layouts loops carry; then,
op by op (last first), the ops of a kir function. Out: ``Demands.wanted`` (each value's
layouts, its home first) and ``Demands.homes`` (where each value is computed once). Each
rule of ``DEMANDS`` takes an op and the layouts its result is wanted in and says what it
wants of its operands; ``assign_layouts`` runs them and stores the answer in the plan.
"""
from __future__ import annotations

from ..ir.kir import (ATOMICS, COMBINING, ELEMENTWISE_OPS, REDUCTIONS, SHUFFLES,
                      SIDE_EFFECT_OPS, TERMINATORS)
from .layouts import (SCALAR, THREADS_PER_WARP, Layout, LayoutPlan, permuted_layout,
                      unit_reshape_layout)
from .mma_layout import Mma
from .mma_residency import carried_layout


# -- 3. the solver's bookkeeping ----------------------------------------------------------

class Demands:
    """The layouts each value is wanted in (home first), filled backward by the rules."""

    def __init__(self, plan: LayoutPlan, resident: dict, carried: dict):
        self.plan = plan
        # Elementwise results computed where an accumulator lives (``mma_residency``);
        # views and reductions of resident values follow from the rules below.
        self.epilogue = {v: lay for v, lay in resident.items()
                         if v.owner is not None and v.owner.opcode in ELEMENTWISE_OPS}
        self.resident = resident
        self.carried = carried
        self.wanted: dict = {}      # value -> [layouts], home first
        self.homes: dict = {}
        self.yield_layouts: dict = {}   # a for body's yield -> each carried value's layout

    def want(self, value, layout):
        layouts = self.wanted.setdefault(value, [])
        if layout not in layouts:
            layouts.append(layout)

    def home(self, value, layout=None):
        """``value`` is computed once, in ``layout`` (default: its natural layout)."""
        layout = layout or self.plan.natural(value)
        self.homes[value] = layout
        layouts = self.wanted.setdefault(value, [])
        if layout in layouts:
            layouts.remove(layout)
        layouts.insert(0, layout)

    def want_natural(self, values):
        for value in values:
            self.want(value, self.plan.natural(value))

    def solve(self, ops):
        """Applies each op's rule, last op first."""
        for op in reversed(ops):
            DEMANDS.get(op.opcode, _same_layout)(self, op)


# -- 2. the demand table --------------------------------------------------------------------
# Each rule: (demands, op) -> None. Rules of ops with one result (wrapped in ``_value_op``)
# run only when the result is wanted, and see the layouts it is wanted in.

def _store(demands, op):
    # A store anchors the natural layout of its pointer (or one of its own): the value and
    # mask follow it. 4-byte accumulator elements are stored from their fragments (each
    # 4-lane group writes a whole 32-byte sector), not converted through shared memory.
    layout = demands.plan.access.get(op)
    if layout is None:
        layout = demands.plan.natural(op.operands[0])
        resident = demands.resident.get(op.operands[1])
        if resident is not None and not resident.sliced and \
                op.operands[1].type.element.itemsize >= 4:
            layout = demands.plan.access[op] = resident
    for value in op.operands:
        demands.want(value, layout)


def _descriptor_store(demands, op):
    """A TMA store (``passes.tma_stores``; the others are pointer stores by now): its tile
    is written to shared memory from the fragments it was computed in, or else from its
    natural layout (``mma.store_tile``); no layout of its own is anchored."""
    *scalars, value = op.operands
    demands.want_natural(scalars)
    resident = demands.resident.get(value)
    demands.want(value, resident if resident is not None and not resident.sliced
                 else demands.plan.natural(value))


def _terminator(demands, op):
    layouts = demands.yield_layouts.get(op) or [demands.plan.natural(v) for v in op.operands]
    for value, layout in zip(op.operands, layouts):
        demands.want(value, layout)


def _side_effect(demands, op):
    """Roots like stores: operands in their natural layouts; an atomic's (and a prefetch's
    mask) in its pointer's, where its old values are computed once (their home) and
    converted where wanted."""
    if (op.opcode in ATOMICS or op.opcode == "prefetch") and op.operands[0].type.shape:
        layout = demands.plan.natural(op.operands[0])
        for value in op.operands:
            demands.want(value, layout)
        if op.result in demands.wanted:
            demands.home(op.result, layout)
        return
    demands.want_natural(op.operands)
    if op.result is not None and op.result in demands.wanted:
        demands.home(op.result)


def _combining(demands, op):
    """Reductions and scans work on their operands' natural layout; a scan's results stay
    there, a reduction's come out in its slice along the axis. A combine region runs on one
    register per value: its arguments and body are scalars."""
    if not any(result in demands.wanted for result in op.results):
        return
    resident = demands.resident.get(op.results[0])
    if resident is not None:
        # A reduction across accumulator fragments (``mma_residency``).
        demands.want(op.operands[0], Layout(resident.blocked))
        demands.home(op.results[0], resident)
        for region in op.regions:
            for value in region.args:
                demands.home(value, SCALAR)
            demands.solve(region.body)
        return
    # Every operand where the first is (two shapes' layouts may differ).
    source = demands.plan.natural(op.operands[0])
    for value in op.operands:
        demands.want(value, source)
    for result in op.results:
        if not result.type.shape:
            demands.home(result)
        elif op.opcode == "scan":   # in place: where its operands are
            demands.home(result, source)
        else:
            demands.home(result, Layout(source.blocked, (op.attrs["axis"],)))
    for region in op.regions:
        for value in region.args:
            demands.home(value, SCALAR)
        demands.solve(region.body)


def _for(demands, op):
    body = op.regions[0]
    carried = demands.carried.get(op) or [carried_layout(demands.plan, body, v)
                                          for v in body.terminator.operands]
    demands.yield_layouts[body.terminator] = carried
    for value, layout in zip(op.results, carried):
        demands.home(value, layout)
    for value, layout in zip(body.args, [SCALAR] + carried):
        demands.home(value, layout)
    demands.solve(body.body)
    operand_layouts = [demands.plan.natural(v) for v in op.operands[:3]] + carried
    for value, layout in zip(op.operands, operand_layouts):
        demands.want(value, layout)


def _branches(demands, op):
    """``if`` / ``while``: results and block arguments in their natural layouts (an if's
    result where a branch computes it in an accumulator's layout: ``mma_residency``). What
    crosses into them (a while's initial values, what each region's terminator hands on)
    is wanted in the layout of the value receiving it, which may differ from its own
    natural layout (an async copy's addresses, ``copy_layouts``)."""
    natural = demands.plan.natural
    # An if's results may stay in a dot's mma layout (``mma_residency``).
    layouts = demands.carried.get(op) or [natural(v) for v in op.results]
    for value, layout in zip(op.results, layouts):
        demands.home(value, layout)
    for region in op.regions:
        for value in region.args:
            demands.home(value)
    if op.opcode == "if":
        for region in op.regions:
            demands.yield_layouts[region.terminator] = layouts
        demands.want_natural(op.operands)
    else:
        before, after = op.regions
        demands.yield_layouts[before.terminator] = [SCALAR] + [natural(v) for v in after.args]
        demands.yield_layouts[after.terminator] = [natural(v) for v in before.args]
        for value, receiver in zip(op.operands, before.args):
            demands.want(value, natural(receiver))
    for region in reversed(op.regions):
        demands.solve(region.body)


def _value_op(rule):
    """A rule for an op with one result: nothing to do unless the result is wanted; a
    result an accumulator epilogue computes stays in the accumulator's layout."""
    def apply(demands, op):
        if op.result is None or op.result not in demands.wanted:
            return
        epilogue = demands.epilogue.get(op.result)
        if epilogue is not None:
            # Computed where the accumulator lives; converted once, from there, to
            # whatever layouts its users want.
            demands.home(op.result, epilogue)
            for value in op.operands:
                demands.want(value, epilogue)
            return
        home = demands.homes.get(op.result)
        if home is not None and op.opcode in ELEMENTWISE_OPS:
            # Computed once where a consumer placed it (``_expand_dims``), converted from
            # there to the other layouts it is wanted in.
            rule(demands, op, [home])
            return
        rule(demands, op, demands.wanted[op.result])
    return apply


@_value_op
def _dot(demands, op, wanted):
    mma = demands.plan.mma.get(op)
    if mma is None:
        _shuffle(demands, op, wanted)
        return
    # a and b are staged through shared memory from their natural layouts, the accumulator
    # fragments they were computed in, or (stored transposed) the layout their loads read;
    # or they are already there (a pipelined loop's shared_read); the accumulator lives in
    # the mma fragments.
    for position, operand in enumerate(op.operands[:2]):
        resident = demands.resident.get(operand)
        view_source = demands.plan.a_view_source(op) if position == 0 else None
        if view_source is not None:
            # Stored as it is from its fragments and read M-major (``fragment_views``);
            # the transpose itself is not wanted anywhere.
            demands.want(view_source, demands.resident[view_source])
        elif (op, position) in demands.plan.stored_transposed:
            # Stored transposed from the layout its loads read it in (``column_read_operands``).
            demands.want(operand, demands.plan.stored_transposed[op, position])
        elif operand.owner is not None and operand.owner.opcode == "shared_read":
            demands.want(operand.owner.operands[0], SCALAR)
        elif resident is not None and not resident.sliced:
            # Stored from the fragments it was computed in (``mma.store_tile``).
            demands.want(operand, resident)
        else:
            demands.want(operand, demands.plan.natural(operand))
    demands.want(op.operands[2], Layout(mma))
    demands.home(op.result, Layout(mma))


def _shuffle(demands, op, wanted):
    """Elements change places through shared memory: read from the operands' natural
    layouts, written out in the result's."""
    demands.want_natural(op.operands)
    demands.home(op.result)


@_value_op
def _reshape(demands, op, wanted):
    """A reshape that only adds or drops size-1 dimensions moves no element: it is
    recomputed in each layout it is wanted in, from its operand in the same layout less
    (or plus) those dimensions. Its operand is then converted once, straight to where the
    result is wanted (an accumulator to a rank-3 store's layout), not first to its own
    rank's layout and then through shared memory again. Any other reshape is a shuffle."""
    source = [unit_reshape_layout(layout, op.result.type.shape, op.operands[0].type.shape)
              for layout in wanted]
    if None in source:
        _shuffle(demands, op, wanted)
        return
    for layout in source:
        demands.want(op.operands[0], layout)


@_value_op
def _permute(demands, op, wanted):
    """A transpose wanted only in the transposed view of its operand's natural layout (a
    dot storing it K-major: ``layout_facts.transposed_operand_views``) moves no element:
    its operand's registers there are its own, relabeled. Any other permute is a shuffle."""
    operand = op.operands[0]
    natural = demands.plan.natural(operand)
    view = permuted_layout(natural, op.attrs["order"])
    if view is None or any(layout != view for layout in wanted):
        _shuffle(demands, op, wanted)
        return
    demands.want(operand, natural)


@_value_op
def _gather(demands, op, wanted):
    """The source goes through shared memory from its natural layout; each thread reads
    the elements its own index registers name, so the index is wanted where the result
    lives."""
    demands.home(op.result)
    source, index = op.operands
    demands.want_natural([source])
    demands.want(index, demands.homes[op.result])


@_value_op
def _histogram(demands, op, wanted):
    """The values and their mask are counted from one layout, the values' natural one."""
    demands.home(op.result)
    layout = demands.plan.natural(op.operands[0])
    for value in op.operands:
        demands.want(value, layout)


def _map_elementwise(demands, op):
    """Arguments and results in the results' natural layout; the region runs on one
    register per value, so its arguments and body are scalars."""
    if not any(result in demands.wanted for result in op.results):
        return
    layout = demands.plan.natural(op.results[0])
    for result in op.results:
        demands.home(result, layout)
    for value in op.operands:
        demands.want(value, layout)
    for value in op.regions[0].args:
        demands.home(value, SCALAR)
    demands.solve(op.regions[0].body)


def _inline_asm(demands, op):
    """The arguments and every result in one layout, the results' natural one: each run
    of the assembly takes the same registers of all of them."""
    layout = demands.plan.natural(op.results[0])
    for result in op.results:
        demands.home(result, layout)
    for value in op.operands:
        demands.want(value, layout)


SLICE_COPIES_LOADED = 4   # threads holding each element of a slice: above, load and convert


def _slice_copies(layout: Layout) -> int:
    """How many threads hold each element of a block laid out in a slice of ``layout``'s
    parent: the threads and warps the parent spreads along the axes sliced away."""
    copies = 1
    for axis in layout.sliced:
        copies *= layout.blocked.threads_per_warp[axis] * layout.blocked.warps_per_cta[axis]
    return copies


@_value_op
def _load(demands, op, wanted):
    """Loaded once: in a layout of its own where it reads memory along another dimension
    than the last (``layout_facts.access_layouts``), else in a full (unsliced) blocked
    layout when one is wanted: that is where the vector width was proven. A load wanted
    only in a dot's mma layout (added to the accumulator a loop keeps in it) is loaded in
    its natural layout and converted.

    A load wanted only in a slice is loaded there when the slice holds each element in few
    threads; where it would hold it in ``SLICE_COPIES_LOADED`` or more and the block has
    more elements than the program has threads, it is loaded once in its natural layout
    (in vectors) and converted, as Triton does: liger's mhc post_res forward read a [256]
    row as a slice of a [256, 64] tile, 160 scalar loads a thread (Triton's: 9), and
    spilled."""
    resident = demands.resident.get(op.result)
    if resident is not None and "staged" in op.attrs:
        # Read from its stage in the fragments of the dot its chain feeds
        # (``mma_residency.operand_prologues``).
        demands.home(op.result, resident)
        for value in op.operands:
            demands.want(value, resident)
        return
    if op in demands.plan.access:
        # Read in vectors along another dimension (``layout_facts.access_layouts``).
        demands.home(op.result, demands.plan.access[op])
        for value in op.operands:
            demands.want(value, demands.plan.access[op])
        return
    threads = demands.plan.num_warps * THREADS_PER_WARP
    in_fragments = any(layout is not SCALAR and isinstance(layout.blocked, Mma)
                       for layout in wanted)
    if (len(wanted) > 1 or in_fragments) and len(op.result.type.shape) == 1 and \
            op.result.type.numel <= threads and not op.attrs.get("volatile"):
        # A vector of at most one element a thread, wanted in several layouts (fla's gates
        # g, as rows and columns of two accumulators) or in a slice of an accumulator's
        # (fla's kkt solve: beta scaling four [16, 16] blocks): loaded in each, a few
        # cached bytes, where each conversion would cost a round trip through shared
        # memory and two barriers.
        for layout in wanted:
            for value in op.operands:
                demands.want(value, layout)
        return
    memory = [layout for layout in wanted
              if layout is SCALAR or not isinstance(layout.blocked, Mma)]
    memory.sort(key=lambda layout: layout is SCALAR or bool(layout.sliced))
    home = memory[0] if memory else demands.plan.natural(op.result)
    if home is not SCALAR and home.sliced and _slice_copies(home) >= SLICE_COPIES_LOADED \
            and op.result.type.numel > threads:
        home = demands.plan.natural(op.result)
    demands.home(op.result, home)
    for value in op.operands:
        demands.want(value, home)


@_value_op
def _splat(demands, op, wanted):
    demands.want(op.operands[0], SCALAR)


@_value_op
def _expand_dims(demands, op, wanted):
    """The operand in the slice of each layout the result is wanted in. Where the operand is
    elementwise ops on a reduction's result and the reduction's slice holds it in fewer
    registers a thread (``_reduced_source``), the chain is computed there (the operand's
    home) and converted once, where it is broadcast, instead of the reduction's result
    being converted to the wide slice right away.

    Why: a row of a [32, 256] tile laid out [1, 32] x [2, 2] lanes and warps is 16
    registers a thread; of a [32, 32] tile's, 2. liger's mhc norm backward reduced a
    [32, 32] product and loaded a [32] row, both for a factor of its [32, 256] tile, and
    held them in the tile's slice across its two dots: 255 registers and 24 B spilled on
    sm_90 (Triton: 255, none); computed in the reduction's slice, 246 and none."""
    operand = op.operands[0]
    for layout in wanted:
        if layout is SCALAR or not operand.type.shape:
            # A 0-d operand lives in every thread (SCALAR): the result is its splat.
            demands.want(operand, SCALAR)
            continue
        axis = layout.parent_axis(op.attrs["axis"])
        sliced = Layout(layout.blocked, tuple(sorted(layout.sliced + (axis,))))
        source = _reduced_source(demands, operand, sliced)
        if source is not None and operand not in demands.homes:
            demands.home(operand, source)
        demands.want(operand, sliced)


def _registers(layout: Layout, shape: tuple) -> int:
    """Registers a thread holds of a block of ``shape`` laid out in ``layout``."""
    count = 1
    for axis, size in enumerate(layout.embed(shape)):
        count *= len(layout.blocked.slot_offsets(axis, size))
    return count


def _reduced_source(demands, value, wanted: Layout):
    """In: an elementwise ``value`` wanted in the slice ``wanted``. Out: the slice (a
    reduction's home) that a reduction reached back through elementwise ops of ``value``'s
    shape leaves its result in, where it holds fewer registers a thread than ``wanted``
    (the fewest of several), or None. Reductions across accumulator fragments and values an
    accumulator epilogue computes keep the layouts ``mma_residency`` gave them."""
    if isinstance(wanted.blocked, Mma) or value.owner is None or \
            value.owner.opcode not in ELEMENTWISE_OPS or value in demands.epilogue:
        return None
    shape = value.type.shape
    pending, seen = [value], set()
    best = None
    while pending:
        link = pending.pop()
        if id(link) in seen or link.owner is None or link.type.shape != shape:
            continue
        seen.add(id(link))
        owner = link.owner
        if owner.opcode in ELEMENTWISE_OPS:
            pending.extend(owner.operands)
        elif owner.opcode in REDUCTIONS and owner.results[0] not in demands.resident:
            source = demands.plan.natural(owner.operands[0])
            home = Layout(source.blocked, (owner.attrs["axis"],))
            if _registers(home, shape) < _registers(best or wanted, shape):
                best = home
    return best


@_value_op
def _same_layout(demands, op, wanted):
    """Elementwise and index ops: recomputed in every layout their result is wanted in."""
    for layout in wanted:
        for value in op.operands:
            demands.want(value, layout)


def _wgmma_wait(demands, op):
    """The registers pass through the wait: each result where its operand lives (the
    accumulator fragments of a dot, or a loop-carried accumulator)."""
    for value, result in zip(op.operands, op.results):
        layout = demands.resident.get(result) or demands.resident.get(value) or \
            demands.plan.natural(value)
        demands.home(result, layout)
        demands.want(value, layout)


DEMANDS = {
    "store": _store,
    "descriptor_store": _descriptor_store,
    **dict.fromkeys(TERMINATORS, _terminator),
    **dict.fromkeys(SIDE_EFFECT_OPS, _side_effect),
    **dict.fromkeys(COMBINING, _combining),
    "for": _for, "if": _branches, "while": _branches,
    "dot": _dot,
    **dict.fromkeys(SHUFFLES, _value_op(_shuffle)),
    "reshape": _reshape,
    "permute": _permute,
    "sort": _value_op(_shuffle),   # through shared memory like a shuffle
    "gather": _gather,
    "inline_asm": _inline_asm,
    "map_elementwise": _map_elementwise,
    "histogram": _histogram,
    "load": _load,
    "splat": _splat,
    "expand_dims": _expand_dims,
    "wgmma_wait": _wgmma_wait,
}   # any other op: _same_layout
