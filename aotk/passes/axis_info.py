"""Axis info: what is provable about the integers and pointers in each kir value.

In: a kir ``Function`` whose params carry specialization hints (D: aligned to D bytes or
divisible by D; 1: equal to one). Out: ``{value: AxisInfo}`` for every value. Per dimension:

- contiguity:   values come in runs of this many consecutive integers (pointers: elements)
- divisibility: the first value of every such run is a multiple of this (pointers: bytes)
- constancy:    values come in runs of this many equal values

Each is a power of two. The GPU backend vectorizes a memory access along the fastest
dimension only as far as these prove it legal (Triton's rule: contiguity x alignment, mask
constant across the vector). Scalars are one-element, rank-1 infos.
"""
from __future__ import annotations

from dataclasses import dataclass
from math import gcd

from ..ir.kir import COMBINING, Function

# Each fixpoint round can only lower a power-of-two fact, so this bounds the rounds far above
# what any real loop needs; past it a carried value is assumed to know nothing.
MAX_FIXPOINT_ROUNDS = 64

MAX_DIVISIBILITY = 1 << 30


def _pow2_divisor(n: int) -> int:
    """Largest power of two dividing n (capped), with 0 divisible by everything."""
    if n == 0:
        return MAX_DIVISIBILITY
    return min(n & -n, MAX_DIVISIBILITY)


@dataclass(frozen=True)
class AxisInfo:
    contiguity: tuple
    divisibility: tuple
    constancy: tuple
    constant: int | None = None   # the value, when every element is the same known integer

    @property
    def rank(self) -> int:
        return len(self.contiguity)


def _scalar(divisibility: int, constant=None) -> AxisInfo:
    return AxisInfo((1,), (divisibility,), (1,), constant)


def _shape(value) -> tuple:
    return value.type.shape or (1,)


def _uniform(shape, contiguity=1, divisibility=1, constancy=1, constant=None) -> AxisInfo:
    rank = len(shape)
    return AxisInfo((contiguity,) * rank, (divisibility,) * rank, (constancy,) * rank, constant)


def _elementwise_default(shape, operands) -> AxisInfo:
    """Unknown arithmetic: equal inputs give equal outputs, nothing more."""
    constancy = tuple(gcd(*runs) for runs in zip(*(o.constancy for o in operands)))
    return AxisInfo((1,) * len(shape), (1,) * len(shape), constancy)


def _add_like(a: AxisInfo, b: AxisInfo, shape, subtract=False, b_scale=1) -> AxisInfo:
    rank = len(shape)
    contiguity, divisibility, constancy = [], [], []
    for d in range(rank):
        # A contiguous run plus a constant run stays contiguous over their common length.
        c = gcd(a.contiguity[d], b.constancy[d])
        if not subtract:
            c = max(c, gcd(a.constancy[d], b.contiguity[d]))
        contiguity.append(c)
        divisibility.append(min(gcd(a.divisibility[d], b.divisibility[d] * b_scale), MAX_DIVISIBILITY))
        constancy.append(gcd(a.constancy[d], b.constancy[d]))
    constant = None
    if a.constant is not None and b.constant is not None:
        constant = a.constant - b.constant * b_scale if subtract else a.constant + b.constant * b_scale
    return AxisInfo(tuple(contiguity), tuple(divisibility), tuple(constancy), constant)


def _mul(a: AxisInfo, b: AxisInfo, shape) -> AxisInfo:
    rank = len(shape)
    contiguity = []
    for d in range(rank):
        if b.constant == 1:
            contiguity.append(a.contiguity[d])
        elif a.constant == 1:
            contiguity.append(b.contiguity[d])
        else:
            contiguity.append(1)
    divisibility = tuple(min(a.divisibility[d] * b.divisibility[d], MAX_DIVISIBILITY)
                         for d in range(rank))
    constancy = tuple(gcd(a.constancy[d], b.constancy[d]) for d in range(rank))
    constant = a.constant * b.constant if a.constant is not None and b.constant is not None else None
    return AxisInfo(tuple(contiguity), divisibility, constancy, constant)


def _compare(a: AxisInfo, b: AxisInfo, predicate, shape) -> AxisInfo:
    """``offs < n``: runs of a contiguous, aligned ``offs`` against a divisible ``n`` agree.
    Only where the boundary falls between runs: ``offs < n`` and ``offs >= n`` (``n > offs``
    and ``n <= offs``) change value at a multiple of n's divisibility, ``offs <= n`` and
    ``offs > n`` one past it, inside a run (Triton claims nothing for those either)."""
    rank = len(shape)
    constancy = []
    for d in range(rank):
        c = gcd(a.constancy[d], b.constancy[d])
        if predicate in ("lt", "ge"):
            if b.constancy[d] > 1 or rank == 1 and b.constant is not None:
                c = max(c, gcd(a.contiguity[d], gcd(a.divisibility[d], b.divisibility[d]),
                               b.constancy[d]))
        if predicate in ("gt", "le"):
            if a.constancy[d] > 1:
                c = max(c, gcd(b.contiguity[d], gcd(a.divisibility[d], b.divisibility[d]),
                               a.constancy[d]))
        constancy.append(c)
    return AxisInfo((1,) * rank, (1,) * rank, tuple(constancy))


def _join(a: AxisInfo, b: AxisInfo) -> AxisInfo:
    """What holds on both paths (values are powers of two, so gcd is the minimum)."""
    return AxisInfo(tuple(map(gcd, a.contiguity, b.contiguity)),
                    tuple(map(gcd, a.divisibility, b.divisibility)),
                    tuple(map(gcd, a.constancy, b.constancy)),
                    a.constant if a.constant == b.constant else None)


def analyze(function: Function) -> dict:
    infos: dict = {}
    for param in function.params:
        hint = param.hint
        # ":D": divisible by D (a pointer: aligned to D bytes); ":1": equal to 1.
        infos[param.value] = _scalar(hint if hint and hint > 1 else 1, 1 if hint == 1 else None)
    _analyze_ops(function.body, infos)
    return infos


def _analyze_region(region, infos, args) -> list:
    for value, info in zip(region.args, args):
        infos[value] = info
    _analyze_ops(region.body[:-1], infos)
    return [infos[v] for v in region.terminator.operands]


def _carried_fixpoint(initial: list, one_trip) -> list:
    """Loop-carried facts: start from the initial values, join what each trip yields."""
    carried = initial
    for _ in range(MAX_FIXPOINT_ROUNDS):
        joined = [_join(c, y) for c, y in zip(carried, one_trip(carried))]
        if joined == carried:
            return carried
        carried = joined
    return [AxisInfo((1,) * c.rank, (1,) * c.rank, (1,) * c.rank) for c in carried]


def _analyze_control_flow(op, infos):
    ins = [infos[v] for v in op.operands]
    if op.opcode == "for":
        start, _, step = ins[:3]
        # The induction variable is start + k*step: it keeps what both divide by.
        induction = _scalar(gcd(start.divisibility[0], step.divisibility[0]))
        carried = _carried_fixpoint(
            ins[3:], lambda c: _analyze_region(op.regions[0], infos, [induction] + c))
        _analyze_region(op.regions[0], infos, [induction] + carried)
        results = carried
    elif op.opcode == "if":
        then, other = (_analyze_region(r, infos, []) for r in op.regions)
        results = [_join(a, b) for a, b in zip(then, other)]
    else:   # while: the condition region sees the initial values and every trip's yield
        def one_trip(c):
            forwarded = _analyze_region(op.regions[0], infos, c)[1:]
            return _analyze_region(op.regions[1], infos, forwarded)
        carried = _carried_fixpoint(ins, one_trip)
        results = _analyze_region(op.regions[0], infos, carried)[1:]
        _analyze_region(op.regions[1], infos, results)
    for value, info in zip(op.results, results):
        infos[value] = info


def _analyze_ops(ops, infos):
    for op in ops:
        if op.regions and (op.opcode in COMBINING or op.opcode == "map_elementwise"):
            # A combine or mapped region: its scalars and the op's results claim nothing.
            _analyze_region(op.regions[0], infos, [_scalar(1)] * len(op.regions[0].args))
            for result in op.results:
                infos[result] = _uniform(_shape(result))
            continue
        if op.regions:
            _analyze_control_flow(op, infos)
            continue
        result = op.result
        if result is None:
            for value in op.results:   # an op of several results (inline_asm): no claims
                infos[value] = _uniform(_shape(value))
            continue
        ins = [infos[v] for v in op.operands]
        shape = _shape(result)
        rank = len(shape)
        kind = op.opcode
        if kind == "constant":
            value = op.attrs["value"]
            if isinstance(value, bool) or not isinstance(value, int):
                info = _uniform(shape, constancy=1, divisibility=1)
                info = AxisInfo(info.contiguity, info.divisibility, shape)
            else:
                info = AxisInfo((1,) * rank, (_pow2_divisor(value),) * rank, shape, value)
        elif kind == "arange":
            info = AxisInfo((shape[0],), (_pow2_divisor(op.attrs["start"]),), (1,))
        elif kind in ("program_id", "num_programs"):
            info = _scalar(1)
        elif kind == "splat":
            (src,) = ins
            info = AxisInfo((1,) * rank, (src.divisibility[0],) * rank, shape, src.constant)
        elif kind == "broadcast":
            (src,) = ins
            src_shape = _shape(op.operands[0])
            info = AxisInfo(
                tuple(1 if src_shape[d] == 1 else src.contiguity[d] for d in range(rank)),
                src.divisibility,
                tuple(shape[d] if src_shape[d] == 1 else src.constancy[d] for d in range(rank)),
                src.constant)
        elif kind == "expand_dims":
            (src,) = ins
            axis = op.attrs["axis"]
            # Each element alone starts a run along the new axis: its own divisibility applies,
            # which is the run start's only where runs have length one.
            element_divisibility = min((src.divisibility[d] if src.contiguity[d] == 1 else 1)
                                       for d in range(src.rank)) if op.operands[0].shape else \
                src.divisibility[0]
            if not op.operands[0].shape:
                src = AxisInfo((), (), (), src.constant)
            info = AxisInfo(src.contiguity[:axis] + (1,) + src.contiguity[axis:],
                            src.divisibility[:axis] + (element_divisibility,) + src.divisibility[axis:],
                            src.constancy[:axis] + (1,) + src.constancy[axis:], src.constant)
        elif kind in ("add", "sub"):
            info = _add_like(ins[0], ins[1], shape, subtract=kind == "sub")
        elif kind == "addptr":
            element_size = op.result.element.element_ty.itemsize
            info = _add_like(ins[0], ins[1], shape, b_scale=element_size)
            info = AxisInfo(info.contiguity, info.divisibility, info.constancy, None)
        elif kind == "mul":
            info = _mul(ins[0], ins[1], shape)
        elif kind == "cmp":
            info = _compare(ins[0], ins[1], op.attrs["predicate"], shape)
        elif kind == "and" and op.result.element.is_bool():
            info = AxisInfo((1,) * rank, (1,) * rank,
                            tuple(gcd(ins[0].constancy[d], ins[1].constancy[d]) for d in range(rank)))
        elif kind == "irem" and op.operands[1].shape and all(
                ins[1].constancy[d] == shape[d] for d in range(rank)):
            # x % n for a scalar n: runs of x stay runs up to n's divisibility (Triton's rule),
            # as in the tutorial matmul's (pid * BLOCK + arange) % N.
            a, n = ins
            info = AxisInfo(tuple(gcd(a.contiguity[d], n.divisibility[d]) for d in range(rank)),
                            tuple(gcd(a.divisibility[d], n.divisibility[d]) for d in range(rank)),
                            tuple(gcd(a.constancy[d], n.constancy[d]) for d in range(rank)))
        elif kind == "permute":
            (src,) = ins
            order = op.attrs["order"]
            info = AxisInfo(*(tuple(part[d] for d in order) for part in
                              (src.contiguity, src.divisibility, src.constancy)), src.constant)
        elif kind in ("reshape", "join", "split", "dot", "atomic_rmw", "atomic_cas",
                      "scan", "sort", "gather", "histogram", "descriptor_load"):
            # elements move across dimensions, or come from memory: claim nothing
            info = _uniform(shape)
        elif kind == "hint":
            (src,) = ins
            values = op.attrs["values"]
            field = {"multiple_of": "divisibility", "max_contiguous": "contiguity",
                     "max_constancy": "constancy"}[op.attrs["kind"]]
            parts = {"contiguity": src.contiguity, "divisibility": src.divisibility,
                     "constancy": src.constancy}
            parts[field] = tuple(max(1, _pow2_divisor(v)) if field == "divisibility" else
                                 1 << (max(1, v).bit_length() - 1) for v in values)
            info = AxisInfo(parts["contiguity"], parts["divisibility"], parts["constancy"],
                            src.constant)
        elif kind == "cast" and op.operands[0].element.is_int() and result.element.is_int() \
                and result.element.bits >= op.operands[0].element.bits:
            info = ins[0]
        elif kind == "cast" and op.attrs.get("bitcast") and result.element.is_ptr():
            info = ins[0]
        elif kind == "select":
            cond, a, b = ins
            info = AxisInfo(
                tuple(gcd(gcd(a.contiguity[d], b.contiguity[d]), cond.constancy[d])
                      for d in range(rank)),
                tuple(gcd(a.divisibility[d], b.divisibility[d]) for d in range(rank)),
                tuple(gcd(gcd(a.constancy[d], b.constancy[d]), cond.constancy[d]) for d in range(rank)))
        elif kind == "load" and "staged" in op.attrs:
            # Read from a pipelined loop's stage: the pointers' facts, not the stage's.
            info = _elementwise_default(shape, ins[:-1])
        else:
            info = _elementwise_default(shape, ins) if ins else _uniform(shape)
        infos[result] = info
