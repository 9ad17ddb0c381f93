"""What a kernel's scope binds, taken apart and put back together: the frontend's helpers
for compile-time values and for names that cross a region (``codegen``, ``control_flow``).

In: values a scope binds (tensors, ``constexpr``s, tuples, aggregates). Out: ``unwrap`` /
``wrap`` between plain Python values and constexprs; ``structure`` (what must stay the same
when a name crosses a region), ``leaves`` and ``with_leaves`` (a value's single values and
the value rebuilt on new ones), ``same_value`` (a name bound to the same thing on two
paths); ``named_result`` (a kir value as a tensor with a hint name); ``RETURN_SLOT``.
"""
from __future__ import annotations

from ..ir import kir
from ..language.core import aggregate, constexpr, tensor

RETURN_SLOT = "$return"   # the scope entry an executed `return` binds


def unwrap(x):
    return x.value if isinstance(x, constexpr) else x


def wrap(x):
    """Results of plain Python evaluation stay compile-time constants."""
    if isinstance(x, (tensor, constexpr)) or x is None:
        return x
    if isinstance(x, tuple):
        return tuple(wrap(v) for v in x)
    return constexpr(x)


def structure_of(value):
    """What must stay the same when a name crosses a region: the nesting of tuples and the
    compile-time parts of aggregates (None for a single value)."""
    value = unwrap(value)
    if isinstance(value, tuple):
        return tuple(structure_of(v) for v in value)
    if isinstance(value, aggregate):
        return (value.structure_key(), tuple(structure_of(v) for v in value.leaves()))
    return None


def leaves_of(value) -> list:
    """The single values of ``value``, depth first: itself, or the leaves of a tuple's
    elements or of an aggregate's parts."""
    unwrapped = unwrap(value)
    if isinstance(unwrapped, tuple):
        return [leaf for v in unwrapped for leaf in leaves_of(v)]
    if isinstance(unwrapped, aggregate):
        return [leaf for v in unwrapped.leaves() for leaf in leaves_of(v)]
    return [value]


def with_leaves(template, leaves):
    """The structure of ``template`` built on ``leaves`` (an iterator, in ``leaves`` order)."""
    unwrapped = unwrap(template)
    if isinstance(unwrapped, tuple):
        return tuple(with_leaves(v, leaves) for v in unwrapped)
    if isinstance(unwrapped, aggregate):
        return unwrapped.with_leaves([with_leaves(v, leaves) for v in unwrapped.leaves()])
    return next(leaves)


def named_result(value: kir.Value, hint_name) -> tensor:
    value.hint_name = hint_name
    return tensor(value)


def same_value(a, b) -> bool:
    """Whether a name is bound to the same thing on two paths (never calls tensor ==)."""
    if a is b:
        return True
    if isinstance(a, tensor) or isinstance(b, tensor):
        return False
    a, b = unwrap(a), unwrap(b)
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b))
    if isinstance(a, aggregate) and isinstance(b, aggregate):
        return structure_of(a) == structure_of(b) and \
            all(same_value(x, y) for x, y in zip(leaves_of(a), leaves_of(b)))
    try:
        return type(a) is type(b) and bool(a == b)
    except Exception:  # noqa: BLE001 - incomparable objects are different
        return False
