"""TMA multicast between the two CTAs of a cluster, from their producer warps
(``num_ctas=2`` on a loop written ``tl.range(..., warp_specialize=True)``, sm_90).

Programs 2i and 2i + 1 along the grid's x run as one cluster of two CTAs where the runtime
launches them so (the grid's x even); otherwise each runs alone and shares nothing
(``backend.multicast``). Where both copy the same tile at every trip of a TMA-pipelined
loop (a matmul's B tile when the pair shares its column of tiles), each CTA's producer
warp copies half of the tile's 128-byte panels and multicasts them into both CTAs' stages,
so the L2 serves that tile once per pair. Rows that are 16- but not 128-byte aligned make
every panel row touch two L2 lines; halving the requests is what cuBLAS's two-CTA clusters
do there. A probe whose compute warps synchronized with the other CTA themselves
(wip/multicast) ran in lockstep and lost more than the sharing saved: here only the
producers wait for each other.

In: a loop ``passes.pipeline`` rewrites for TMA with a producer warp, its loads. Out:

* ``pair_sources``: per load, the scalars defined outside the loop from which its
  coordinates and the loop's bounds are computed (the same scalars in both CTAs mean the
  same tile at every trip and the same number of trips), or None where a coordinate
  depends on a value the loop carries;
* ``pair_ops``: ``cluster_pair`` (both CTAs compare those scalars; bit l of its result is
  set where load l's are equal in both, the same bits in both CTAs), which goes before the
  producer forks; its word then rides on each shared ``tma_copy`` (``pair_bit``) and on the
  producer's ``tma_produce_wait``: before refilling a stage the producer also tells the
  other CTA's producer that its compute warps are done with it, and waits for the same
  word from there (each producer's copies write both CTAs' stages).

The loop must be in the kernel's top-level body: every thread of both CTAs reaches the
comparison, whatever its program id (kir has no early return). Nothing needs a cluster
barrier at the end: a producer's last signal to the other CTA comes before its last
copies, which the other CTA's compute warps wait for.
"""
from __future__ import annotations

from ..ir import kir
from ..ir import types as T
from ..ir.types import BlockType
from .rewrite import new_op

# Scalars both CTAs compare before the loop, at most (4 bytes each; 64-bit ones take two).
MAX_PAIR_WORDS = 16


def pair_sources(loop, loads) -> list:
    """Per load of the loop: the scalars from outside it that its coordinates and the
    loop's bounds are computed from (constants left out), or None."""
    body = loop.regions[0]
    induction = body.args[0]
    inside = {id(op) for op in kir.walk(body.body)}
    bounds = _sources(loop.operands[:3], inside, induction)
    found = []
    for load in loads:
        sources = _sources(kir.descriptor_operands(load)[3], inside, induction)
        found.append(None if sources is None or bounds is None
                     else list(dict.fromkeys(bounds + sources)))
    return found


def _sources(values, inside: set, induction):
    leaves, seen = [], set()

    def visit(value) -> bool:
        if value is induction or id(value) in seen:
            return True
        seen.add(id(value))
        owner = value.owner
        if value.type.shape:
            return False          # a block: not a coordinate's ingredient we compare
        if owner is None or id(owner) not in inside:
            if owner is None or owner.opcode != "constant":
                leaves.append(value)
            return True
        if owner.opcode not in kir.PURE_OPS or owner.regions:
            return False          # a value the loop carries or loads
        return all(visit(operand) for operand in owner.operands)
    return leaves if all(visit(value) for value in values) else None


def pair_words(values) -> int:
    return sum(2 if value.type.element.bits > 32 else 1 for value in values)


def pair_ops(sources: list, loop_number: int, stages: int, groups: int):
    """The ``cluster_pair`` op over every load's sources (None: no multicast for it), or
    None where no load qualifies or the scalars are too many to compare."""
    values = list(dict.fromkeys(v for found in sources if found for v in found))
    if not values or pair_words(values) > MAX_PAIR_WORDS:
        return None
    members = [[values.index(v) for v in found] if found else None for found in sources]
    return new_op("cluster_pair", values, BlockType(T.int32), loop=loop_number,
                  stages=stages, groups=groups, members=members)
