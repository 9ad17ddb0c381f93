"""kir -> numpy execution, one program (CTA) at a time; the API the op families build on.

In: a kir ``Function``, a 3-d grid, the arguments in parameter order (numpy arrays for
pointers, Python numbers for scalars). Out: the arrays, updated in place. Every value is a
numpy array of exactly its kir shape and dtype; integer arithmetic wraps; bfloat16 is held
as float32 rounded to bfloat16 after every op.

The rules live in one module per op family (``creation``, ``elementwise``, ``views``,
``memory``, ``reduce``, ``scan``, ``combine``, ``dot``, ``atomics``, ``descriptors``,
``debug``, ``control``), each of which registers its table here when the package imports it;
this module looks rules up by opcode and never imports the families. Every rule receives
``ctx``, the ``Program`` being run, and the op. Two kinds of rule:

- an op rule ``(ctx, op, *operand arrays) -> result array | None``, for ops without
  regions; the executor casts its result with ``finish``;
- a region rule ``(ctx, op, env) -> [result arrays]``, for ops that own regions (``for``,
  ``if``, ``while``, ``reduce`` / ``scan`` with a combine region); it reads its operands from
  ``env`` (value -> array) and runs its regions with ``run_region``. Its results are taken as
  they are.
"""
from __future__ import annotations

import itertools
from typing import Callable

import numpy as np

from ..ir.kir import Function, Op, Region
from .address_space import AddressSpace

_NUMPY = {"int1": np.bool_, "int8": np.int8, "int16": np.int16, "int32": np.int32,
          "int64": np.int64, "uint8": np.uint8, "uint16": np.uint16, "uint32": np.uint32,
          "uint64": np.uint64, "float16": np.float16, "bfloat16": np.float32,
          "float32": np.float32, "float64": np.float64,
          # 8-bit floats are held as their codes (see .float8)
          "float8e4nv": np.uint8, "float8e5": np.uint8, "float8e4b15": np.uint8}


def numpy_dtype(element):
    """The numpy dtype a value of kir element type ``element`` is held in (pointers are
    uint64 byte addresses, bfloat16 is float32)."""
    return np.uint64 if element.is_ptr() else _NUMPY[element.name]


def round_bf16(x: np.ndarray) -> np.ndarray:
    """float32 rounded to the nearest bfloat16 (ties to even), NaN kept, still float32."""
    x = np.asarray(x, np.float32)
    bits = x.view(np.uint32).astype(np.uint64)
    rounded = (((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16).astype(np.uint32)
    return np.where(np.isnan(x), x, rounded.view(np.float32))


def finish(value, element) -> np.ndarray:
    """Casts to the exact result dtype; rounds bfloat16 results."""
    value = np.asarray(value).astype(numpy_dtype(element), copy=False)
    return round_bf16(value) if element.is_bf16() else value


class Program:
    """The context every rule receives: the program (CTA) being run.

    ``function``: the kir function; ``address_space``: the launch's arrays as one byte-addressed
    memory; ``grid``: the 3-d grid; ``pid``: this program's (x, y, z) ids."""

    def __init__(self, function: Function, address_space: AddressSpace, grid: tuple,
                 pid: tuple):
        self.function, self.address_space = function, address_space
        self.grid, self.pid = grid, pid


OpRule = Callable[..., "np.ndarray | None"]
RegionRule = Callable[[Program, Op, dict], list]

# opcode -> rule, filled by the family modules as the package imports them
OP_RULES: dict[str, OpRule] = {}
REGION_RULES: dict[str, RegionRule] = {}


def _register(registry: dict, rules: dict):
    taken = sorted(registry.keys() & rules.keys())
    if taken:
        raise ValueError(f"interpreter: a second rule for {', '.join(taken)}")
    registry.update(rules)


def register_op_rules(rules: dict[str, OpRule]):
    """Adds an op family's table (opcode -> op rule) to the interpreter."""
    _register(OP_RULES, rules)


def register_region_rules(rules: dict[str, RegionRule]):
    """Adds an op family's table (opcode -> region rule) to the interpreter."""
    _register(REGION_RULES, rules)


def _rule(registry: dict, op: Op):
    rule = registry.get(op.opcode)
    if rule is None:
        raise NotImplementedError(f"interpreter: no rule for op {op.opcode}")
    return rule


def execute_block(ctx: Program, ops: list, env: dict):
    """Runs ``ops`` in order, binding each result in ``env`` (value -> array)."""
    for op in ops:
        if op.regions:
            results = _rule(REGION_RULES, op)(ctx, op, env)
            for result, value in zip(op.results, results):
                env[result] = value
            continue
        result = _rule(OP_RULES, op)(ctx, op, *[env[v] for v in op.operands])
        if op.result is not None:
            env[op.result] = finish(result, op.result.element)


def run_region(ctx: Program, region: Region, env: dict, args: list) -> list:
    """Binds the block arguments to ``args``, runs the body, returns the terminator's
    operands."""
    for arg, value in zip(region.args, args):
        env[arg] = value
    execute_block(ctx, region.body[:-1], env)
    return [env[v] for v in region.terminator.operands]


def run(function: Function, grid, args) -> None:
    """Runs every program of ``grid`` (x fastest) on ``args``, one after another."""
    arrays = [a for a in args if isinstance(a, np.ndarray)]
    address_space = AddressSpace(function.name, arrays)
    base_env = {}
    for param, arg in zip(function.params, args):
        element = param.value.element
        if element.is_ptr():
            base_env[param.value] = np.uint64(arg.ctypes.data)
        else:
            base_env[param.value] = finish(np.asarray(arg), element)
    grid = tuple(grid) + (1,) * (3 - len(grid))
    with np.errstate(all="ignore"):
        for z, y, x in itertools.product(range(grid[2]), range(grid[1]), range(grid[0])):
            ctx = Program(function, address_space, grid, (x, y, z))
            execute_block(ctx, function.body, dict(base_env))
