"""Layout conversions within a warp: shuffles instead of a round trip through shared memory.

Two kinds. Between layouts over blocked parents that keep every element in its warp (a
row sum wanted in the layout of a 1-d store, a column of a tile used as a row), each
target register comes from a lane and register the plan computes from the reader's lane
and warp (``backend.lane_plan``): one ``shfl.idx`` per target register (a few where the
reader picks among the registers it may be in), none where the thread holds the element
already. Triton converts such layouts within the warp as well.

Between the slices of a one-warp accumulator: a 1-d value's registers in one slice of a
one-warp accumulator layout (``Mma`` with
warps (1, 1): every warp holds all of it), wanted in the other slice: a column vector (the
sum of a dot's result down its columns, ``slice[0]``) used as a row index (``x[:, None]``,
``slice[1]``), or the reverse. Out: its registers in the target slice, one ``shfl.idx`` per
register (``convertible`` says which conversions; the others go through
``backend.shared``). fla's triangular solves convert a row of the inverse this way on every
trip of their forward substitution: two shuffles instead of a store, a load and two
barriers.

In an m16n8 fragment lane (g, t) holds rows g and g + 8 and columns 2t, 2t + 1 of each tile,
so ``slice[0]`` register 2 tn + j is column 8 tn + 2t + j (the same for every g) and
``slice[1]`` register 2 tm + i is row 16 tm + 8 i + g (the same for every t):
- to rows: element r = 16 tm + 8 i + g is column r of tile 2 tm + i at 2t' + j = g; lane
  (g, g / 2) holds it in register 2 (2 tm + i) + g % 2, and picks that register by its own
  g before the shuffle (the receiver's g is the same);
- to columns: element c = 8 tn + 2t + j is row c at g' = 2t + j of row tile tn / 2, half
  tn % 2: register tn of lane (2t + j, t).
"""
from __future__ import annotations

import llvmlite.ir as ir

from ..passes.layouts import Layout
from ..passes.mma_layout import Mma
from . import lane_plan
from .llvm_types import I32
from .warp_shuffle import shuffle


def _lane_plan(value, source, target):
    if not value.type.shape:
        return None
    bits = 64 if value.element.is_ptr() else max(value.element.itemsize * 8, 1)
    return lane_plan.plan(tuple(value.type.shape), source, target, bits)


def convertible(value, source, target) -> bool:
    """Whether ``value`` goes from ``source`` to ``target`` by shuffles (see the module)."""
    if not (isinstance(source, Layout) and isinstance(target, Layout)):
        return False
    if _lane_plan(value, source, target) is not None:
        return True
    parent = source.blocked
    return isinstance(parent, Mma) and target.blocked == parent and \
        tuple(parent.warps_per_cta) == (1, 1) and not parent.warp_columns and \
        {source.sliced, target.sliced} == {(0,), (1,)} and len(value.type.shape) == 1 and \
        value.type.shape[0] % 16 == 0


def _affine(ctx, found: lane_plan.Affine):
    """``found`` at this thread: its lane and warp bits moved into place by shifts, xored
    onto the constant (bits with a column of several bits by a select)."""
    b = ctx.builder
    c = lambda v: ir.Constant(I32, v)   # noqa: E731
    result = c(found.constant)
    for bit, column in enumerate(found.columns):
        if not column:
            continue
        source, source_bit = (ctx.threads.lane, bit) if bit < lane_plan.LANE_BITS else \
            (ctx.threads.warp, bit - lane_plan.LANE_BITS)
        chosen = b.and_(source, c(1 << source_bit))
        target_bit = column.bit_length() - 1
        if column == 1 << target_bit:   # one bit moved: a shift
            if target_bit > source_bit:
                chosen = b.shl(chosen, c(target_bit - source_bit))
            elif target_bit < source_bit:
                chosen = b.lshr(chosen, c(source_bit - target_bit))
        else:
            chosen = b.select(b.icmp_unsigned("!=", chosen, c(0)), c(column), c(0))
        result = b.xor(result, chosen)
    return result


def _shuffle(ctx, register, lane):
    """``shfl.idx`` of any register, pointers as 64-bit integers."""
    b = ctx.builder
    if isinstance(register.type, ir.PointerType):
        moved = shuffle(ctx, b.ptrtoint(register, ir.IntType(64)), lane, "idx")
        return b.inttoptr(moved, register.type)
    return shuffle(ctx, register, lane, "idx")


def _pick(ctx, register: lane_plan.Affine, values: list):
    """Of ``values`` (one per register ``register`` may name, in ``image`` order), the one
    it names at this thread."""
    b = ctx.builder
    value = values[0]
    if len(values) > 1:
        index = _affine(ctx, register)
        for r, candidate in zip(register.image()[1:], values[1:]):
            value = b.select(b.icmp_unsigned("==", index, ir.Constant(I32, r)), candidate,
                             value)
    return value


def _convert_blocked(ctx, registers, found: lane_plan.LanePlan) -> list:
    done: dict = {}
    for source in found.sources:
        if source in done:
            continue
        candidates = source.register.image()
        if source.picked_by == "sender":
            value = _pick(ctx, source.register, [registers[r] for r in candidates])
            done[source] = _shuffle(ctx, value, _affine(ctx, source.lane))
            continue
        if source.local:
            picked = [registers[r] for r in candidates]
        else:
            lane = _affine(ctx, source.lane)
            picked = [_shuffle(ctx, registers[r], lane) for r in candidates]
        done[source] = _pick(ctx, source.register, picked)
    return [done[source] for source in found.sources]


def convert(ctx, value, registers, source, target) -> list:
    """``value``'s registers in ``target``, shuffled within each warp from ``source``."""
    found = _lane_plan(value, source, target)
    if found is not None:
        return _convert_blocked(ctx, registers, found)
    b = ctx.builder
    c = lambda v: ir.Constant(I32, v)   # noqa: E731
    lane = ctx.threads.lane
    group, quad_lane = b.udiv(lane, c(4)), b.urem(lane, c(4))
    size = value.type.shape[0]
    if target.sliced == (1,):
        # Rows from columns: lane (g, g / 2) sends register 2k + g % 2 for row register k.
        odd = b.icmp_unsigned("!=", b.and_(group, c(1)), c(0))
        sender = b.add(b.mul(group, c(4)), b.lshr(group, c(1)))
        out = []
        for k in range(size // 8):
            chosen = b.select(odd, registers[2 * k + 1], registers[2 * k])
            out.append(shuffle(ctx, chosen, sender, "idx"))
        return out
    # Columns from rows: column register 2 tn + j comes from lane (2t + j, t), register tn.
    out = []
    for k in range(size // 4):
        tn, j = divmod(k, 2)
        sender = b.add(b.mul(b.add(b.mul(quad_lane, c(2)), c(j)), c(4)), quad_lane)
        out.append(shuffle(ctx, registers[tn], sender, "idx"))
    return out
