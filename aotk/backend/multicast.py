"""Lowering of ``cluster_pair`` (``passes.multicast``): thread 0 stores this CTA's words
into the other CTA's (``mapa``, ``st.shared::cluster``); a cluster barrier (release /
acquire: it also orders both CTAs' mbarrier initialization before any signal from the
other); then every thread compares the words it received with its own: bit l of the
result is set where all of load l's are equal. Both CTAs compare the same pairs of words,
so both get the same bits. A CTA launched without a partner (the runtime pairs programs
only where the grid's x is even) stores nothing and gets 0: it shares no tile. The multicast copies are ``backend.tma``'s, the producers'
signals ``backend.warp_specialize``'s.

In: the op's scalar operands and ``members`` (per load, the operands it compares). Out:
the i32 word.
"""
from __future__ import annotations

import llvmlite.ir as ir

from ..passes.layouts import SCALAR
from .llvm_types import I32, inline_asm
from .registry import lowering
from .tma import cluster_size, elected_thread, pair_words_address, peer_address

_CLUSTER_BARRIER = "barrier.cluster.arrive.release.aligned; barrier.cluster.wait.acquire.aligned;"


def _words(ctx, value) -> list:
    """The 32-bit words of a scalar (two for a 64-bit one)."""
    b = ctx.builder
    (register,) = ctx.regs(value, SCALAR)
    if not isinstance(register.type, ir.IntType):   # a float: its bits
        register = b.bitcast(register, ir.IntType(64 if isinstance(register.type, ir.DoubleType)
                                                  else 32))
    bits = register.type.width
    if bits > 32:
        return [b.trunc(register, I32), b.trunc(b.lshr(register, ir.Constant(register.type, 32)),
                                                I32)]
    return [b.zext(register, I32) if bits < 32 else register]


@lowering("cluster_pair")
def lower_cluster_pair(ctx, op):
    b = ctx.builder
    words, first_word = [], []
    for value in op.operands:
        first_word.append(len(words))
        words += _words(ctx, value)
    base = pair_words_address(ctx, op)
    paired = b.icmp_unsigned("==", cluster_size(b), ir.Constant(I32, 2))
    with b.if_then(b.and_(elected_thread(ctx), paired)):
        for index, word in enumerate(words):
            mine = b.add(base, ir.Constant(I32, 4 * index))
            inline_asm(b, "st.shared::cluster.u32 [$0], $1;", "r,r",
                       [peer_address(b, mine), word])
    inline_asm(b, _CLUSTER_BARRIER, "", [])
    equal = []
    for index, word in enumerate(words):
        got = inline_asm(b, "ld.shared.u32 $0, [$1];", "=r,r",
                         [b.add(base, ir.Constant(I32, 4 * index))], I32)
        equal.append(b.icmp_unsigned("==", got, word))
    result = ir.Constant(I32, 0)
    for bit, members in enumerate(op.attrs["members"]):
        if members is None:
            continue
        same = ir.Constant(ir.IntType(1), 1)
        for member in members:
            end = first_word[member + 1] if member + 1 < len(first_word) else len(words)
            for index in range(first_word[member], end):
                same = b.and_(same, equal[index])
        result = b.or_(result, b.shl(b.zext(same, I32), ir.Constant(I32, bit)))
    return [[b.select(paired, result, ir.Constant(I32, 0))]]
