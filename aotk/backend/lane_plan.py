"""Shuffle plans: which lane and register each register of a conversion comes from.

In: a value's shape and two layouts over blocked parents (sliced or not) that place every
element in the same warp. Out: a ``LanePlan`` per conversion, or None: for each register
of the target layout, the lane it comes from and that lane's register, each an affine
function (over GF(2)) of the reading thread's lane and warp bits, so that the reader
computes them with a few shifts and xors: one shuffle per register the sender may hold it
in, then a pick among them; none where the reader holds the element itself.
``backend.warp_conversions`` emits the shuffles; without a plan the conversion goes through
shared memory (``backend.shared``).

Everything here is static: element positions are computed in Python with the same
formulas ``backend.geometry`` emits as index math (thread base per axis, wrapped to the
shape where the layout's tile is larger, plus the register's constant offset).
"""
from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass

from ..passes.layouts import THREADS_PER_WARP, Blocked, Layout

LANE_BITS = 5
# Above this many shuffles a conversion stays in shared memory: its stores and loads are
# vectors and one barrier pair, where the shuffles move one 32-bit piece each.
MAX_SHUFFLES = 32
# Larger targets (whole tiles) are not planned at all: the search is per register.
MAX_TARGET_REGISTERS = 64


@dataclass(frozen=True)
class Affine:
    """constant ^ (xor of columns[i] over the set bits i of the thread's lane, then warp)."""
    constant: int
    columns: tuple

    def at(self, lane: int, warp: int) -> int:
        value = self.constant
        for bit, column in enumerate(self.columns):
            if (lane | warp << LANE_BITS) >> bit & 1:
                value ^= column
        return value

    def image(self) -> list:
        """Every value it takes, smallest first."""
        values = {self.constant}
        for column in self.columns:
            values |= {v ^ column for v in values}
        return sorted(values)


@dataclass(frozen=True)
class LaneSource:
    """Where one target register comes from: the lane ``lane`` names (from the reader's
    lane and warp) and the register ``register`` names: from the reader's bits (``picked_by``
    "reader": one shuffle per register it may be, the reader picks) or from the sender's
    own ("sender": the sender picks, one shuffle)."""
    register: Affine
    lane: Affine
    picked_by: str

    @property
    def local(self) -> bool:
        """The reader itself holds it (no shuffle; at most a pick among its registers)."""
        return self.lane.constant == 0 and all(
            c == (1 << i if i < LANE_BITS else 0) for i, c in enumerate(self.lane.columns))

    def shuffles(self) -> int:
        if self.local:
            return 0
        return 1 if self.picked_by == "sender" else len(self.register.image())


@dataclass(frozen=True)
class LanePlan:
    sources: tuple      # one LaneSource per target register

    def shuffles(self) -> int:
        """Shuffles it emits (sources alike share theirs)."""
        return sum(s.shuffles() for s in set(self.sources))


def _thread_base(layout: Blocked, lane: int, warp: int, axis: int) -> int:
    lane_stride, warp_stride = layout.strides(axis)
    lane_coord = (lane // lane_stride) % layout.threads_per_warp[axis]
    warp_coord = (warp // warp_stride) % layout.warps_per_cta[axis]
    return (warp_coord * layout.threads_per_warp[axis] + lane_coord) * \
        layout.size_per_thread[axis]


def placement(layout: Layout, shape: tuple, lane: int, warp: int) -> list:
    """The element index (a tuple over the value's dimensions) of each register the thread
    (lane, warp) holds of a value of ``shape`` in ``layout``, in register order."""
    parent = layout.blocked
    embedded = layout.embed(shape)
    per_axis = []
    for axis, size in enumerate(embedded):
        offsets = parent.slot_offsets(axis, size)
        if size == 1:
            per_axis.append([0] * len(offsets))
            continue
        base = _thread_base(parent, lane, warp, axis)
        if parent.tile(axis) > size:
            base &= size - 1
        per_axis.append([base + o for o in offsets])
    kept = [a for a in range(parent.rank) if a not in layout.sliced]
    return [tuple(per_axis[a][slot[a]] for a in kept)
            for slot in itertools.product(*(range(len(p)) for p in per_axis))]


def _fit(values: dict, warps: int):
    """The Affine equal to ``values[(lane, warp)]`` at every point given (any others are
    free), or None: Gaussian elimination over GF(2), each point one equation in the
    constant and the columns."""
    bits = LANE_BITS + (warps - 1).bit_length()
    rows = []       # (mask over the 1 + bits unknowns, value): the reduced equations
    for (lane, warp), value in values.items():
        mask = 1 | (lane | warp << LANE_BITS) << 1
        for pivot_mask, pivot_value in rows:
            pivot = pivot_mask & -pivot_mask
            if mask & pivot:
                mask, value = mask ^ pivot_mask, value ^ pivot_value
        if not mask:
            if value:
                return None     # inconsistent with the points before it
            continue
        pivot = mask & -mask
        rows = [(m ^ mask, v ^ value) if m & pivot else (m, v) for m, v in rows]
        rows.append((mask, value))
    # Reduced: no pivot appears in another equation, so with the free unknowns 0 each
    # pivot's unknown is its equation's value.
    unknowns = [0] * (1 + bits)
    for mask, value in rows:
        unknowns[(mask & -mask).bit_length() - 1] = value
    found = Affine(unknowns[0], tuple(unknowns[1:]))
    if any(found.at(lane, warp) != value for (lane, warp), value in values.items()):
        return None
    return found


def _source(wanted: dict, holders: list, warps: int):
    """The LaneSource of one target register (``wanted``: (lane, warp) -> element), or
    None: the reader itself if it holds every element; else one lane a reader reads from
    that picks the register to send by its own lane (Triton's way: replicas of the source
    along lane bits carry the reader's bits); else every register the element may be in,
    shuffled, the reader picking."""
    held = {}
    for (lane, warp), element in wanted.items():
        found = holders[warp].get(element)
        if not found:
            return None     # in another warp only
        held[(lane, warp)] = found
    if all(any(m == lane for m, _ in found) for (lane, warp), found in held.items()):
        registers = {t: min(r for m, r in found if m == t[0]) for t, found in held.items()}
        register_map = _fit(registers, warps)
        if register_map is not None:
            return LaneSource(register_map, _identity(warps), "reader")
    # The holder nearest the reader's own lane (fewest bits apart), then the lowest.
    nearest = {t: min(found, key=lambda h: (bin(h[0] ^ t[0]).count("1"), h))
               for t, found in held.items()}
    lane_map = _fit({t: h[0] for t, h in nearest.items()}, warps)
    if lane_map is not None:
        sent = {}
        for (lane, warp), (sender, register) in nearest.items():
            if sent.setdefault((sender, warp), register) != register:
                break
        else:
            register_map = _fit(sent, warps)
            if register_map is not None:
                return LaneSource(register_map, lane_map, "sender")
    lowest = {t: min(found) for t, found in held.items()}
    lane_map = _fit({t: h[0] for t, h in lowest.items()}, warps)
    register_map = _fit({t: h[1] for t, h in lowest.items()}, warps)
    if lane_map is None or register_map is None:
        return None
    return LaneSource(register_map, lane_map, "reader")


def _identity(warps: int) -> Affine:
    bits = LANE_BITS + (warps - 1).bit_length()
    return Affine(0, tuple(1 << i if i < LANE_BITS else 0 for i in range(bits)))


@functools.lru_cache(maxsize=512)
def plan(shape: tuple, source: Layout, target: Layout, bits: int):
    """The LanePlan converting a value of ``shape`` (elements of ``bits`` bits) from
    ``source`` to ``target`` within each warp, or None (see the module)."""
    if not all(isinstance(x, Layout) and isinstance(x.blocked, Blocked)
               for x in (source, target)):
        return None
    warps = 1
    for count in source.blocked.warps_per_cta:
        warps *= count
    target_warps = 1
    for count in target.blocked.warps_per_cta:
        target_warps *= count
    if warps != target_warps:
        return None
    holders = []        # per warp: element -> [(lane, register)] holding it
    for warp in range(warps):
        held: dict = {}
        for lane in range(THREADS_PER_WARP):
            for register, element in enumerate(placement(source, shape, lane, warp)):
                held.setdefault(element, []).append((lane, register))
        holders.append(held)
    targets = {(lane, warp): placement(target, shape, lane, warp)
               for warp in range(warps) for lane in range(THREADS_PER_WARP)}
    count = len(targets[(0, 0)])
    pieces = max(1, -(-bits // 32))
    if count > MAX_TARGET_REGISTERS:
        return None
    sources = []
    for k in range(count):
        found = _source({thread: elements[k] for thread, elements in targets.items()},
                        holders, warps)
        if found is None:
            return None
        sources.append(found)
        if LanePlan(tuple(sources)).shuffles() * pieces > MAX_SHUFFLES:
            return None
    return LanePlan(tuple(sources))
