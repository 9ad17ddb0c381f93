"""The statements that open regions, for ``codegen.CodeGenerator``: ``if``, ``for`` and
``while`` -> kir ``if`` / ``for`` / ``while`` ops with their regions.

In: the statement's AST and the generator's scope. Out: the region op appended to the
current block, and the scope rebound to its results. Names assigned in a region cross it as
block arguments and results: ``_find_carried`` finds which (a loop body is visited twice,
first to learn what it assigns), ``_merge_regions`` and ``_rebind`` bind the results back,
each checked to keep its type and structure (``semantic.check_carried_type``). A ``for``
over ``tl.static_range`` is unrolled instead; a compile-time condition visits one branch.
"""
from __future__ import annotations

import ast

from .. import semantic
from ..ir import kir
from ..language.core import constexpr, tensor
from ..language.core import condition as tl_condition
from ..language.functions import range as tl_range
from ..language.functions import static_range
from .bindings import (RETURN_SLOT, leaves_of, named_result, same_value, structure_of, unwrap,
                       with_leaves)


class ControlFlow:
    """Mixin of ``codegen.CodeGenerator``: its ``visit_If``, ``visit_For``, ``visit_While``."""

    def visit_If(self, node):
        absorbs_rest = node in self.rest_after_if
        rest = self.rest_after_if.pop(node, [])
        condition = self.visit(node.test)
        if not isinstance(condition, tensor):
            self._visit_statements(node.body if unwrap(condition) else node.orelse, rest)
            return
        condition = semantic.condition(condition, "`if`")
        before = dict(self.scope)
        regions, branches = [kir.Region([]), kir.Region([])], []
        for region, statements in zip(regions, (node.body, node.orelse)):
            self.scope, self.returned = dict(before), False
            with self.builder.insertion(region.body):
                self._visit_statements(statements, rest)
            branches.append((self.scope, self.returned))
        returned = any(r for _, r in branches)
        if returned:
            for scope, _ in branches:
                scope.setdefault(RETURN_SLOT, None)
        scopes = [scope for scope, _ in branches]
        if absorbs_rest:
            # Each branch ran the rest of the function (``_visit_statements``; no loop holds
            # a return): nothing reads a name after this ``if`` but the return value. A name
            # the two paths leave with different types (fla's ``NC = min(NC, ...)``
            # after an early return: i64 on one path, the constexpr's i32 on the other) is
            # no error then, and nothing but the return value crosses.
            scopes = [{name: value for name, value in scope.items() if name == RETURN_SLOT}
                      for scope in scopes]
        results = self._merge_regions(node, "if", [condition.handle], regions, scopes, before)
        self.scope = results
        self.returned = returned

    def _merge_regions(self, node, opcode, operands, regions, scopes, before):
        """Ends each region with a yield of the values that differ between them and emits the
        region op; returns the scope after it. Tuples and aggregates cross leaf by leaf, and
        only the leaves that differ are yielded (a block pointer's constant strides stay
        constants)."""
        names = [n for n in scopes[0] if all(n in s for s in scopes[1:])]
        merged = {n: scopes[0][n] for n in names}
        crossing = []   # (name, leaf index)
        for name in names:
            if all(same_value(scopes[0][name], s[name]) for s in scopes[1:]):
                continue
            structure = structure_of(scopes[0][name])
            if any(structure_of(s[name]) != structure for s in scopes[1:]):
                raise self.error(node, f"{self._describe(name)} is a tuple of a different "
                                       "length (or a different kind of value) on each path")
            leaves = [leaves_of(s[name]) for s in scopes]
            crossing += [(name, i) for i in range(len(leaves[0]))
                         if not all(same_value(leaves[0][i], other[i]) for other in leaves[1:])]
        yielded = []
        for region, scope in zip(regions, scopes):
            with self.builder.insertion(region.body):
                values = [self._crossing(n, leaves_of(scope[n])[i], node) for n, i in crossing]
                self.builder.create("yield", [v.handle for v in values], None)
            yielded.append(values)
        for index, (name, _) in enumerate(crossing):
            types = [values[index].type for values in yielded]
            if any(t != types[0] for t in types):
                raise self.error(node, f"{self._describe(name)} has type {types[0]} in the `if` "
                                       f"branch but {types[1]} in the `else` branch; both must agree")
        op = self.builder.create_region_op(opcode, operands, regions,
                                           [v.type for v in yielded[0]])
        self._rebind(merged, scopes[0], crossing, op.results)
        return merged

    @staticmethod
    def _rebind(scope, templates, crossing, values):
        """Binds in ``scope`` each crossing name to its template (from ``templates``) with the
        crossing leaves replaced by ``values`` (kir values, in ``crossing`` order)."""
        replaced: dict = {}
        for (name, index), value in zip(crossing, values):
            hint = None if name == RETURN_SLOT else name
            replaced.setdefault(name, {})[index] = named_result(value, hint)
        for name, by_index in replaced.items():
            leaves = [by_index.get(i, leaf) for i, leaf in enumerate(leaves_of(templates[name]))]
            scope[name] = with_leaves(templates[name], iter(leaves))

    @staticmethod
    def _describe(name) -> str:
        return "the return value" if name == RETURN_SLOT else repr(name)

    def _crossing(self, name, value, node):
        if name == RETURN_SLOT and value is None:
            raise self.error(node, "every path must return a value when one of them does")
        return semantic.crossing_value(name, value)

    def visit_For(self, node):
        iterator = unwrap(self.visit(node.iter))
        if node.orelse:
            raise self.error(node, "for/else is not supported")
        if isinstance(iterator, (static_range, range)):
            iterations = iterator.range if isinstance(iterator, static_range) else iterator
            for i in iterations:
                # As in Triton, the variable of an unrolled loop is a compile-time value
                # (it can index a tuple: ``parts[i]``).
                self._assign(node.target, constexpr(i), node, keep_constexpr=True)
                self._visit_statements(node.body)
            return
        if not isinstance(iterator, tl_range):
            raise self.error(node.iter, "a kernel loops over range(...), tl.range(...) or "
                                        "tl.static_range(...)")
        if not isinstance(node.target, ast.Name):
            raise self.error(node.target, "the loop variable must be a plain name")
        start, end, step = semantic.loop_bounds(iterator.start, iterator.end, iterator.step)
        target = node.target.id
        carried = self._find_carried({target: start.type}, lambda: self._visit_statements(node.body))
        before = dict(self.scope)
        inits = self._carried_values(carried, before, node)
        induction = kir.Value(start.type, hint_name=target)
        region = kir.Region([induction] + [kir.Value(v.type, hint_name=n)
                                           for (n, _), v in zip(carried, inits)])
        self.scope[target] = tensor(induction)
        self._fill_loop_region(region, region.args[1:], carried, before, inits, node,
                               lambda: self._visit_statements(node.body), "yield")
        op = self.builder.create_region_op(
            "for", [start.handle, end.handle, step.handle] + [v.handle for v in inits], [region],
            [v.type for v in inits], direction=semantic.step_direction(iterator.step),
            num_stages=iterator.num_stages,
            **({"warp_specialize": True} if iterator.warp_specialize else {}))
        self.scope = before
        self._rebind(self.scope, before, carried, op.results)

    def visit_While(self, node):
        if node.orelse:
            raise self.error(node, "while/else is not supported")

        def body():
            self._while_test(node.test)
            self._visit_statements(node.body)
        carried = self._find_carried({}, body)
        before = dict(self.scope)
        inits = self._carried_values(carried, before, node)
        condition_region = kir.Region([kir.Value(v.type, hint_name=n)
                                       for (n, _), v in zip(carried, inits)])
        body_region = kir.Region([kir.Value(v.type, hint_name=n)
                                  for (n, _), v in zip(carried, inits)])

        def test():
            condition = semantic.condition(self._while_test(node.test), "`while`")
            return [condition.handle]
        self._fill_loop_region(condition_region, condition_region.args, carried, before, inits,
                               node, test, "condition", forward_args=True)
        self.scope = dict(before)
        self._fill_loop_region(body_region, body_region.args, carried, before, inits, node,
                               lambda: self._visit_statements(node.body), "yield")
        op = self.builder.create_region_op("while", [v.handle for v in inits],
                                           [condition_region, body_region], [v.type for v in inits])
        self.scope = before
        self._rebind(self.scope, before, carried, op.results)

    def _while_test(self, test):
        """The condition of a while loop; ``tl.condition(c, ...)`` stands for ``c``."""
        value = self.visit(test)
        return value.condition if isinstance(value, tl_condition) else value

    def _find_carried(self, fresh: dict, visit_body) -> list:
        """The (name, leaf index) pairs a loop body changes, found by generating the body once
        into a scratch block (as Triton does): those become loop-carried values. A tuple or
        an aggregate carries only the leaves that change (a block pointer its offsets)."""
        before = dict(self.scope)
        self.loop_depth += 1
        try:
            with self.builder.insertion([]):
                for name, value_type in fresh.items():
                    self.scope[name] = tensor(kir.Value(value_type, hint_name=name))
                visit_body()
        finally:
            self.loop_depth -= 1
        after, self.scope = self.scope, before
        carried = []
        for name in before:
            if name in fresh or name not in after or same_value(before[name], after[name]):
                continue
            old, new = leaves_of(before[name]), leaves_of(after[name])
            if structure_of(before[name]) != structure_of(after[name]):
                carried.append((name, None))   # reported by _carried_values
                continue
            carried += [(name, i) for i in range(len(old)) if not same_value(old[i], new[i])]
        return carried

    def _carried_values(self, carried, before, node) -> list:
        """The initial values of the carried leaves, as tensors."""
        for name, index in carried:
            if index is None:
                raise self.error(node, f"{name!r} changes its structure inside the loop (a "
                                       "tuple of another length, or another kind of value)")
        return [self._crossing(n, leaves_of(before[n])[i], node) for n, i in carried]

    def _fill_loop_region(self, region, args, carried, before, inits, node, visit, terminator,
                          forward_args=False):
        self._rebind(self.scope, before, carried, args)
        self.loop_depth += 1
        try:
            with self.builder.insertion(region.body):
                leading = visit() or []
                if forward_args:
                    values = list(args)
                else:
                    values = self._updated_values(carried, before, inits, node)
                self.builder.create(terminator, leading + values, None)
        finally:
            self.loop_depth -= 1

    def _updated_values(self, carried, before, inits, node) -> list:
        """The kir values the loop body yields for the carried leaves, checked to keep their
        types (and the leaves that are not carried to stay as they were)."""
        values = []
        for (name, index), init in zip(carried, inits):
            if structure_of(self.scope[name]) != structure_of(before[name]):
                raise self.error(node, f"{name!r} changes its structure inside the loop (a "
                                       "tuple of another length, or another kind of value)")
            new = self._crossing(name, leaves_of(self.scope[name])[index], node)
            try:
                semantic.check_carried_type(name, init.type, new.type, "loop-carried")
            except TypeError as exc:
                raise self.error(node, str(exc)) from None
            values.append(new.handle)
        return values
