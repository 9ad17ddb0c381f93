"""The lane arithmetic of dot operands taken from accumulator registers
(``backend.register_operands``), checked without a GPU: the real fragment builders run
against a builder that evaluates each instruction for the 32 lanes of a warp at once, on
registers labelled with the (row, column) the m16n8 accumulator layout puts there, and each
lane's fragments must hold the elements ``mma.sync`` expects of that lane (PTX ISA, the
m16n8k8 tf32 and m16n8k16 f16 fragment layouts)."""
from types import SimpleNamespace

import llvmlite.ir as ir
import numpy as np
import pytest

from aotk.backend.register_operands import a_register_fragments, b_register_fragments

LANES = np.arange(32)
GROUP, THREAD = LANES // 4, LANES % 4    # g and t of the PTX fragment tables


class Lanes:
    """One register of every lane: a value (an int, or a label tuple) per lane."""

    def __init__(self, values, type_):
        self.values, self.type = list(values), type_


def _lanes(x):
    if isinstance(x, Lanes):
        return x.values
    return [x.constant] * 32


class WarpBuilder:
    """The IRBuilder calls the fragment builders make, evaluated lane by lane."""

    block = "the one basic block"

    def _map(self, function, *operands):
        columns = [_lanes(x) for x in operands]
        return Lanes([function(*values) for values in zip(*columns)], ir.IntType(32))

    def urem(self, a, b):
        return self._map(lambda x, y: x % y, a, b)

    def udiv(self, a, b):
        return self._map(lambda x, y: x // y, a, b)

    def lshr(self, a, b):
        return self._map(lambda x, y: x >> y, a, b)

    def add(self, a, b):
        return self._map(lambda x, y: x + y, a, b)

    def sub(self, a, b):
        return self._map(lambda x, y: x - y, a, b)

    def mul(self, a, b):
        return self._map(lambda x, y: x * y, a, b)

    def and_(self, a, b):
        return self._map(lambda x, y: x & y, a, b)

    def icmp_unsigned(self, predicate, a, b):
        compare = {"<": lambda x, y: x < y, ">=": lambda x, y: x >= y,
                   "==": lambda x, y: x == y, "!=": lambda x, y: x != y}[predicate]
        return self._map(compare, a, b)

    def select(self, condition, a, b):
        chosen = [x if c else y for c, x, y in zip(_lanes(condition), _lanes(a), _lanes(b))]
        return Lanes(chosen, a.type)

    def bitcast(self, value, type_):
        return Lanes(value.values, type_)

    def call(self, function, arguments):
        assert function.name == "llvm.nvvm.shfl.sync.idx.i32", function.name
        _, value, source, _ = arguments
        return Lanes([value.values[s] for s in _lanes(source)], value.type)


def _accumulator_registers(rows, columns):
    """Registers of a [rows, columns] value in a one-warp m16n8 accumulator layout:
    register (2 tm + h) * (2 * tiles_n) + 2 tn + j of lane (g, t) holds row
    16 tm + 8 h + g, column 8 tn + 2 t + j."""
    tiles_m, tiles_n = rows // 16, columns // 8
    registers = [None] * (4 * tiles_m * tiles_n)
    for tm in range(tiles_m):
        for h in (0, 1):
            for tn in range(tiles_n):
                for j in (0, 1):
                    labels = [(16 * tm + 8 * h + g, 8 * tn + 2 * t + j)
                              for g, t in zip(GROUP, THREAD)]
                    index = (2 * tm + h) * 2 * tiles_n + 2 * tn + j
                    registers[index] = Lanes(labels, ir.FloatType())
    return registers


def _context(registers):
    return SimpleNamespace(builder=WarpBuilder(), module=ir.Module(), derived={},
                           threads=SimpleNamespace(lane=Lanes(LANES, ir.IntType(32))),
                           regs=lambda value, layout: registers)


class _Value:
    """A [rows, columns] fp32 value (hashable, as kir values are)."""

    def __init__(self, rows, columns):
        self.type = SimpleNamespace(shape=(rows, columns))
        self.element = SimpleNamespace(itemsize=4)


class _Layout:
    """A one-warp m16n8 accumulator layout's tile (hashable, as layouts are)."""

    def tile(self, dim):
        return (16, 8)[dim]


def _fragments(build, rows, columns, tiles, k_steps):
    """``build`` (a fragment builder) run on a [rows, columns] value's registers."""
    ctx = _context(_accumulator_registers(rows, columns))
    return build(ctx, _Value(rows, columns), _Layout(), tiles, k_steps)


@pytest.mark.parametrize("rows, columns", [(16, 16), (32, 16), (16, 32)])
def test_tf32_a_fragments_hold_what_each_lane_multiplies(rows, columns):
    """m16n8k8 tf32 A: lane (g, t) holds a0 (g, t), a1 (g + 8, t), a2 (g, t + 4),
    a3 (g + 8, t + 4) of its 16-row tile and 8-column k slice."""
    fragments = _fragments(a_register_fragments, rows, columns, rows // 16, columns // 8)
    for tm in range(rows // 16):
        for ks in range(columns // 8):
            wanted = [(0, 0), (8, 0), (0, 4), (8, 4)]
            for register, (row, column) in zip(fragments[tm][ks], wanted):
                assert register.values == [(16 * tm + row + g, 8 * ks + column + t)
                                           for g, t in zip(GROUP, THREAD)]


@pytest.mark.parametrize("rows, columns", [(16, 16), (32, 8), (16, 32)])
def test_tf32_b_fragments_hold_what_each_lane_multiplies(rows, columns):
    """m16n8k8 tf32 B ([K, N], K = rows): lane (g, t) holds b0 (k t, n g) and
    b1 (k t + 4, n g) of its 8-row k slice and 8-column tile."""
    fragments = _fragments(b_register_fragments, rows, columns, columns // 8, rows // 8)
    for tn in range(columns // 8):
        for ks in range(rows // 8):
            for register, extra in zip(fragments[tn][ks], (0, 4)):
                assert register.values == [(8 * ks + t + extra, 8 * tn + g)
                                           for g, t in zip(GROUP, THREAD)]
