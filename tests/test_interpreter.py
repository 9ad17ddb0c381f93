"""The interpreter's rule registry: every op family's module registers exactly its family's
ops (issue 16's table, the same family names as aotk/semantic and aotk/backend), and a
second rule for an op is refused. (What the rules compute is checked by the kernel cases,
run by test_semantics and the other interpreter tests.)"""
import pytest

from aotk.interpreter import executor

OP_FAMILIES = {
    "creation": "program_id num_programs constant arange read_register",
    "elementwise": "add sub mul fdiv idiv irem frem and or xor shl shr min max cmp "
                   "neg not abs select cast addptr",
    "math": "exp exp2 log log2 sqrt rsqrt sin cos floor ceil fma math",
    "views": "splat broadcast expand_dims permute reshape join split",
    "memory": "load store hint prefetch",
    "reduce": "reduce argreduce",
    "scan": "scan",
    "dot": "dot",
    "atomics": "atomic_rmw atomic_cas",
    "descriptors": "descriptor_load descriptor_store",
    "debug": "debug_barrier device_print device_assert",
    "sort": "sort",
    "gather": "gather",
    "histogram": "histogram",
    "inline_asm": "inline_asm",
}
REGION_FAMILIES = {
    "combine": "reduce scan",
    "control": "for if while",
    "map_elementwise": "map_elementwise",
}


def _family_of_each_op(table: dict) -> dict:
    return {opcode: family for family, opcodes in table.items() for opcode in opcodes.split()}


def _module_of_each_rule(rules: dict) -> dict:
    return {opcode: rule.__module__.rsplit(".", 1)[1] for opcode, rule in rules.items()}


def test_op_rules_come_from_their_family_module():
    assert _module_of_each_rule(executor.OP_RULES) == _family_of_each_op(OP_FAMILIES)


def test_region_rules_come_from_their_family_module():
    assert _module_of_each_rule(executor.REGION_RULES) == _family_of_each_op(REGION_FAMILIES)


def test_a_second_rule_for_an_op_is_refused():
    before = dict(executor.OP_RULES)
    with pytest.raises(ValueError, match="a second rule for add"):
        executor.register_op_rules({"add": lambda ctx, op, a, b: a - b,
                                    "not_an_op": lambda ctx, op: None})
    assert executor.OP_RULES == before
