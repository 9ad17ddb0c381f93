"""Bessel functions as libdevice computes them, for the interpreter's libdevice references.

In: an order and x (Python floats; for jn / yn numpy arrays of the operand types). Out:
J_n, Y_n, I_0 / I_1 in float64 (or exact decimals near 0, Hankel's expansion far out,
recurrences between), within a few float64 ulps of the true value (absolute near their
zeros; high orders lose more through their recurrences), and the values libdevice itself
gives where it departs from the true one: jn's backward recurrence is followed step by
step in the operand type where it overflows to NaN (x = 0, tiny x), and __nv_yn's shortcut
below 1e-308. tests/test_libdevice.py measures them against mpmath and the GPU.
"""
from __future__ import annotations

import math
from decimal import Decimal, localcontext
from math import factorial

import numpy as np


def sign_bit_set(x: float) -> bool:
    """Whether the sign bit of ``x`` is set (-0.0 included)."""
    return math.copysign(1.0, x) < 0


_PI = Decimal("3.14159265358979323846264338327950288419716939937510")
_EULER_GAMMA = Decimal("0.57721566490153286060651209008240243104215933593992")
_BESSEL_SERIES_UP_TO = 20.0   # |x| above: Hankel's expansion, whose terms shrink below 1e-17


def _bessel_series(order: int, x: float, second_kind: bool) -> float:
    """J_order(x), or Y_order(x) for 0 < x (A&S 9.1.10 / 9.1.11), by the power series in
    decimal arithmetic with digits to spare for the terms' cancellation (they grow to
    about e**x)."""
    with localcontext() as context:
        context.prec = 40 + int(0.45 * x)
        half = Decimal(x) / 2
        step = -(half * half)
        term = (half ** order if order else Decimal(1)) / factorial(order)   # (0**0 = 1)
        harmonic, harmonic_shifted = Decimal(0), sum(Decimal(1) / j for j in range(1, order + 1))
        first_kind = term
        psi_sum = term * (harmonic + harmonic_shifted - 2 * _EULER_GAMMA)   # psi(1)+psi(n+1)
        k = 0
        while term != 0 and (k <= half or abs(term) > abs(first_kind) * Decimal("1e-36")):
            k += 1
            term = term * step / (k * (k + order))
            harmonic += Decimal(1) / k
            harmonic_shifted += Decimal(1) / (k + order)
            first_kind += term
            psi_sum += term * (harmonic + harmonic_shifted - 2 * _EULER_GAMMA)
        if not second_kind:
            return float(first_kind)
        finite_sum = sum(factorial(order - k - 1) / Decimal(factorial(k)) * (half * half) ** k
                         for k in range(order)) / half ** order
        return float((2 * half.ln() * first_kind - finite_sum - psi_sum) / _PI)


def _bessel_asymptotic(order: int, x: float) -> tuple:
    """(J_order(x), Y_order(x)) for x > 20 by Hankel's expansion (A&S 9.2.5 - 9.2.10),
    order 0 or 1."""
    mu = 4 * order * order
    p, q, term, k = 1.0, 0.0, 1.0, 0
    while abs(term) > 1e-18:
        k += 1
        term *= (mu - (2 * k - 1) ** 2) / (8 * k * x)
        if k % 2:
            q += term if k % 4 == 1 else -term
        else:
            p += term if k % 4 == 0 else -term
    # The phase x - (2 order + 1) pi / 4 through sin x and cos x, which libm reduces exactly.
    sine, cosine = math.sin(x), math.cos(x)
    root_half = math.sqrt(0.5)
    if order == 0:
        phase_cos, phase_sin = (cosine + sine) * root_half, (sine - cosine) * root_half
    else:
        phase_cos, phase_sin = (sine - cosine) * root_half, -(sine + cosine) * root_half
    scale = math.sqrt(2 / (math.pi * x))
    return (scale * (p * phase_cos - q * phase_sin), scale * (p * phase_sin + q * phase_cos))


def _bessel_j_nonnegative(order: int, x: float) -> float:
    """J_order(x) for x >= 0, order >= 0."""
    if x == 0:
        return 1.0 if order == 0 else 0.0
    if order and order * (math.log(x) - math.log(2)) - math.lgamma(order + 1) < -746:
        return 0.0      # |J_n(x)| <= (x/2)**n / n! (A&S 9.1.62) is below every float64
    if x <= _BESSEL_SERIES_UP_TO:
        return _bessel_series(order, x, second_kind=False)
    if order <= 1:
        return _bessel_asymptotic(order, x)[0]
    if order < x:   # forward recurrence: stable while the order stays below x
        previous, current = _bessel_asymptotic(0, x)[0], _bessel_asymptotic(1, x)[0]
        for k in range(1, order):
            previous, current = current, 2 * k / x * current - previous
        return current
    # Miller's backward recurrence from far above the order, normalized by
    # J0 + 2 (J2 + J4 + ...) = 1
    start = 2 * ((order + int(math.sqrt(160 * order))) // 2)
    above, current, even_sum, result = 0.0, 1.0, 0.0, 0.0
    for k in range(start, 0, -1):
        above, current = current, 2 * k / x * current - above
        if abs(current) > 1e250:
            above, current, even_sum, result = (v * 1e-250 for v in (above, current, even_sum,
                                                                      result))
        if k == order + 1:
            result = current    # J_order, before the normalization
        if (k - 1) % 2 == 0 and k > 1:
            even_sum += current
    return result / (2 * even_sum + current)


def bessel_j(order, x):
    """jn / j0 / j1: J_order(x); NaN for a negative order, +0 at infinity."""
    order = int(order)
    if order < 0 or math.isnan(x):
        return math.nan
    value = 0.0 if math.isinf(x) else _bessel_j_nonnegative(order, abs(x))
    return -value if sign_bit_set(x) and order % 2 else value     # J_n(-x) = (-1)^n J_n(x)


def _libdevice_backward_jn(order: int, x, held):
    """J_order(x) as libdevice computes it where it recurs backward (order >= 2 and |x| up
    to about the order: __nv_jnf while |x| <= order + (order > 4), __nv_jn while |x| <=
    order - 1): Miller's recurrence in the operand type ``held``, started at 2 (order +
    sqrt(40 order)) / 2 (fp32) or sqrt(60 order) (fp64), rescaled by 1e-15 past 1e15.
    Followed step by step because its ratio 2k / x overflows for x = 0 and tiny x, and the
    GPU then returns NaN (inf / inf), where J_order is 0."""
    fp32 = held is np.float32
    x = held(x)
    two_over_x = None if fp32 else held(2.0) / x
    start = 2 * ((order + int(math.sqrt(held((40 if fp32 else 60) * order)))) >> 1)
    above, current, normalizer, result = held(0), held(1), held(0), held(0)
    for k in range(start, 0, -1):
        ratio = held(2 * k) / x if fp32 else held(k) * two_over_x
        below = ratio * current - above
        if abs(np.float32(below)) > 1e15:
            below, current, result, normalizer = (v * held(1e-15) for v in
                                                  (below, current, result, normalizer))
        above, current = current, below
        if k - 1 == order:
            result = current
        if k % 2:
            normalizer = normalizer + held(2) * current
    return float(result / (normalizer - current))


def bessel_jn(orders, x):
    """jn: J_order(x), NaN where libdevice's backward recurrence breaks down (x = 0, tiny
    x); elsewhere the float64 value of _bessel_j."""
    held = np.asarray(x).dtype.type

    def one(order, value):
        order = int(order)
        bound = order + (order > 4) if held is np.float32 else order - 1
        if order >= 2 and abs(value) <= bound:
            with np.errstate(all="ignore"):
                if math.isnan(_libdevice_backward_jn(order, value, held)):
                    return math.nan
        return bessel_j(order, float(value))
    return np.asarray(np.frompyfunc(one, 2, 1)(orders, x), np.float64)


def bessel_y(order, x):
    """yn / y0 / y1: Y_order(x); NaN for a negative order or x, -inf at 0, +0 at +inf."""
    order = int(order)
    if order < 0 or math.isnan(x) or x < 0:
        return math.nan
    if x == 0:
        return -math.inf
    if math.isinf(x):
        return 0.0
    if x <= _BESSEL_SERIES_UP_TO:
        previous, current = (_bessel_series(n, x, second_kind=True) for n in (0, 1))
    else:
        previous, current = _bessel_asymptotic(0, x)[1], _bessel_asymptotic(1, x)[1]
    if order == 0:
        return previous
    for k in range(1, order):    # forward recurrence: stable for Y
        if math.isinf(current):
            break
        previous, current = current, 2 * k / x * current - previous
    return current


def bessel_yn(orders, x):
    """yn: Y_order(x), but where __nv_yn (fp64) takes its shortcut for orders >= 2 and
    0 <= x < 1e-308 (-0 included): -(2 / pi) / x, so +inf at -0 (fp32's ynf has no such
    case at -0: -inf)."""
    held = np.asarray(x).dtype.type

    def one(order, value):
        order, value = int(order), float(value)
        if held is np.float64 and order >= 2 and value >= 0 and value < 1e-308:
            with np.errstate(all="ignore"):
                return float(np.float64(-2 / math.pi) / np.float64(value))
        return bessel_y(order, value)
    return np.asarray(np.frompyfunc(one, 2, 1)(orders, x), np.float64)


def bessel_i(order: int):
    """cyl_bessel_i0 / i1: the modified Bessel function I_order (order 0 or 1) by its power
    series, whose terms are all positive, in decimal arithmetic; it overflows float64 from
    |x| = 714 on."""
    def modified(x):
        magnitude = abs(x)
        if math.isnan(x) or magnitude > 720:
            value = math.inf if magnitude > 720 else math.nan
        else:
            with localcontext() as context:
                context.prec = 30
                half = Decimal(magnitude) / 2
                term = (half ** order if order else Decimal(1)) / factorial(order)
                total, k = term, 0
                while term > total * Decimal("1e-25"):
                    k += 1
                    term = term * half * half / (k * (k + order))
                    total += term
                value = float(total)     # inf beyond float64's range
        return -value if order and sign_bit_set(x) else value   # I1 is odd, I0 even
    return modified


__all__ = ["bessel_i", "bessel_j", "bessel_jn", "bessel_y", "bessel_yn", "sign_bit_set"]
