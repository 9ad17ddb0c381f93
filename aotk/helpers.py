"""Host helpers Triton has at its top level: plain Python functions, also callable inside
kernels on compile-time values (``constexpr_function``)."""
from __future__ import annotations

from .language.core import constexpr_function


@constexpr_function
def cdiv(x: int, y: int) -> int:
    """ceil(x / y) of integers."""
    return (x + y - 1) // y


@constexpr_function
def next_power_of_2(n: int) -> int:
    """The smallest power of two >= n; 0 for n <= 0, as Triton's bit trick gives."""
    return 0 if n <= 0 else 1 << (int(n) - 1).bit_length()
