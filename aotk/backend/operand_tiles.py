"""Operand tiles stored once: a value that several tensor-core dots read from shared memory
gets its own tile there, written once where the value is computed and read by every one of
those dots, where each dot would otherwise store it again.

In: the kir function and its layout plan. Out: ``ResidentTiles``, which the scratch buffer
(``backend.shared``) sizes and places, the lowering stores (``store``, right after the
value's registers are defined) and the dots read (``mma.place_operands``).

fla's k @ k^T blocks read each k tile as A of some dots and, transposed, as B of others
(``tl.dot(k1, tl.trans(k0))``): a dot stores both operands and waits at two barriers, so
ten dots over four tiles stored twenty tiles a trip; Triton stores each once, right after
its load. A value qualifies where:

* it is a 2-d op result read by two or more operand slots of ``mma.sync`` / ``wgmma`` dots,
  directly or through a transpose (``permute`` of order (1, 0)), and every such slot wants
  the same tile holding the value as it is (``mma.OperandTiles``: A as [M, K], a B that is
  a transposed view stored K-major, a B as [K, N]): then one row-major store of the value's
  own registers writes what each dot would have written;
* no slot takes it in registers or from a pipelined loop's stage;
* every dot reading it is in the region that computes it or one nested in it, and no
  pipelined loop is nested there: its stages sit at the bottom of the buffer for the loop's
  whole run (``SharedMemory.floor``), where the region's tiles are.

A region's tiles sit above the floor it starts at (``ResidentTiles``), each on a swizzle
atom; the region's other scratch users go above them until its last dot reading them (the
floor is raised meanwhile), so shared memory grows by the tiles where other uses overlap
them (a conversion of the first dot's result while the second still reads the tile); where
the block would then exceed the target's shared memory, nothing is resident.
Barriers: before a tile is written, one only when a dot may have read it since the last
barrier (a loop's previous trip); after, none until a dot reads it (the next barrier, whoever
issues it, publishes it); wgmma reads through the async proxy, so its writers fence that
proxy right after storing.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..ir.kir import walk
from ..passes.layouts import Layout
from ..passes.mma_layout import Mma, threads_store_b_k_major
from .mma import OperandTiles, store_tile
from .register_operands import a_in_registers, b_in_registers, staged
from .swizzle import SWIZZLE_ATOM_BYTES, tile_of
from .wgmma import proxy_fence


@dataclass(frozen=True)
class ResidentTile:
    value: object        # the kir value the tile holds
    bytes: int
    read_by_wgmma: bool  # its writers fence the async proxy
    reserved_at: int     # id() of the op list of the region that reserves it


def _aligned(offset: int) -> int:
    return -(-offset // SWIZZLE_ATOM_BYTES) * SWIZZLE_ATOM_BYTES


class ResidentTiles:
    """The values stored once (see the module text), the dot slots that read each, and
    where the tiles go. A tile is reserved by the region (op list) computing its value,
    from that region's start to the op holding its last dot reading one of its tiles: the
    tiles of one branch of an ``if`` take shared memory only while it runs. fla's KDA
    inter-solve kernel computes each chunk's tiles in nested ``if``s of its K loop: 14 KB
    a block, where the loop body reserving them all took 27.6 (and the L1 cache beside
    eight such blocks 28 KB instead of 124)."""

    def __init__(self, tiles: list, slots: dict, release_after: dict):
        self.tiles = tiles           # ResidentTile, in program order
        self.slots = slots           # (dot, operand index) -> ResidentTile
        # id() of a reserving region's op list -> its tiles: looked up for every region
        # lowered, combine regions included.
        self.by_region: dict = {}
        for tile in tiles:
            self.by_region.setdefault(tile.reserved_at, []).append(tile)
        # The op of a reserving region after which no dot reads its tiles (the one holding
        # the last such dot) -> id() of that region's op list: the space is free from there.
        self.release_after = release_after
        self.of_value = {tile.value: tile for tile in tiles}

    def reserve(self, region_ops, floor: int) -> tuple:
        """({value: absolute byte offset}, the floor above them) of the tiles the region
        of ``region_ops`` reserves when it starts at ``floor``."""
        tiles = self.by_region.get(id(region_ops))
        if not tiles:
            return {}, floor
        placed, top = {}, _aligned(floor)
        for tile in tiles:
            placed[tile.value] = top
            top = _aligned(top + tile.bytes)
        return placed, top

    def dot_scratch_bytes(self, plan, op, stored_both: int) -> int:
        """Scratch bytes dot ``op`` needs above the floor, given ``stored_both`` where it
        stores its own operands: none where both have resident tiles; where one has, the
        other's tile on a swizzle atom, as beside a staged operand (``mma.place_operands``)."""
        resident = [self.slots.get((op, index)) for index in (0, 1)]
        if not any(resident):
            return stored_both
        other = 1 if resident[0] is not None else 0
        if resident[other] is not None or _slot_image(plan, op, other, any_tile=True) is None:
            return 0
        wgmma = plan.mma[op].instruction == "wgmma"
        tiles = OperandTiles(plan, op, b_k_major=wgmma and threads_store_b_k_major(
            op.operands[0].element))
        return SWIZZLE_ATOM_BYTES + (tiles.b if other else tiles.a).bytes


def _slot_image(plan, op, index: int, any_tile: bool = False):
    """(the value whose tile dot ``op``'s operand ``index`` reads, (rows, columns) of that
    tile) where the tile holds that value as it is, row-major; None where the slot reads no
    tile of its own (registers, a pipelined stage) or, unless ``any_tile``, a transposed
    one (then its image is (the operand, None))."""
    mma = plan.mma.get(op)
    if mma is None:
        return None
    operand = op.operands[index]
    wgmma = mma.instruction == "wgmma"
    # mma.sync's rule for A on both: wgmma keeps no fp32 A in registers, so the tf32 As
    # this excludes there stay stored by their dot (fewer tiles, never a wrong one).
    in_registers = a_in_registers(plan, op) if index == 0 else \
        not wgmma and b_in_registers(plan, op)
    if staged(operand) or in_registers:
        return None
    if any_tile:
        return operand, None
    tiles = OperandTiles(plan, op, b_k_major=wgmma and threads_store_b_k_major(
        op.operands[0].element))
    tile, transposed = (tiles.a, tiles.m_major_a) if index == 0 else (tiles.b, tiles.k_major_b)
    view = operand.owner
    if view is not None and view.opcode == "permute" and tuple(view.attrs["order"]) == (1, 0):
        value, holds_value = view.operands[0], transposed
    else:
        value, holds_value = operand, not transposed
    if not holds_value or value.owner is None or len(value.type.shape) != 2 or \
            (tile.rows, tile.columns) != tuple(value.type.shape):
        return None
    # The tile is written from the value's registers in the layout ``store_tile`` reads,
    # once the lowering has them (``LoweringContext.store_resident``).
    home = plan.homes.get(value)
    if value not in plan.demands:
        return None
    fragments = isinstance(home, Layout) and isinstance(home.blocked, Mma) and not home.sliced
    if not fragments and plan.natural(value) not in (home, *plan.demands.get(value, ())):
        return None
    return value, (tile.rows, tile.columns)


def _regions(ops, parents: tuple, found: dict, outer: dict, pipelined: set,
             holders: tuple = ()):
    """Each op's chain of enclosing op lists (outermost first), into ``found``, and the op
    of each of those lists that holds it (itself in its own), into ``outer``; the op lists
    holding a pipelined loop at any depth, into ``pipelined``."""
    chain = parents + (id(ops),)
    for op in ops:
        found[op] = chain
        outer[op] = holders + (op,)
        if op.opcode == "for" and op.attrs.get("pipeline") is not None:
            pipelined.update(chain)
        for region in op.regions:
            _regions(region.body, chain, found, outer, pipelined, holders + (op,))


def plan_resident_tiles(function, plan) -> ResidentTiles:
    """The values a kernel stores once (see the module text)."""
    enclosing, outer, pipelined = {}, {}, set()
    _regions(function.body, (), enclosing, outer, pipelined)
    reads: dict = {}
    for op in walk(function.body):
        if op.opcode != "dot" or not plan.is_live(op):
            continue
        for index in (0, 1):
            image = _slot_image(plan, op, index)
            if image is not None:
                reads.setdefault(image[0], []).append((op, index, image[1]))
    tiles, slots = [], {}
    order = {op: position for position, op in enumerate(walk(function.body))}
    for value, uses in sorted(reads.items(), key=lambda item: order[item[0].owner]):
        chain = enclosing[value.owner]
        if len(uses) < 2 or len({shape for _, _, shape in uses}) != 1 or \
                chain[-1] in pipelined or any(chain[-1] not in enclosing[dot]
                                              for dot, _, _ in uses):
            continue
        rows, columns = uses[0][2]
        tile = ResidentTile(value, rows * columns * value.element.itemsize,
                            any(plan.mma[dot].instruction == "wgmma" for dot, _, _ in uses),
                            chain[-1])
        tiles.append(tile)
        for dot, index, _ in uses:
            slots[dot, index] = tile
    last_reader: dict = {}   # reserving region -> its op holding the last reading dot
    for (dot, _), tile in slots.items():
        key = tile.reserved_at
        holder = outer[dot][enclosing[dot].index(key)]
        if key not in last_reader or order[holder] > order[last_reader[key]]:
            last_reader[key] = holder
    return ResidentTiles(tiles, slots, {op: key for key, op in last_reader.items()})


def store(ctx, tile: ResidentTile):
    """Writes ``tile``'s value (its registers just defined) into its tile: after a barrier
    where a dot may still read the previous contents; fenced for the async proxy where a
    wgmma reads it. The barrier that publishes it is the next one, at the latest where a
    dot reads it (``SharedMemory.read_resident``)."""
    shared = ctx.shared
    offset = shared.write_resident(tile.value)
    with shared.floor_at(0):
        store_tile(ctx, tile.value, offset, tile_of(tile.value).element_offset)
    if tile.read_by_wgmma:
        proxy_fence(ctx.builder)
