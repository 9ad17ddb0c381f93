"""``@heuristics`` values -> conditions of the library's dispatch.

In: a heuristic, the function a ``@heuristics({name: function})`` gives for one constexpr
(called with the launch's arguments by name, as in Triton). Out: the same computation as an
expression of the manifest's ``when`` language (``buildsys.expressions``) over the kernel's
scalar parameters and constexprs, when the function is a ``lambda args: ...`` of integer
arithmetic (``+ - * // % << >> & | ^``), comparisons, ``and`` / ``or`` / ``not``,
conditional expressions, ``min`` / ``max`` of two values, ``next_power_of_2`` and ``cdiv``
(Triton's or aotk's) over ``args["name"]`` and integer literals; otherwise HeuristicError
saying what it uses. ``//`` and ``%`` become C's division, which agrees with Python's for the
non-negative sizes heuristics look at.
"""
from __future__ import annotations

import ast
import inspect
import textwrap


class HeuristicError(ValueError):
    """A heuristic that cannot become a C condition: the message says why."""


_BINARY = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.FloorDiv: "/", ast.Mod: "%",
           ast.LShift: "<<", ast.RShift: ">>", ast.BitAnd: "&", ast.BitOr: "|",
           ast.BitXor: "^"}
_COMPARE = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">",
            ast.GtE: ">="}
_CALLS = {"min": "min", "max": "max", "next_power_of_2": "next_power_of_2", "cdiv": "cdiv"}


def _lambda_node(function) -> ast.Lambda:
    """The ``lambda`` node of ``function`` in its source file (the one whose code is
    ``function``'s, where a line holds several)."""
    code = getattr(function, "__code__", None)
    if code is None or code.co_name != "<lambda>":
        raise HeuristicError("it is not a lambda")
    try:
        source = textwrap.dedent(inspect.getsource(function))
        lines, first = inspect.getsourcelines(function)
    except (OSError, TypeError):
        raise HeuristicError("its source cannot be read") from None
    try:
        tree = ast.parse(source)
    except SyntaxError:     # a lambda inside a larger expression: parse the whole file
        try:
            tree = ast.parse(open(inspect.getsourcefile(function)).read())
        except (OSError, SyntaxError, TypeError):
            raise HeuristicError("its source cannot be parsed") from None
        first = 1
    candidates = [node for node in ast.walk(tree) if isinstance(node, ast.Lambda)
                  and node.lineno + first - 1 == code.co_firstlineno]
    if len(candidates) > 1:   # several on the line: the one whose body starts where the
        columns = {column for _, _, column, _ in getattr(code, "co_positions", list)()
                   if column is not None}   # code's instructions do (Python 3.11+) ...
        placed = [n for n in candidates if n.body.col_offset in columns]
        if len(placed) != 1:    # ... or whose names and constants are the code's
            placed = [n for n in candidates if _names_and_constants(n) ==
                      (code.co_names, code.co_consts)]
        candidates = placed
    if len(candidates) != 1:
        raise HeuristicError("its lambda cannot be told apart in its source")
    return candidates[0]


def _names_and_constants(node: ast.Lambda) -> tuple:
    compiled = compile(ast.Expression(node), "<heuristic>", "eval")
    inner = next(c for c in compiled.co_consts if hasattr(c, "co_code"))
    return inner.co_names, inner.co_consts


def to_expression(function) -> tuple:
    """(the expression text, whether its value is a truth value) of a heuristic."""
    node = _lambda_node(function)
    if len(node.args.args) != 1 or node.args.vararg or node.args.kwarg:
        raise HeuristicError("it does not take the one argument dict")
    arguments = node.args.args[0].arg

    def emit(n) -> tuple:
        """(text, is a truth value)."""
        if isinstance(n, ast.Constant) and isinstance(n.value, (bool, int)):
            return str(int(n.value)), isinstance(n.value, bool)
        if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name) and \
                n.value.id == arguments and isinstance(n.slice, ast.Constant) and \
                isinstance(n.slice.value, str) and n.slice.value.isidentifier():
            return n.slice.value, False
        if isinstance(n, ast.BinOp) and type(n.op) in _BINARY:
            return (f"({emit(n.left)[0]} {_BINARY[type(n.op)]} {emit(n.right)[0]})", False)
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.Not):
            return f"!({emit(n.operand)[0]})", True
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub):
            return f"-({emit(n.operand)[0]})", False
        if isinstance(n, ast.BoolOp):
            joiner = " && " if isinstance(n.op, ast.And) else " || "
            return "(" + joiner.join(emit(v)[0] for v in n.values) + ")", True
        if isinstance(n, ast.Compare) and all(type(o) in _COMPARE for o in n.ops):
            operands = [n.left] + n.comparators
            pairs = [f"({emit(a)[0]} {_COMPARE[type(o)]} {emit(b)[0]})"
                     for a, o, b in zip(operands, n.ops, operands[1:])]
            return (pairs[0] if len(pairs) == 1 else "(" + " && ".join(pairs) + ")"), True
        if isinstance(n, ast.IfExp):
            (test, _), (body, body_bool), (other, other_bool) = (
                emit(n.test), emit(n.body), emit(n.orelse))
            return f"({test} ? {body} : {other})", body_bool and other_bool
        if isinstance(n, ast.Call) and not n.keywords:
            name = n.func.id if isinstance(n.func, ast.Name) else \
                n.func.attr if isinstance(n.func, ast.Attribute) else None
            if name in _CALLS:
                return f"{_CALLS[name]}(" + ", ".join(emit(a)[0] for a in n.args) + ")", False
        raise HeuristicError(f"it uses `{ast.unparse(n)}`")

    return emit(node.body)


def condition(expression: str, is_truth: bool, value) -> str:
    """The condition under which the heuristic gives ``value``."""
    if isinstance(value, bool) or is_truth:
        return f"({expression})" if value else f"!({expression})"
    return f"({expression}) == {int(value)}"
