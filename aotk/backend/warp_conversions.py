"""Layout conversions within a warp: shuffles instead of a round trip through shared memory.

In: a 1-d value's registers in one slice of a one-warp accumulator layout (``Mma`` with
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
from .llvm_types import I32
from .warp_shuffle import shuffle


def convertible(value, source, target) -> bool:
    """Whether ``value`` goes from ``source`` to ``target`` by shuffles (see the module)."""
    if not (isinstance(source, Layout) and isinstance(target, Layout)):
        return False
    parent = source.blocked
    return isinstance(parent, Mma) and target.blocked == parent and \
        tuple(parent.warps_per_cta) == (1, 1) and not parent.warp_columns and \
        {source.sliced, target.sliced} == {(0,), (1,)} and len(value.type.shape) == 1 and \
        value.type.shape[0] % 16 == 0


def convert(ctx, value, registers, source, target) -> list:
    """``value``'s registers in ``target``, shuffled within each warp from ``source``."""
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
