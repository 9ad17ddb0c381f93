"""Results of an ``if`` that nothing reads are dropped.

In: a kir ``Function`` the pass may edit (the compiler hands it a copy). Out: the same
function where every ``if`` result no op reads is gone, with what each branch's ``yield``
gave it; repeated until none is left (a dropped result can leave a nested ``if``'s result
unread), then the pure ops that computed only those values are removed from every body.

Why: the frontend turns each name a branch assigns, and that was defined before the
``if``, into a result of the ``if``, read afterwards or not (Python's scoping: nothing says
whether it is). fla's KDA inter-solve kernel assigns ``b_kgt = tl.trans(...)`` again in
its nested ``if``s; the transposes the branches yielded had to exist in a layout of their
own (each a conversion through shared memory: 16 stores, 16 loads and two barriers, three
a K trip) and stay in registers across the branches, though no op after the ``if`` read
them; as dot operands alone they are stored K-major straight from the product's registers.
Triton's canonicalizer drops such results the same way.
"""
from __future__ import annotations

from ..ir import kir
from .rewrite import ops_with_blocks, remove_unused_pure_ops


def drop_unused_if_results(function: kir.Function) -> int:
    """Applies the rewrite; returns how many results were dropped."""
    dropped = 0
    while True:
        read = {value for op in kir.walk(function.body) for value in op.operands}
        now = 0
        for op in kir.walk(function.body):
            if op.opcode != "if" or all(result in read for result in op.results):
                continue
            kept = [i for i, result in enumerate(op.results) if result in read]
            now += len(op.results) - len(kept)
            op.results = [op.results[i] for i in kept]
            for region in op.regions:
                terminator = region.terminator
                terminator.operands = [terminator.operands[i] for i in kept]
        if not now:
            break
        dropped += now
    if dropped:
        bodies = {id(block): block for block, _ in ops_with_blocks(function.body)}
        for body in reversed(list(bodies.values())):   # nested bodies before their parents
            remove_unused_pure_ops(body)
    return dropped
