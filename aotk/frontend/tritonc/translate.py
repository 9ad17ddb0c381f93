"""A Triton-C kernel's parse tree -> the Python AST of the equivalent ``@aotk.jit`` kernel.

In: the lark tree of one ``__global__`` function (``grammar.lark``) and, per line of the
parsed text, the line of the file it came from. Out: an ``ast.Module`` holding one
``def name(params):`` whose statements call ``tl`` (the language) and ``tc``
(``tritonc.builtins``), every node carrying the Triton-C line and column it stands for, and
the parameters' C types. The mapping:

  ``T x[D0, D1] = e``      ``x = tc.declare(e, T, (D0, D1))`` (later ``x = e`` too)
  ``a ... b``              ``tl.arange(a, b)``
  ``*p``, ``*?(m) p``       ``tl.load(p)``, ``tl.load(p, mask=m)``; as targets ``tl.store``
  ``m ? *p : o``           ``tl.load(p, mask=m, other=o)``; ``c ? a : b`` is ``tl.where``
  ``x[:, newaxis]``        ``x[:, None]``; ``x[+]``, ``x[:, max]`` ``tc.reduce``
  ``a @ b``                ``tl.dot(a, b)``; ``/`` and ``%`` C's (``tc.div``, ``tc.mod``)
  ``for (i = a; i < b; i += s)``  ``for i in range(a, b, s)``; other ``for``s,
                           ``while`` and ``do``/``while`` become Python ``while`` loops
  ``get_program_id``, ``exp``, ``max``, ``select``, ``atomic_add`` ...  their ``tl`` names
"""
from __future__ import annotations

import ast

from lark import Token, Tree

from ...errors import CompilationError

C_TYPES = {("bool",): "int1", ("char",): "int8", ("short",): "int16", ("int",): "int32",
           ("long",): "int64", ("half",): "float16", ("float",): "float32",
           ("double",): "float64", ("unsigned", "char"): "uint8",
           ("unsigned", "short"): "uint16", ("unsigned",): "uint32",
           ("unsigned", "int"): "uint32", ("unsigned", "long"): "uint64",
           ("signed", "char"): "int8", ("signed",): "int32", ("signed", "int"): "int32"}

# Triton-C's built-in functions and the tl functions they are.
FUNCTIONS = {"get_program_id": "program_id", "get_num_programs": "num_programs",
             "exp": "exp", "log": "log", "sqrt": "sqrt", "sin": "sin", "cos": "cos",
             "min": "minimum", "max": "maximum", "select": "where",
             "atomic_add": "atomic_add", "atomic_cas": "atomic_cas",
             "atomic_xchg": "atomic_xchg", "atomic_max": "atomic_max",
             "atomic_min": "atomic_min", "__debug_barrier": "debug_barrier",
             "cdiv": "cdiv"}
CONSTANTS = {"INFINITY": "inf", "NAN": "nan"}
COMPARISONS = {"==": ast.Eq, "!=": ast.NotEq, "<": ast.Lt, "<=": ast.LtE, ">": ast.Gt,
               ">=": ast.GtE}
OPERATORS = {"+": ast.Add, "-": ast.Sub, "*": ast.Mult, "&": ast.BitAnd, "|": ast.BitOr,
             "^": ast.BitXor, "<<": ast.LShift, ">>": ast.RShift}


class Parameter:
    """A kernel parameter as C declares it: name, element type (a tl dtype name), whether
    it is a pointer, and the divisibility its attributes promise (or None)."""

    def __init__(self, name: str, element: str, pointer: bool, divisibility: int | None):
        self.name, self.element, self.pointer, self.divisibility = name, element, pointer, divisibility


class Translator:
    def __init__(self, filename: str, origins: list[int]):
        self.filename = filename
        self.origins = origins
        self.declared: list[dict] = [{}]   # scopes: name -> (dtype ast, shape ast)

    # -- positions and errors ------------------------------------------------------------
    def _position(self, item) -> tuple:
        meta = getattr(item, "meta", None)
        line = getattr(item, "line", None) or (getattr(meta, "line", None) if meta else None)
        column = getattr(item, "column", None) or (getattr(meta, "column", None) if meta else None)
        if line is None:
            return 1, 0
        origin = self.origins[line - 1] if 0 < line <= len(self.origins) else line
        return origin, max((column or 1) - 1, 0)

    def located(self, node, item):
        line, column = self._position(item)
        for child in ast.walk(node):
            if isinstance(child, (ast.expr, ast.stmt)) and not hasattr(child, "lineno"):
                child.lineno, child.col_offset = line, column
                child.end_lineno, child.end_col_offset = line, column
        return node

    def error(self, item, message) -> CompilationError:
        line, column = self._position(item)
        return CompilationError(message, self.filename, line, column)

    # -- helpers -----------------------------------------------------------------------
    @staticmethod
    def _call(module: str, name: str, args, keywords=()):
        return ast.Call(ast.Attribute(ast.Name(module, ast.Load()), name, ast.Load()),
                        list(args), [ast.keyword(k, v) for k, v in keywords])

    def _dtype(self, words: list[str], stars: int, item):
        key = tuple(w for w in words if w != "const")
        if key not in C_TYPES:
            raise self.error(item, f"unknown type {' '.join(words)!r}")
        dtype = ast.Attribute(ast.Name("tl", ast.Load()), C_TYPES[key], ast.Load())
        for _ in range(stars):
            dtype = self._call("tl", "pointer_type", [dtype])
        return dtype

    def _lookup(self, name: str):
        for scope in reversed(self.declared):
            if name in scope:
                return scope[name]
        return None

    # -- kernels -----------------------------------------------------------------------
    def kernel(self, tree: Tree) -> tuple[ast.Module, list[Parameter]]:
        name_token, *rest = tree.children
        params = [self.parameter(p) for p in rest[:-1] if p is not None]
        body_tree = rest[-1]
        for p in params:
            self.declared[0][p.name] = None   # parameters keep the type they are given
        body = self.compound(body_tree, new_scope=False) or [ast.Pass()]
        arguments = ast.arguments(posonlyargs=[], args=[ast.arg(p.name) for p in params],
                                  kwonlyargs=[], kw_defaults=[], defaults=[])
        function = ast.FunctionDef(str(name_token), arguments, body, [], None, type_params=[])
        self.located(function, name_token)
        module = ast.Module([function], type_ignores=[])
        return ast.fix_missing_locations(module), params

    def parameter(self, tree: Tree) -> Parameter:
        words, stars, divisibility, name = [], 0, None, None
        for child in tree.children:
            if isinstance(child, Token) and child.type == "TYPE_WORD":
                words.append(str(child))
            elif isinstance(child, Token) and child.type == "STAR":
                stars += 1
            elif isinstance(child, Token) and child.type == "NAME":
                name = str(child)
            elif isinstance(child, Tree) and child.data == "attribute":
                if len(child.children) == 2:   # __aligned(N) / __multipleof(N)
                    divisibility = int(str(child.children[1]).rstrip("uUlL"))
        key = tuple(w for w in words if w != "const")
        if key not in C_TYPES:
            raise self.error(tree, f"parameter {name!r}: unknown type {' '.join(words)!r}")
        if stars > 1:
            raise self.error(tree, f"parameter {name!r}: pointers to pointers are not supported")
        # __aligned(N) / __multipleof(N): the largest hint aotk has that divides N.
        hint = next((h for h in (16, 8, 4, 2) if divisibility and divisibility % h == 0), None)
        return Parameter(name, C_TYPES[key], bool(stars), hint)

    # -- statements --------------------------------------------------------------------
    def compound(self, tree: Tree, new_scope: bool = True) -> list:
        if new_scope:
            self.declared.append({})
        statements = []
        for child in tree.children:
            statements += self.statement(child)
        if new_scope:
            self.declared.pop()
        return statements

    def statement(self, tree) -> list:
        kind = tree.data
        if kind == "compound":
            return self.compound(tree)
        if kind == "declaration":
            return [self.declaration(tree)]
        if kind == "assignment":
            return [self.assignment(tree)]
        if kind == "expression_statement":
            return [self.located(ast.Expr(self.expression(tree.children[0])), tree)]
        if kind == "empty_statement":
            return []
        if kind == "return_statement":
            return [self.located(ast.Return(None), tree)]
        if kind == "if_statement":
            condition, then, *orelse = tree.children
            node = ast.If(self.expression(condition), self.block(then),
                          self.block(orelse[0]) if orelse and orelse[0] is not None else [])
            return [self.located(node, tree)]
        if kind == "while_statement":
            condition, body = tree.children
            return [self.located(ast.While(self.expression(condition), self.block(body), []),
                                 tree)]
        if kind == "for_statement":
            return self.for_statement(tree)
        if kind == "do_statement":
            # do { body } while (c);  is  body; while (c) { body }
            body, condition = tree.children
            return self.block(body) + [self.located(
                ast.While(self.expression(condition), self.block(body), []), tree)]
        if kind in ("break_statement", "continue_statement"):
            word = kind.split("_")[0]
            raise self.error(tree, f"{word} is not supported: a loop runs until its condition "
                                   "fails (as in Triton's Python language); fold the exit "
                                   "into the loop's condition")
        raise self.error(tree, f"unsupported statement ({kind})")

    def block(self, tree) -> list:
        self.declared.append({})
        statements = self.statement(tree) or [ast.Pass()]
        self.declared.pop()
        return statements

    def declaration(self, tree: Tree):
        words = [str(t) for t in tree.children if isinstance(t, Token) and t.type == "TYPE_WORD"]
        stars = sum(1 for t in tree.children if isinstance(t, Token) and t.type == "STAR")
        name = next(t for t in tree.children if isinstance(t, Token) and t.type == "NAME")
        shape = next((c for c in tree.children if isinstance(c, Tree) and c.data == "shape"),
                     None)
        attributes = [c for c in tree.children if isinstance(c, Tree) and c.data == "attribute"]
        values = [c for c in tree.children if not isinstance(c, Token) and c is not shape
                  and c not in attributes]
        dtype = self._dtype(words, stars, tree)
        dims = ast.Tuple([self.expression(d) for d in shape.children], ast.Load()) \
            if shape is not None else ast.Tuple([], ast.Load())
        self.declared[-1][str(name)] = (dtype, dims)
        value = self.expression(values[0]) if values else ast.Constant(0)
        declared = self._call("tc", "declare", [value, dtype, dims])
        for attribute in attributes:
            # __multipleof(N) / __aligned(N) on a local: a divisibility hint, tl.multiple_of
            if len(attribute.children) == 2:
                divisor = int(str(attribute.children[1]).rstrip("uUlL"))
                declared = self._call("tl", "multiple_of", [declared, ast.Constant(divisor)])
        return self.located(ast.Assign([ast.Name(str(name), ast.Store())], declared), tree)

    def assignment(self, tree: Tree):
        target, operator, value_tree = tree.children
        value = self.expression(value_tree)
        operator = str(operator)
        if target.data == "name_target":
            name = str(target.children[0])
            if operator == "+=" and isinstance(value_tree, Tree) and value_tree.data == "binary" \
                    and str(value_tree.children[1]) == "@":
                # acc += a @ b: the dot accumulates into acc (one MMA chain, as tl.dot's acc=)
                value = self._call("tl", "dot", [self.expression(value_tree.children[0]),
                                                 self.expression(value_tree.children[2]),
                                                 ast.Name(name, ast.Load())])
            elif operator != "=":
                value = self._binary(operator[:-1], ast.Name(name, ast.Load()), value, tree)
            declared = self._lookup(name)
            if declared:
                value = self._call("tc", "declare", [value, *declared])
            return self.located(ast.Assign([ast.Name(name, ast.Store())], value), tree)
        if target.data == "store_target":
            pointer, keywords = self.expression(target.children[0]), []
        else:   # masked_store_target
            mask, pointer_tree = target.children
            pointer, keywords = self.expression(pointer_tree), [("mask", self.expression(mask))]
        if operator != "=":   # *p += v: read, combine, write back (under the same mask)
            current = self._call("tl", "load", [pointer], keywords)
            value = self._binary(operator[:-1], current, value, tree)
        return self.located(ast.Expr(self._call("tl", "store", [pointer, value], keywords)), tree)

    def for_statement(self, tree: Tree) -> list:
        init, condition, step, body = tree.children
        self.declared.append({})
        simple = self._counting_loop(init, condition, step)
        if simple is not None:
            name, start, stop, stride = simple
            loop = ast.For(ast.Name(name, ast.Store()),
                           ast.Call(ast.Name("range", ast.Load()), [start, stop, stride], []),
                           self.block(body), [])
            self.declared.pop()
            return [self.located(loop, tree)]
        first = self.statement(init.children[0])
        step_statement = self._step(step)
        loop = ast.While(self.expression(condition), self.block(body) + [step_statement], [])
        self.declared.pop()
        return first + [self.located(loop, tree)]

    def _step(self, step: Tree):
        inner = step.children[0]
        if inner.data == "increment":
            name, operator = inner.children
            value = self._binary(str(operator)[0], ast.Name(str(name), ast.Load()),
                                 ast.Constant(1), inner)
            return self.located(ast.Assign([ast.Name(str(name), ast.Store())], value), inner)
        return self.assignment(inner)

    def _counting_loop(self, init: Tree, condition, step: Tree):
        """``for (T i = a; i < b; i += s)`` (or ``i++``): (i, a, b, s), else None."""
        inner = init.children[0]
        if inner.data == "declaration":
            names = [t for t in inner.children if isinstance(t, Token) and t.type == "NAME"]
            values = [c for c in inner.children if isinstance(c, Tree) and c.data != "shape"]
            if any(isinstance(c, Tree) and c.data == "shape" for c in inner.children) or \
                    not values:
                return None
            name, start = str(names[0]), values[0]
        elif inner.data == "assignment" and inner.children[0].data == "name_target" and \
                str(inner.children[1]) == "=":
            name, start = str(inner.children[0].children[0]), inner.children[2]
        else:
            return None
        if not (isinstance(condition, Tree) and condition.data == "comparison"
                and str(condition.children[1]) == "<"
                and isinstance(condition.children[0], Tree)
                and condition.children[0].data == "name"
                and str(condition.children[0].children[0]) == name):
            return None
        stepping = step.children[0]
        if stepping.data == "increment" and str(stepping.children[0]) == name and \
                str(stepping.children[1]) == "++":
            stride = ast.Constant(1)
        elif stepping.data == "assignment" and stepping.children[0].data == "name_target" and \
                str(stepping.children[0].children[0]) == name and str(stepping.children[1]) == "+=":
            stride = self.expression(stepping.children[2])
        else:
            return None
        return name, self.expression(start), self.expression(condition.children[2]), stride

    # -- expressions -------------------------------------------------------------------
    def _binary(self, operator: str, left, right, item):
        if operator == "/":
            return self._call("tc", "div", [left, right])
        if operator == "%":
            return self._call("tc", "mod", [left, right])
        if operator == "@":
            return self._call("tl", "dot", [left, right])
        if operator not in OPERATORS:
            raise self.error(item, f"unsupported operator {operator}")
        return ast.BinOp(left, OPERATORS[operator](), right)

    def expression(self, tree):
        node = self._expression(tree)
        return self.located(node, tree)

    def _expression(self, tree):
        if isinstance(tree, Token):
            raise self.error(tree, f"unexpected {tree!s}")
        kind, children = tree.data, tree.children
        if kind == "name":
            name = str(children[0])
            if name in CONSTANTS:
                return ast.Call(ast.Name("float", ast.Load()), [ast.Constant(CONSTANTS[name])], [])
            return ast.Name(name, ast.Load())
        if kind == "integer":
            return ast.Constant(int(str(children[0]).rstrip("uUlL")))
        if kind == "floating":
            return ast.Constant(float(str(children[0]).rstrip("fF")))
        if kind == "binary":
            left, operator, right = children
            return self._binary(str(operator), self.expression(left), self.expression(right), tree)
        if kind == "comparison":
            left, operator, right = children
            return ast.Compare(self.expression(left), [COMPARISONS[str(operator)]()],
                               [self.expression(right)])
        if kind in ("logical_and", "logical_or"):
            return self._call("tc", kind, [self.expression(children[0]),
                                           self.expression(children[-1])])
        if kind == "logical_not":
            return self._call("tc", "logical_not", [self.expression(children[0])])
        if kind == "negative":
            return ast.UnaryOp(ast.USub(), self.expression(children[0]))
        if kind == "invert":
            return ast.UnaryOp(ast.Invert(), self.expression(children[0]))
        if kind == "range_expression":
            return self._call("tl", "arange", [self.expression(children[0]),
                                               self.expression(children[1])])
        if kind == "load":
            return self._call("tl", "load", [self.expression(children[0])])
        if kind == "masked_load":
            mask, pointer = children
            # Masked-off elements are undefined, as a load without ``other`` in Python.
            return self._call("tl", "load", [self.expression(pointer)],
                              [("mask", self.expression(mask))])
        if kind == "ternary":
            condition, then, otherwise = children
            if isinstance(then, Tree) and then.data == "load":
                return self._call("tl", "load", [self.expression(then.children[0])],
                                  [("mask", self.expression(condition)),
                                   ("other", self.expression(otherwise))])
            return self._call("tl", "where", [self.expression(condition), self.expression(then),
                                              self.expression(otherwise)])
        if kind in ("cast", "block_cast"):
            words = [str(t) for t in children if isinstance(t, Token) and t.type == "TYPE_WORD"]
            stars = sum(1 for t in children if isinstance(t, Token) and t.type == "STAR")
            dtype = self._dtype(words, stars, tree)
            operand = self.expression(children[-1])
            if kind == "cast":
                return ast.Call(ast.Attribute(operand, "to", ast.Load()), [dtype], [])
            shape = next(c for c in children if isinstance(c, Tree) and c.data == "shape")
            dims = ast.Tuple([self.expression(d) for d in shape.children], ast.Load())
            return self._call("tc", "declare", [operand, dtype, dims])
        if kind == "subscripted":
            return self._subscript(children[0], children[1:], tree)
        if kind == "call":
            callee, *arguments = children
            name = str(callee.children[0])
            if name not in FUNCTIONS:
                raise self.error(tree, f"unknown function {name!r} (Triton-C has "
                                       f"{', '.join(sorted(FUNCTIONS))})")
            arguments = [self.expression(a) for a in arguments if a is not None]
            if name in ("min", "max"):   # numbers too, as C's
                return self._call("tc", FUNCTIONS[name], arguments)
            return self._call("tl", FUNCTIONS[name], arguments)
        raise self.error(tree, f"unsupported expression ({kind})")

    def _subscript(self, base, subscripts, tree):
        value = self.expression(base)
        kinds = [s.data for s in subscripts]
        if "reduce" in kinds:
            if "newaxis" in kinds:
                raise self.error(tree, "a subscript either reduces or adds axes, not both")
            operations = ast.Tuple([ast.Constant(str(s.children[0]) if s.data == "reduce"
                                                 else None) for s in subscripts], ast.Load())
            return self._call("tc", "reduce", [value, operations])
        items = [ast.Slice(None, None, None) if k == "keep" else ast.Constant(None)
                 for k in kinds]
        return ast.Subscript(value, ast.Tuple(items, ast.Load()), ast.Load())
