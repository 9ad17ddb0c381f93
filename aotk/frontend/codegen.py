"""Python AST of an ``@aotk.jit`` function -> kir ``Function``.

In: the parsed source, the runtime parameter types and hints, the constexpr values.
Out: a typed kir function. This layer only walks syntax and binds names; every typing
decision is delegated to ``aotk.semantic`` (through ``tl`` builtins and tensor operators).
Any failure becomes a ``CompilationError`` pointing at the construct being visited.
"""
from __future__ import annotations

import ast
import builtins
import operator

from .. import semantic
from ..errors import CompilationError
from ..ir import kir
from ..ir.signature import HostDescriptorLayout
from ..ir.types import BlockType, DType, PointerType
from ..ir.types import int1 as tl_int1
from ..language.core import (aggregate, constexpr, constexpr_type, is_builtin,
                             is_constexpr_function, tensor, tensor_descriptor)
from ..language.core import condition as tl_condition
from ..language.functions import range as tl_range
from ..language.functions import static_range
from .bindings import RETURN_SLOT, unwrap, wrap
from .control_flow import ControlFlow
from .source import KernelSource, SourceInfo

_BINARY_OPERATORS = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
    ast.Pow: operator.pow, ast.BitAnd: operator.and_, ast.BitOr: operator.or_,
    ast.BitXor: operator.xor, ast.LShift: operator.lshift, ast.RShift: operator.rshift,
}
_COMPARE_OPERATORS = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
    ast.Gt: operator.gt, ast.GtE: operator.ge,
}
_UNARY_OPERATORS = {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Invert: operator.invert}

# Python builtins a kernel may call on compile-time values.
_STATIC_BUILTINS = {builtins.min, builtins.max, builtins.abs, builtins.int, builtins.float,
                    builtins.bool, builtins.len, builtins.isinstance, builtins.range,
                    builtins.print, builtins.tuple, builtins.slice, builtins.list, builtins.getattr,
                    builtins.hasattr, constexpr, constexpr_type,
                    PointerType, DType}   # tl.pointer_type(tl.float16), tl.dtype("fp16")
# Builtins that look at a tensor object, never at its values: fine on tensors.
_OBJECT_BUILTINS = {builtins.isinstance, builtins.hasattr, builtins.getattr, builtins.len}


class CodeGenerator(ControlFlow, ast.NodeVisitor):
    def __init__(self, jit_function, function: kir.Function, builder: kir.Builder,
                 scope: dict, source: "SourceInfo"):
        self.jit_function = jit_function
        self.function = function
        self.builder = builder
        self.scope = dict(scope)
        self.source = source
        self.globals = jit_function.fn.__globals__
        self.enclosing = _enclosing_values(jit_function.fn)
        self.returned = False
        self.loop_depth = 0
        self.rest_after_if: dict = {}   # early-return `if` -> the statements after it

    # -- error plumbing ----------------------------------------------------------------
    def error(self, node, message) -> CompilationError:
        return self.source.error(node, message)

    def visit(self, node):
        if node is None:
            return None
        if isinstance(node, ast.stmt) and self.returned:
            raise self.error(node, "code after `return` is not supported")
        previous = self.builder.loc
        if hasattr(node, "lineno"):
            self.builder.loc = self.source.location(node)
        try:
            return super().visit(node)
        except CompilationError:
            raise
        except Exception as exc:  # noqa: BLE001 - every failure must point at the source
            raise self.error(node, str(exc) or type(exc).__name__) from exc
        finally:
            self.builder.loc = previous

    def generic_visit(self, node):
        raise self.error(node, f"unsupported construct: {type(node).__name__} "
                               "is not supported in aotk kernels")

    # -- statements --------------------------------------------------------------------
    def visit_Module(self, node):
        self._visit_statements(node.body)

    def visit_FunctionDef(self, node):
        body = node.body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                and isinstance(body[0].value.value, str):
            body = body[1:]   # docstring
        self._visit_statements(body)

    def _visit_statements(self, statements, continuation=()):
        """Visits a statement list, then ``continuation`` (what follows the list in the
        statements around it) unless it returned. An ``if`` that returns somewhere takes
        everything after it into each of its branches, so early returns become structured
        control flow: every path runs what follows unless it returned itself."""
        statements = list(statements)
        for index, statement in enumerate(statements):
            if isinstance(statement, ast.If) and _contains_return(statement):
                self.rest_after_if[statement] = statements[index + 1:] + list(continuation)
                self.visit(statement)
                return
            self.visit(statement)
        if continuation and not self.returned:
            self._visit_statements(continuation)

    def visit_Pass(self, node):
        pass

    def visit_Expr(self, node):
        self.visit(node.value)

    def visit_Assign(self, node):
        value = self.visit(node.value)
        for target in node.targets:
            self._assign(target, value, node)

    def visit_AnnAssign(self, node):
        annotation = unwrap(self.visit(node.annotation))
        value = self.visit(node.value)
        if annotation is constexpr and not isinstance(value, constexpr):
            if isinstance(value, tensor) or value is None:
                raise self.error(node.value, "a tl.constexpr local needs a compile-time value")
            value = constexpr(value)   # a dtype, a tuple...: compile-time already
        self._assign(node.target, value, node, keep_constexpr=annotation is constexpr)

    def visit_AugAssign(self, node):
        if not isinstance(node.target, ast.Name):
            raise self.error(node.target, "augmented assignment only to plain names")
        current = self._lookup(node.target.id, node.target)
        value = self._apply_binary(node.op, current, self.visit(node.value), node)
        self._assign(node.target, value, node)

    def _assign(self, target, value, node, keep_constexpr=False):
        """Binds names. As in Triton, a number assigned to a name becomes a 0-d tensor of its
        literal type (``acc = 0.0`` is an fp32 value, ``v = 1`` an int32 one, and they take
        part in promotion as such); only ``NAME: tl.constexpr = ...`` keeps it a
        compile-time value (``keep_constexpr``)."""
        if isinstance(target, ast.Name):
            if not keep_constexpr:
                value = _numbers_as_tensors(value)
            if isinstance(value, tensor) and value.handle.hint_name is None:
                value.handle.hint_name = target.id
            if not isinstance(value, (tensor, tensor_descriptor, aggregate, constexpr, tuple)) \
                    and value is not None:
                value = wrap(value)
            self.scope[target.id] = value
        elif isinstance(target, (ast.Tuple, ast.List)):
            values = unwrap(value)
            if not isinstance(values, (tuple, list)) or len(values) != len(target.elts):
                raise self.error(node, f"cannot unpack into {len(target.elts)} names")
            for t, v in zip(target.elts, values):
                self._assign(t, v, node, keep_constexpr)
        else:
            raise self.error(target, "only names and tuples of names can be assigned")

    def visit_Return(self, node):
        if self.loop_depth:
            raise self.error(node, "`return` inside a loop is not supported; carry a flag "
                                   "or restructure the loop")
        self.scope[RETURN_SLOT] = self.visit(node.value) if node.value is not None else None
        self.returned = True

    @property
    def return_value(self):
        return self.scope.get(RETURN_SLOT)

    def visit_Assert(self, node):
        condition = self.visit(node.test)
        if isinstance(condition, tensor):
            # A runtime condition is a device assert (compiled in only with debug on).
            message = unwrap(self.visit(node.msg)) if node.msg else ast.unparse(node.test)
            semantic.device_assert(condition, message)
            return
        if not unwrap(condition):
            message = unwrap(self.visit(node.msg)) if node.msg else "assertion failed"
            raise self.error(node, f"static assertion failed: {message}")

    # -- expressions -------------------------------------------------------------------
    def visit_Constant(self, node):
        return constexpr(node.value)

    def visit_Name(self, node):
        return self._lookup(node.id, node)

    def _lookup(self, name, node):
        if name in self.scope:
            return self.scope[name]
        if name in self.enclosing or name in self.globals:
            # Python's order: the enclosing function's variables (a kernel defined inside a
            # function sees that function's @jit helpers), then the module's.
            value = self.enclosing[name] if name in self.enclosing else self.globals[name]
            return value if isinstance(value, (tensor, constexpr)) or callable(value) \
                or hasattr(value, "__dict__") else constexpr(value)
        if hasattr(builtins, name):
            return getattr(builtins, name)
        raise self.error(node, f"name {name!r} is not defined")

    def visit_Tuple(self, node):
        return tuple(self.visit(e) for e in node.elts)

    visit_List = visit_Tuple

    def visit_Attribute(self, node):
        base = self.visit(node.value)
        target = base.value if isinstance(base, constexpr) and not hasattr(type(base), node.attr) \
            else base
        try:
            value = getattr(target, node.attr)
        except AttributeError:
            raise self.error(node, f"{type(target).__name__} has no attribute {node.attr!r}") from None
        if isinstance(value, (int, float, bool)) and not isinstance(target, type):
            return constexpr(value)
        return value

    def visit_BinOp(self, node):
        return self._apply_binary(node.op, self.visit(node.left), self.visit(node.right), node)

    def _apply_binary(self, op, lhs, rhs, node):
        fn = _BINARY_OPERATORS.get(type(op))
        if fn is None:
            raise self.error(node, f"unsupported operator {type(op).__name__}")
        if not isinstance(lhs, tensor) and not isinstance(rhs, tensor):
            return wrap(fn(unwrap(lhs), unwrap(rhs)))
        if fn is operator.pow:
            raise self.error(node, "** is not supported on tensors")
        return fn(lhs, rhs)

    def visit_UnaryOp(self, node):
        operand = self.visit(node.operand)
        if isinstance(node.op, ast.Not):
            if isinstance(operand, tensor):
                # Triton's tensor.__not__: a boolean block is inverted; another type would
                # have to be bitcast to int1, which only a 1-bit type allows.
                if not operand.dtype.is_bool():
                    raise self.error(node, f"`not` needs a boolean tensor, got "
                                           f"{operand.dtype}: Cannot bitcast data-type of "
                                           f"size {operand.dtype.primitive_bitwidth} to "
                                           f"data-type of size 1; use ~ or == 0")
                return ~operand
            return constexpr(not unwrap(operand))
        fn = _UNARY_OPERATORS[type(node.op)]
        if isinstance(operand, tensor):
            return fn(operand)
        return wrap(fn(unwrap(operand)))

    def visit_Compare(self, node):
        if len(node.ops) != 1:
            raise self.error(node, "chained comparisons are not supported; combine with &")
        lhs, rhs = self.visit(node.left), self.visit(node.comparators[0])
        op = type(node.ops[0])
        if op in (ast.Is, ast.IsNot):
            if isinstance(lhs, tensor) and isinstance(rhs, tensor):
                raise self.error(node, "`is` between two tensors is not supported; "
                                 "compare values with ==")
            # A tensor is never a compile-time value: `ptr is None` folds, as in Triton
            # (where a None argument is a constexpr None).
            result = unwrap(lhs) is unwrap(rhs)
            return constexpr(result if op is ast.Is else not result)
        if op in (ast.In, ast.NotIn):
            raise self.error(node, "`in` is not supported in kernels")
        fn = _COMPARE_OPERATORS[op]
        if not isinstance(lhs, tensor) and not isinstance(rhs, tensor):
            return constexpr(fn(unwrap(lhs), unwrap(rhs)))
        return fn(lhs, rhs)

    def visit_BoolOp(self, node):
        # Compile-time operands short-circuit as in Python: `x is not None and x.dtype ...`
        # never looks at x.dtype when x is None. An operand that does not decide is dropped.
        values, last = [], None
        for expression in node.values:
            value = last = self.visit(expression)
            if not isinstance(value, tensor) and not any(isinstance(v, tensor) for v in values):
                truth = bool(unwrap(value))
                if truth != isinstance(node.op, ast.And):   # false for and, true for or
                    return constexpr(unwrap(value))
                continue
            values.append(value)
        if not values:
            return constexpr(unwrap(last))
        if any(isinstance(v, tensor) for v in values):
            if any(isinstance(v, tensor) and v.type.shape for v in values):
                # Triton's logical_and / logical_or: elementwise, on boolean blocks.
                for v in values:
                    if isinstance(v, tensor) and v.dtype != tl_int1:
                        raise self.error(node, f"`and`/`or` on blocks take boolean blocks "
                                               f"(comparisons), got {v.dtype}; use & and | "
                                               "for bitwise operations")
                result = values[0]
                for v in values[1:]:
                    result = result & v if isinstance(node.op, ast.And) else result | v
                return result
            # On runtime scalars: both sides are evaluated, then combined as booleans.
            result = semantic.condition(values[0], "`and`/`or`")
            for v in values[1:]:
                v = semantic.condition(v, "`and`/`or`")
                result = result & v if isinstance(node.op, ast.And) else result | v
            return result
        result = unwrap(values[0])
        for v in values[1:]:
            result = (result and unwrap(v)) if isinstance(node.op, ast.And) else (result or unwrap(v))
        return constexpr(result)

    def visit_IfExp(self, node):
        condition = self.visit(node.test)
        if not isinstance(condition, tensor):
            return self.visit(node.body if unwrap(condition) else node.orelse)
        condition = semantic.condition(condition, "a conditional expression (use tl.where "
                                                  "for elementwise choices)")
        regions, values = [kir.Region([]), kir.Region([])], []
        for region, expression in zip(regions, (node.body, node.orelse)):
            with self.builder.insertion(region.body):
                value = self.visit(expression)
                if value is not None:
                    value = semantic.crossing_value("the conditional expression", value)
                self.builder.create("yield", [value.handle] if value is not None else [], None)
            values.append(value)
        if values[0] is None and values[1] is None:
            # `tl.store(...) if c else tl.store(...)`: a statement, run for its effects
            self.builder.create_region_op("if", [condition.handle], regions, [])
            return None
        if values[0] is None or values[1] is None:
            raise self.error(node, "one side of the conditional expression has a value and "
                                   "the other has none (None)")
        if values[0].type != values[1].type:
            raise self.error(node, f"the two sides of the conditional expression have types "
                                   f"{values[0].type} and {values[1].type}; both must agree")
        op = self.builder.create_region_op("if", [condition.handle], regions, [values[0].type])
        return tensor(op.results[0])

    def visit_Subscript(self, node):
        base = self.visit(node.value)
        index = self.visit(node.slice)
        if isinstance(base, tensor):
            return base[index]
        return wrap(unwrap(base)[unwrap(index)])

    def visit_Slice(self, node):
        parts = [unwrap(self.visit(p)) if p is not None else None
                 for p in (node.lower, node.upper, node.step)]
        return slice(*parts)

    def visit_JoinedStr(self, node):
        return constexpr("".join(str(unwrap(self.visit(v))) for v in node.values))

    def visit_FormattedValue(self, node):
        return constexpr(format(unwrap(self.visit(node.value))))

    def visit_Call(self, node):
        fn = unwrap(self.visit(node.func))
        args = [self.visit(a) for a in node.args]
        kwargs = {k.arg: self.visit(k.value) for k in node.keywords}
        if any(k is None for k in kwargs):
            raise self.error(node, "**kwargs in calls are not supported")
        if isinstance(fn, KernelSource):
            return self._inline_call(fn, args, kwargs, node)
        if fn is builtins.range:
            fn = tl_range   # range() in a kernel is a runtime loop, as in Triton
        if fn in (builtins.min, builtins.max) and not kwargs and \
                any(isinstance(a, tensor) for a in args):
            # min()/max() over tensors are tl.minimum/tl.maximum, as in Triton.
            combine = semantic.minimum if fn is builtins.min else semantic.maximum
            result = args[0]
            for other in args[1:]:
                result = combine(result, other)
            return result
        if is_builtin(fn) or fn in (static_range, tl_range, tl_condition) or \
                isinstance(getattr(fn, "__self__", None), (tensor, tensor_descriptor, aggregate)):
            return fn(*args, **kwargs)
        if fn in _STATIC_BUILTINS or getattr(fn, "__module__", "") in ("math",) or \
                is_constexpr_function(fn) or \
                isinstance(getattr(fn, "__self__", None), (DType, PointerType, BlockType)):
            # (the last: a type's own methods, x.dtype.is_fp8(), are compile-time calls)
            if fn not in _OBJECT_BUILTINS and \
                    any(isinstance(a, tensor) for a in list(args) + list(kwargs.values())):
                raise self.error(node, f"{getattr(fn, '__name__', fn)}() works on compile-time "
                                       "values only; use the tl equivalent for tensors")
            if fn is constexpr:   # tl.constexpr(x) in a kernel: x, compile-time
                return wrap(unwrap(args[0]) if args else None)
            return wrap(fn(*[unwrap(a) for a in args], **{k: unwrap(v) for k, v in kwargs.items()}))
        raise self.error(node, f"cannot call {getattr(fn, '__name__', fn)!r} from a kernel: "
                               "only tl builtins and @aotk.jit functions can be called")

    def _inline_call(self, callee, args, kwargs, node):
        """Calls to other @aotk.jit functions are inlined: their body runs in a fresh scope."""
        bound = callee.bind_arguments(args, kwargs)
        tree = callee.parse()
        generator = CodeGenerator(callee, self.function, self.builder, bound, callee.source_info)
        generator.builder.loc = None
        generator.visit(tree.body[0])
        return generator.return_value


def _enclosing_values(fn) -> dict:
    """The variables of the functions enclosing ``fn`` that it reads (its closure cells),
    those that hold a value."""
    values = {}
    for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
        try:
            values[name] = cell.cell_contents
        except ValueError:   # a cell not yet assigned
            continue
    return values


def _numbers_as_tensors(value):
    """Python numbers (bare or constexpr), also inside tuples, as 0-d tensors."""
    if isinstance(value, tuple):
        return tuple(_numbers_as_tensors(v) for v in value)
    raw = unwrap(value)
    if isinstance(raw, (bool, int, float)):
        return semantic.to_tensor(raw)
    return value


def _contains_return(node) -> bool:
    return any(isinstance(n, ast.Return) for n in ast.walk(node))


def _inliner(function: kir.Function, builder: kir.Builder):
    """The semantic layer's hook to generate an ``@aotk.jit`` function's body on given
    arguments (a reduce / scan combine function, inlined into the op's region)."""
    def inline(callee, args):
        if not isinstance(callee, KernelSource):
            raise TypeError(f"the combine function must be an @aotk.jit function, got "
                            f"{getattr(callee, '__name__', callee)!r}")
        bound = callee.bind_arguments(list(args), {})
        generator = CodeGenerator(callee, function, builder, bound, callee.source_info)
        generator.visit(callee.parse().body[0])
        return generator.return_value
    return inline


def generate_kir(jit_function, param_types: dict, hints: dict, constants: dict,
                 debug: bool = False, num_warps: int | None = None,
                 target: str | None = None) -> kir.Function:
    """Builds the kir of ``jit_function`` specialized on types, hints and constexpr values;
    ``debug`` keeps device asserts; ``num_warps`` (when known) is what
    ``tl.extra.cuda.num_warps()`` returns; ``target`` (None on the interpreter) is what
    ``tl.target_info`` reports."""
    function = kir.Function(jit_function.name, [], constants=dict(constants),
                            filename=jit_function.source_info.filename, debug=debug)
    builder = kir.Builder(function)
    scope = {}
    with semantic.building(builder, _inliner(function, builder), num_warps=num_warps,
                           target=target):
        def runtime_param(name):
            value = kir.Value(BlockType(param_types[name]), hint_name=name)
            function.params.append(kir.Param(name, value, hints.get(name)))
            if hints.get(name) == 1:
                # Specialized as equal to 1: folded to a typed constant (type stays stable).
                return semantic.constant(1, param_types[name])
            return tensor(value)

        for name in jit_function.param_names:
            layout = constants.get(name)
            if isinstance(layout, HostDescriptorLayout):
                # A host-built tensor descriptor: its parts are runtime parameters.
                base, *parts = [runtime_param(n) for n in layout.runtime_names(name)]
                shape, strides = parts[:layout.rank], parts[layout.rank:] + [1]
                try:
                    scope[name] = semantic.make_tensor_descriptor(
                        base, shape, strides, list(layout.block_shape), layout.padding)
                except (TypeError, ValueError, NotImplementedError) as exc:
                    raise jit_function.source_info.error(
                        jit_function.parse().body[0],
                        f"the tensor descriptor passed as {name!r}: {exc}") from None
            elif name in jit_function.constexpr_names or name in constants:
                # (a runtime parameter in ``constants`` is a None argument)
                scope[name] = constexpr(constants[name])
            else:
                scope[name] = runtime_param(name)
        tree = jit_function.parse()
        generator = CodeGenerator(jit_function, function, builder, scope, jit_function.source_info)
        generator.visit(tree.body[0])
        if generator.return_value is not None:
            raise jit_function.source_info.error(tree.body[0], "a kernel cannot return a value")
    return function
