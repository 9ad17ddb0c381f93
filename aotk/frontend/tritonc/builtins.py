"""The operations Triton-C spells differently from the Python language, as tl builtins the
translated kernels call (``tc.<name>``): the rest of Triton-C maps onto ``tl`` directly.

In: tensors and constexprs, as every builtin. Out: tensors, through ``aotk.language`` and
``aotk.semantic`` (nothing here emits kir itself).
"""
from __future__ import annotations

from ... import language as tl
from ... import semantic
from ...language.core import builtin, constexpr, tensor


def _value(x):
    return x.value if isinstance(x, constexpr) else x


def _shape(x) -> list:
    return list(x.type.shape) if isinstance(x, tensor) else []


@builtin
def declare(value, dtype, shape=()):
    """``T name[D0, D1] = value`` (and every later assignment to ``name``): ``value``
    converted to ``T`` as C converts, and made a block of shape [D0, D1] by numpy's
    broadcasting; a value of another shape that does not broadcast is an error."""
    dtype = _value(dtype)
    shape = [int(_value(d)) for d in _value(shape)]
    if shape and not isinstance(value, tensor):   # a number fills the block (tl.full)
        return tl.full(shape, _value(value), dtype)
    value = semantic.to_tensor(value) if not isinstance(value, tensor) else value
    if value.dtype != dtype:
        value = semantic.cast(value, dtype)
    if shape and _shape(value) != shape:
        have = _shape(value)
        padded = [1] * (len(shape) - len(have)) + have
        if len(have) > len(shape) or any(h not in (1, s) for h, s in zip(padded, shape)):
            raise ValueError(f"a value of shape {have} does not broadcast to the declared "
                             f"shape {shape}")
        if len(have) < len(shape):
            value = semantic.reshape(value, *padded) if have else value
        value = semantic.broadcast_to(value, shape)
    elif not shape and _shape(value):
        raise ValueError(f"a block of shape {_shape(value)} assigned to a scalar (declare it "
                         "with a shape, or reduce it with [+], [max] or [min])")
    return value


def _both_integers(a, b) -> bool:
    def integer(x):
        x = _value(x)
        if isinstance(x, tensor):
            return x.dtype.is_int()
        return isinstance(x, int)
    return integer(a) and integer(b)


@builtin
def div(a, b):
    """C's ``/``: integers divide towards zero, anything else is a float division."""
    if _both_integers(a, b):
        x, y = _value(a), _value(b)
        if not isinstance(x, tensor) and not isinstance(y, tensor):
            quotient = abs(x) // abs(y)
            return constexpr(quotient if (x >= 0) == (y >= 0) else -quotient)
        return a // b   # on integer blocks, towards zero (as in Triton)
    return a / b


@builtin
def mod(a, b):
    """C's ``%``: the remainder takes the sign of the dividend."""
    x, y = _value(a), _value(b)
    if not isinstance(x, tensor) and not isinstance(y, tensor):
        remainder = abs(x) % abs(y)
        return constexpr(remainder if x >= 0 else -remainder)
    return a % b


@builtin
def reduce(x, axes):
    """``x[+]``, ``x[:, max]``, ``x[min, :]``: one subscript names the reduction, the
    others are ``:``; the reduced axis goes away."""
    axes = [_value(a) for a in _value(axes)]
    reductions = [(i, op) for i, op in enumerate(axes) if op is not None]
    if len(reductions) != 1:
        raise ValueError("a reduction subscript takes one reduction (+, max or min) and `:` "
                         "for every other axis")
    if len(axes) != len(_shape(x)):
        raise ValueError(f"{len(axes)} subscript(s) for a block of shape {_shape(x)}")
    axis, op = reductions[0]
    function = {"+": tl.sum, "max": tl.max, "min": tl.min}[op]
    return function(x, axis)


@builtin
def logical_and(a, b):
    return (a != 0) & (b != 0)


@builtin
def logical_or(a, b):
    return (a != 0) | (b != 0)


@builtin
def logical_not(a):
    return a == 0


@builtin
def minimum(a, b):
    """C's ``min``: of two numbers a number, else ``tl.minimum``."""
    if not isinstance(a, tensor) and not isinstance(b, tensor):
        return constexpr(min(_value(a), _value(b)))
    return tl.minimum(a, b)


@builtin
def maximum(a, b):
    if not isinstance(a, tensor) and not isinstance(b, tensor):
        return constexpr(max(_value(a), _value(b)))
    return tl.maximum(a, b)
