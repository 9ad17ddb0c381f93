"""The C expressions of a manifest's ``grid`` and ``when``: text -> a checked tree -> total C.

In: the expression text (checked token by token by ``manifest.check_expression``), the
kernel's scalar parameters with their types, and the variant's constants. Out: C text in
which every integer division, modulo and ``cdiv`` goes through a helper of the generated
library (``aotk_div``, ``aotk_mod``, ``aotk_cdiv``) that sets a flag instead of trapping
on a zero divisor (or on INT64_MIN / -1), so that no argument can crash the host process;
the caller checks the flag and returns AOTK_STATUS_BAD_ARGUMENT. A divisor that is zero
whatever the arguments (a constant expression) is a build error. Floating-point division
stays ``/`` (it does not trap); ``%`` of a float is a build error, as in C.

Grammar (C's precedence): ternary ``?:``, ``||``, ``&&``, ``|``, ``^``, ``&``, ``== !=``,
``< <= > >=``, ``<< >>``, ``+ -``, ``* / %``, unary ``- + ! ~``, and primaries: integer
literals, names, ``cdiv(a, b)``, ``min(a, b)``, ``max(a, b)``, ``next_power_of_2(n)``
(Triton's: 0 for n <= 0), parentheses; and ``num_sms``, the launch device's number of SMs
(read at each launch; for persistent kernels), unless the kernel has a parameter or constant
of that name, which then takes its place.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from ..helpers import next_power_of_2

_TOKEN = re.compile(r"\s*(?:(\d+)|([A-Za-z_][A-Za-z0-9_]*)|"
                    r"(<=|>=|==|!=|&&|\|\||<<|>>|[-+*/%()<>!&|^~?:,]))")
_BINARY_LEVELS = [("||",), ("&&",), ("|",), ("^",), ("&",), ("==", "!="),
                  ("<", "<=", ">", ">="), ("<<", ">>"), ("+", "-"), ("*", "/", "%")]


# Functions of the language besides cdiv, by their number of arguments.
FUNCTIONS = {"min": 2, "max": 2, "next_power_of_2": 1}

# Names the generated library reads from the launch device, with the runtime call (which
# sets the flag when the driver cannot say, as a zero divisor does).
DEVICE_NAMES = {"num_sms": "aotk_device_sms(&{flag})"}


class ExpressionError(ValueError):
    """An expression that cannot be made total C: its message says why."""


@dataclass
class Node:
    kind: str          # "number" | "name" | "unary" | "binary" | "ternary" | "cdiv"
    text: str = ""     # the number, name or operator
    operands: tuple = ()


def _tokens(text: str) -> list:
    tokens, position = [], 0
    while position < len(text):
        match = _TOKEN.match(text, position)
        if not match or match.end() == position:
            if text[position:].strip():
                raise ExpressionError(f"cannot parse {text!r} at {text[position:].strip()[:10]!r}")
            break
        tokens.append(next(g for g in match.groups() if g is not None))
        position = match.end()
    return tokens


class _Parser:
    def __init__(self, text: str):
        self.text = text
        self.tokens = _tokens(text)
        self.position = 0

    def peek(self):
        return self.tokens[self.position] if self.position < len(self.tokens) else None

    def take(self, expected=None):
        token = self.peek()
        if token is None or (expected is not None and token != expected):
            wanted = f"{expected!r}" if expected else "more"
            raise ExpressionError(f"{self.text!r}: expected {wanted} at the end" if token is None
                                  else f"{self.text!r}: expected {wanted}, got {token!r}")
        self.position += 1
        return token

    def parse(self) -> Node:
        node = self.ternary()
        if self.peek() is not None:
            raise ExpressionError(f"{self.text!r}: unexpected {self.peek()!r}")
        return node

    def ternary(self) -> Node:
        condition = self.binary(0)
        if self.peek() != "?":
            return condition
        self.take("?")
        when_true = self.ternary()
        self.take(":")
        return Node("ternary", "?", (condition, when_true, self.ternary()))

    def binary(self, level: int) -> Node:
        if level == len(_BINARY_LEVELS):
            return self.unary()
        node = self.binary(level + 1)
        while self.peek() in _BINARY_LEVELS[level]:
            operator = self.take()
            node = Node("binary", operator, (node, self.binary(level + 1)))
        return node

    def unary(self) -> Node:
        if self.peek() in ("-", "+", "!", "~"):
            operator = self.take()
            return Node("unary", operator, (self.unary(),))
        return self.primary()

    def primary(self) -> Node:
        token = self.take()
        if token == "(":
            node = self.ternary()
            self.take(")")
            return node
        if token.isdigit():
            return Node("number", token)
        if token == "cdiv":
            self.take("(")
            numerator = self.ternary()
            self.take(",")
            denominator = self.ternary()
            self.take(")")
            return Node("cdiv", "cdiv", (numerator, denominator))
        if token in FUNCTIONS:
            self.take("(")
            operands = [self.ternary()]
            while self.peek() == ",":
                self.take(",")
                operands.append(self.ternary())
            self.take(")")
            if len(operands) != FUNCTIONS[token]:
                raise ExpressionError(f"{self.text!r}: {token} takes {FUNCTIONS[token]} "
                                      f"argument(s), got {len(operands)}")
            return Node("function", token, tuple(operands))
        if re.fullmatch(r"[A-Za-z_]\w*", token):
            return Node("name", token)
        raise ExpressionError(f"{self.text!r}: unexpected {token!r}")


def _c_divide(a: int, b: int) -> int:
    quotient = abs(a) // abs(b)
    return quotient if (a < 0) == (b < 0) else -quotient


def _constant_value(node: Node, constants: dict):
    """The value of a subexpression that depends on no parameter (C's integer rules), or
    None."""
    if node.kind == "number":
        return int(node.text)
    if node.kind == "name":
        value = constants.get(node.text)
        return value if isinstance(value, (bool, int, float)) else None
    values = [_constant_value(o, constants) for o in node.operands]
    if any(v is None for v in values):
        return None
    if node.kind == "unary":
        (v,) = values
        return {"-": -v, "+": v, "!": int(not v), "~": ~int(v)}[node.text]
    if node.kind == "ternary":
        return values[1] if values[0] else values[2]
    if node.kind == "function":
        if node.text == "next_power_of_2":
            return next_power_of_2(values[0])
        return min(values) if node.text == "min" else max(values)
    a, b = values
    if node.kind == "cdiv" or node.text in ("/", "%"):
        if b == 0:
            return None   # reported by the caller
        if isinstance(a, float) or isinstance(b, float):
            return a / b if node.text == "/" else None
        if node.kind == "cdiv":
            return _c_divide(a + b - 1, b)
        return _c_divide(a, b) if node.text == "/" else a - b * _c_divide(a, b)
    operations = {"+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b,
                  "<<": lambda: int(a) << int(b), ">>": lambda: int(a) >> int(b),
                  "&": lambda: int(a) & int(b), "|": lambda: int(a) | int(b),
                  "^": lambda: int(a) ^ int(b), "&&": lambda: int(bool(a) and bool(b)),
                  "||": lambda: int(bool(a) or bool(b)), "==": lambda: int(a == b),
                  "!=": lambda: int(a != b), "<": lambda: int(a < b),
                  "<=": lambda: int(a <= b), ">": lambda: int(a > b), ">=": lambda: int(a >= b)}
    try:
        return operations[node.text]()
    except (ValueError, OverflowError):
        return None


def evaluate(text: str, values: dict):
    """The value of ``text`` with every name given in ``values``, by C's integer rules (as
    the generated C computes it); ExpressionError for a name not given or a zero divisor."""
    tree = _Parser(str(text)).parse()

    def names(node):
        return {node.text} if node.kind == "name" else set().union(
            *(names(o) for o in node.operands))
    unknown = names(tree) - set(values)
    if unknown:
        raise ExpressionError(f"{text!r} names {', '.join(sorted(unknown))}, which has no value "
                              "here")
    value = _constant_value(tree, values)
    if value is None:
        raise ExpressionError(f"{text!r} divides by zero for {values}")
    return value


def device_names_used(text: str, parameters=frozenset(), constants=None) -> set:
    """The DEVICE_NAMES that ``text`` reads (those not shadowed by a parameter or constant)."""
    tree = _Parser(str(text)).parse()

    def names(node):
        return {node.text} if node.kind == "name" else set().union(
            *(names(o) for o in node.operands))
    return {n for n in names(tree) if n in DEVICE_NAMES and n not in parameters
            and n not in (constants or {})}


def to_total_c(text: str, float_names: set, constants: dict, flag: str = "bad",
               parameters=frozenset()) -> tuple:
    """(C text, whether it can fail): ``text`` with integer divisions made total and the
    DEVICE_NAMES read from the device. Names in ``float_names`` are floating-point;
    ``constants`` are the variant's constexprs (a divisor they make zero is an
    ExpressionError); ``parameters`` the kernel's parameter names (they shadow
    DEVICE_NAMES). ``flag`` is the int the helpers set when a divisor is zero or the device
    cannot be read."""
    tree = _Parser(text).parse()
    divides = []

    def emit(node: Node) -> tuple:
        """(C text, is float)."""
        if node.kind == "number":
            return node.text, False
        if node.kind == "name":
            if node.text in DEVICE_NAMES and node.text not in constants \
                    and node.text not in parameters:
                divides.append(node)
                return DEVICE_NAMES[node.text].format(flag=flag), False
            value = constants.get(node.text)
            return node.text, node.text in float_names or isinstance(value, float)
        if node.kind == "unary":
            operand, is_float = emit(node.operands[0])
            return f"{node.text}({operand})", is_float and node.text in "-+"
        if node.kind == "ternary":
            parts = [emit(o) for o in node.operands]
            return (f"(({parts[0][0]}) ? ({parts[1][0]}) : ({parts[2][0]}))",
                    parts[1][1] or parts[2][1])
        if node.kind == "function":
            parts = [emit(o) for o in node.operands]
            if node.text == "next_power_of_2":
                if parts[0][1]:
                    raise ExpressionError(f"{text!r}: next_power_of_2 needs an integer")
                return f"aotk_next_power_of_2({parts[0][0]})", False
            (a, a_float), (b, b_float) = parts
            if not (a_float or b_float):
                # A function: each operand computed once (num_sms is one device read), and
                # compared as int64, as Python compares the integers (C would compare an
                # unsigned parameter with a negative number as unsigned).
                return f"aotk_{node.text}({a}, {b})", False
            return (f"(({a}) {'<' if node.text == 'min' else '>'} ({b}) ? ({a}) : ({b}))",
                    True)
        (a, a_float), (b, b_float) = (emit(o) for o in node.operands)
        divisor = node.operands[1]
        if node.kind == "cdiv" or node.text in ("/", "%"):
            if _constant_value(divisor, constants) == 0:
                raise ExpressionError(f"{text!r} divides by zero (its divisor is always 0)")
            if a_float or b_float:
                if node.text != "/":
                    raise ExpressionError(f"{text!r}: {node.text if node.kind != 'cdiv' else 'cdiv'}"
                                          " needs integers, and an operand is floating-point")
                return f"(({a}) / ({b}))", True
            divides.append(node)
            helper = {"cdiv": "aotk_cdiv", "/": "aotk_div", "%": "aotk_mod"}[
                node.kind if node.kind == "cdiv" else node.text]
            return f"{helper}({a}, {b}, &{flag})", False
        is_float = (a_float or b_float) and node.text in ("+", "-", "*")
        return f"({a} {node.text} {b})", is_float

    c_text, _ = emit(tree)
    return c_text, bool(divides)


__all__ = ["DEVICE_NAMES", "ExpressionError", "FUNCTIONS", "device_names_used", "evaluate",
           "to_total_c"]
