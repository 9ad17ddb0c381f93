"""The ``tl`` atomics: read-modify-write and compare-and-swap at pointers. Each one only
unpacks its arguments and calls ``aotk.semantic`` (``semantic.atomics``)."""
from __future__ import annotations

from .. import semantic
from .core import builtin, named_builtin, tensor_member, unwrap


def _atomic(kind):
    def fn(pointer, val, mask=None, sem=None, scope=None):
        return semantic.atomic_rmw(kind, pointer, unwrap(val), unwrap(mask), sem, scope)
    return named_builtin(fn, f"atomic_{kind}",
                         f"Atomic {kind} at ``pointer``; returns the values it held before.")


atomic_add = _atomic("add")
atomic_max = _atomic("max")
atomic_min = _atomic("min")
atomic_and = _atomic("and")
atomic_or = _atomic("or")
atomic_xor = _atomic("xor")
atomic_xchg = _atomic("xchg")


@builtin
def atomic_cas(pointer, cmp, val, sem=None, scope=None):
    return semantic.atomic_cas(pointer, unwrap(cmp), unwrap(val), sem, scope)


# Triton's tensor methods: ptr.atomic_add(v), ...
for _member in (atomic_add, atomic_and, atomic_cas, atomic_max, atomic_min, atomic_or, atomic_xchg,
                atomic_xor):
    tensor_member(_member)
