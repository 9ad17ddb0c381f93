"""A sum with a dot's product becomes that dot's accumulator.

In: a kir ``Function`` the pass may edit (the compiler hands it a copy). Out: the same
function where ``d + dot(a, b, 0)`` (or ``dot(a, b, 0) + d``) is ``dot(a, b, d)``: the dot
starts from ``d`` instead of zero, takes the add's place in the body and its result, when

* the dot's accumulator is a constant zero (``tl.dot(a, b)`` without ``acc``),
* nothing but that add reads the dot's result,
* the add is in the same body as the dot and of the dot's result type.

Triton's combiner folds the same two patterns, for integer and float adds (its
``CombineDotAdd`` rewrites), so the tensor cores add the products straight into ``d``:
integer sums are the same either way, float ones are what Triton computes. Triton leaves one
case unfolded: a float dot with imprecise accumulation (``max_num_imprecise_acc``, fp8 x fp8
on sm_90), whose products it then adds to ``d`` at full precision. aotk has no imprecise
accumulation (fp8 operands become fp16 ones, exactly, and accumulate in fp32), so folding
those changes only where ``d`` is rounded in, as it does for fp16.

Why: ``accumulator += tl.dot(a, b)`` (liger's int8 x int2 matmul) otherwise holds a second
full accumulator tile per thread beside the carried one, and adds them on every trip: 128
more registers and 128 adds per trip there, and ptxas spilled; a pipelined wgmma loop also
needs the accumulator carried straight through its dot to keep the dot in flight.
"""
from __future__ import annotations

from ..ir import kir
from .rewrite import is_zero, users_of


def _bodies(ops):
    """Every op list: ``ops`` and the bodies of the regions nested in it."""
    yield ops
    for op in ops:
        for region in op.regions:
            yield from _bodies(region.body)


def fold_dot_accumulators(function: kir.Function) -> int:
    """Folds every qualifying add (module text); returns how many."""
    users = users_of(function.body)
    folded = 0
    for body in _bodies(function.body):
        for add in [op for op in body if op.opcode == "add"]:
            for position in (0, 1):
                dot = add.operands[position].owner
                if dot is None or dot.opcode != "dot" or not any(dot is op for op in body) \
                        or users.get(dot.result) != [add] or not is_zero(dot.operands[2]) \
                        or dot.result.element != add.result.element \
                        or dot.result.shape != add.result.shape:
                    continue
                dot.operands[2] = add.operands[1 - position]
                body.remove(dot)
                body[body.index(add)] = dot
                _replace_uses(function.body, add.result, dot.result)
                folded += 1
                # The dot now has the add's users: a later add of its result folds too
                # (``acc = 0; acc += dot(a, b); acc + d``), which a stale map would refuse.
                users = users_of(function.body)
                break
    return folded


def _replace_uses(ops, old, new) -> None:
    for op in kir.walk(ops):
        op.operands[:] = [new if value is old else value for value in op.operands]
