"""kir: typed SSA of block operations, the frontend's output.

A ``Function`` holds its parameters and a flat list of ``Op``s (tier 1 has no regions).
Every value carries a ``BlockType`` (element type + static shape, no layout). Typing is
done before an op is created (``aotk.semantic``): passes, the interpreter and the GPU
backend read types, they never infer them.

The op set, with operands and attributes:

  program_id / num_programs   ()                      axis            -> i32 scalar
  constant                    ()                      value           -> scalar or block (splat)
  arange                      ()                      start, end      -> i32[end-start]
  splat                       (scalar)                                -> block of result shape
  broadcast                   (x)                     (1-dims grow)   -> block of result shape
  expand_dims                 (x)                     axis            -> x's shape with a 1 inserted
  <binary>                    (a, b)  same shape and element type     -> same type
      add sub mul fdiv idiv irem frem and or xor shl shr min max
      idiv/irem round toward zero (C); shr is arithmetic for signed, logical for unsigned;
      frem is C fmod; min/max on floats return the non-NaN operand if one is NaN
  cmp                         (a, b)                  predicate       -> int1 of same shape
      predicate in eq ne lt le gt ge; signedness from the operand type
  addptr                      (ptr, offset)  offset is an integer     -> ptr; moves by offset elements
  <unary>                     (x)                                     -> same type
      neg not(bitwise) abs exp exp2 log log2 sqrt rsqrt sin cos floor ceil
  fma                         (a, b, c)                               -> a*b+c, one rounding
  select                      (cond:int1, a, b)                       -> a where cond else b
  cast                        (x)                     bitcast: bool   -> result type
  load                        (ptr, [mask], [other])  cache, eviction, volatile, has_mask, has_other
  store                       (ptr, value, [mask])    cache, eviction, has_mask   -> no result
  hint                        (x)                     multiple_of | max_contiguous | max_constancy
                                                      (each a tuple per dim or None) -> x unchanged
  reduce                      (x)                     axis, combine   -> x's shape without axis
      combine in add max min xor; max/min on floats ignore NaN like minimum/maximum
  argreduce                   (x)                     axis, combine   -> i32 index along axis
      combine in max min; ties go to the smallest index
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .types import BlockType

BINARY_OPS = frozenset("add sub mul fdiv idiv irem frem and or xor shl shr min max".split())
UNARY_OPS = frozenset("neg not abs exp exp2 log log2 sqrt rsqrt sin cos floor ceil".split())
COMPARE_PREDICATES = ("eq", "ne", "lt", "le", "gt", "ge")
# Ops whose result depends only on their operands: safe to recompute or remove when unused.
PURE_OPS = BINARY_OPS | UNARY_OPS | frozenset(
    "program_id num_programs constant arange splat broadcast expand_dims cmp addptr fma "
    "select cast hint".split())
REDUCTIONS = frozenset(("reduce", "argreduce"))


class Value:
    __slots__ = ("type", "owner", "hint_name")

    def __init__(self, type: BlockType, owner: "Op | None" = None, hint_name: str | None = None):
        self.type = type
        self.owner = owner
        self.hint_name = hint_name   # the Python variable it was bound to, for readable dumps

    @property
    def shape(self) -> tuple:
        return self.type.shape

    @property
    def element(self):
        return self.type.element

    def __repr__(self) -> str:
        return f"Value({self.type})"


@dataclass(eq=False)
class Op:
    opcode: str
    operands: list
    result: Value | None
    attrs: dict = field(default_factory=dict)
    loc: tuple | None = None   # (filename, line, column) of the source construct


@dataclass(eq=False)
class Param:
    name: str
    value: Value
    # Specialization hint from the signature: 16 = pointer 16-byte aligned / integer divisible
    # by 16, 1 = integer equal to 1 (the frontend folds it to a constant), None = no promise.
    hint: int | None = None


@dataclass(eq=False)
class Function:
    name: str
    params: list                       # list[Param], runtime parameters in order
    body: list = field(default_factory=list)
    constants: dict = field(default_factory=dict)   # constexpr name -> Python value
    filename: str = "<unknown>"

    def __str__(self) -> str:
        return print_function(self)


class Builder:
    """Appends ops to a function; ``loc`` is set by the frontend before each statement."""

    def __init__(self, function: Function):
        self.function = function
        self.loc = None

    def create(self, opcode: str, operands, result_type: BlockType | None, **attrs) -> Value | None:
        result = Value(result_type) if result_type is not None else None
        op = Op(opcode, list(operands), result, attrs, self.loc)
        if result is not None:
            result.owner = op
        self.function.body.append(op)
        return result


def _format_attr(value) -> str:
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, tuple):
        return "(" + ",".join(_format_attr(v) for v in value) + ")"
    return str(value)


def print_function(function: Function) -> str:
    """The kir listing: one op per line, values numbered in definition order."""
    names: dict[int, str] = {}

    def name_of(v: Value) -> str:
        if id(v) not in names:
            names[id(v)] = f"%{len(names)}"
        return names[id(v)]

    params = ", ".join(f"{name_of(p.value)}: {p.value.type}" for p in function.params)
    pnames = ", ".join(f"{p.name}={name_of(p.value)}" + (f":{p.hint}" if p.hint else "")
                       for p in function.params)
    lines = [f"kir.func @{function.name}({params}) {{"]
    if pnames:
        lines.append(f"  // params: {pnames}")
    if function.constants:
        consts = ", ".join(f"{k}={v!r}" for k, v in function.constants.items())
        lines.append(f"  // constexprs: {consts}")
    for op in function.body:
        args = ", ".join(name_of(v) for v in op.operands)
        attrs = " ".join(f"{k}={_format_attr(v)}" for k, v in op.attrs.items()
                         if v is not None and v is not False and v != "")
        text = op.opcode
        if attrs:
            text += f" [{attrs}]"
        if args:
            text += " " + args
        if op.result is not None:
            text = f"{name_of(op.result)} = {text} : {op.result.type}"
        if op.loc is not None:
            text += f"    // line {op.loc[1]}"
        lines.append("  " + text)
    lines.append("}")
    return "\n".join(lines) + "\n"
