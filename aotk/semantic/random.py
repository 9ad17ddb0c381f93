"""Typing rules of Triton's random numbers: ``tl.philox``, ``randint`` / ``randint4x``,
``rand`` / ``rand4x``, ``randn`` / ``randn4x`` and their helpers.

In: a seed (an integer scalar) and offsets (an integer block or scalar). Out: blocks of the
offsets' shape. Built from integer and math ops both executors have, so the streams are
Triton's: Philox4x32 (Philox4x64 for 64-bit counters) with ten rounds by default, keyed by
the seed's low and high words, the offsets' low and high words as the first two counters;
the integer streams and the uniform floats are bit for bit Triton's. Normals go through
Box-Muller with aotk's log / sqrt / cos / sin, which may differ from Triton's in the last
bits.
"""
from __future__ import annotations

from ..ir import types as T
from ..language.core import tensor, unwrap
from .elementwise import add, bitwise, cast, compare, maximum, mul, neg, sub, where
from .math import math_function, unary_math
from .promotion import constant, to_tensor

DEFAULT_ROUNDS = 10
# (key increment A, key increment B, round multiplier A, round multiplier B), the Philox
# constants of Salmon et al., "Parallel random numbers: as easy as 1, 2, 3" (SC'11).
PHILOX_CONSTANTS = {
    32: (0x9E3779B9, 0xBB67AE85, 0xD2511F53, 0xCD9E8D57),
    64: (0x9E3779B97F4A7C15, 0xBB67AE8584CAA73B, 0xD2E7470EE14C6C93, 0xCA5A826395121157),
}
# Largest scale with (2**(bits-1) - 1) * scale < 1.0 after float rounding.
UNIFORM_SCALE = {32: 4.6566127342e-10, 64: 1.0842020432385337e-19}


def _rounds(n_rounds) -> int:
    n = unwrap(n_rounds)
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise ValueError(f"n_rounds must be a non-negative compile-time integer, got {n!r}")
    return n


def philox_impl(c0, c1, c2, c3, k0, k1, n_rounds=DEFAULT_ROUNDS) -> tuple:
    """``n_rounds`` Philox rounds of counters (c0..c3) under key (k0, k1), all uint32 or
    all uint64; returns the four new counters."""
    dtype = to_tensor(c0).dtype
    if dtype not in (T.uint32, T.uint64):
        raise TypeError(f"philox_impl takes uint32 or uint64 counters, got {dtype}")
    key_a, key_b, round_a, round_b = (constant(v, dtype) for v in
                                      PHILOX_CONSTANTS[dtype.primitive_bitwidth])
    for _ in range(_rounds(n_rounds)):
        high_b = math_function("umulhi", round_b, c2)
        high_a = math_function("umulhi", round_a, c0)
        c0, c1, c2, c3 = (bitwise("xor", bitwise("xor", high_b, c1), k0), mul(round_b, c2),
                          bitwise("xor", bitwise("xor", high_a, c3), k1), mul(round_a, c0))
        k0, k1 = add(k0, key_a), add(k1, key_b)
    return c0, c1, c2, c3


def philox(seed, c0, c1, c2, c3, n_rounds=DEFAULT_ROUNDS) -> tuple:
    """Philox of four counters (bitcast to unsigned of their width, 32 or 64 bits) keyed by
    an integer seed."""
    seed = to_tensor(seed)
    if not seed.dtype.is_int() or seed.dtype.is_bool():
        raise TypeError(f"the seed of a random stream must be an integer, got {seed.dtype}")
    seed = cast(seed, T.uint64)
    counters = [to_tensor(c) for c in (c0, c1, c2, c3)]
    bits = counters[0].dtype.primitive_bitwidth
    if bits not in (32, 64):
        raise TypeError(f"philox counters must be 32- or 64-bit integers, got "
                        f"{counters[0].dtype}")
    unsigned = T.uint32 if bits == 32 else T.uint64
    if bits == 32:
        low_word = constant(0xFFFFFFFF, T.uint64)
        seed_low = cast(bitwise("and", seed, low_word), T.uint32)
        seed_high = cast(bitwise("and", bitwise("shr", seed, constant(32, T.uint64)),
                                 low_word), T.uint32)
    else:
        seed_low, seed_high = seed, constant(0, T.uint64)
    counters = [cast(c, unsigned, bitcast=True) for c in counters]
    return philox_impl(*counters, seed_low, seed_high, n_rounds)


def randint4x(seed, offset, n_rounds=DEFAULT_ROUNDS) -> tuple:
    """Four uint32 streams at ``offset`` (its low word the first counter, its high word,
    for 64-bit offsets, the second)."""
    offset = to_tensor(offset)
    low = cast(offset, T.uint32)
    zero = mul(low, constant(0, T.uint32))
    high = cast(bitwise("shr", offset, constant(32, offset.dtype)), T.uint32) \
        if offset.dtype.primitive_bitwidth > 32 else zero
    return philox(seed, low, high, zero, zero, n_rounds)


def randint(seed, offset, n_rounds=DEFAULT_ROUNDS) -> tensor:
    return randint4x(seed, offset, n_rounds)[0]


def uint_to_uniform_float(x) -> tensor:
    """A random 32- or 64-bit integer -> fp32 uniform in [0, 1): the bits as a signed
    integer, negatives folded onto [0, max] (-x - 1), times the largest scale below 1."""
    x = to_tensor(x)
    bits = x.dtype.primitive_bitwidth
    if not x.dtype.is_int() or bits not in (32, 64):
        raise TypeError(f"uint_to_uniform_float takes a 32- or 64-bit integer, got {x.dtype}")
    x = cast(x, T.int32 if bits == 32 else T.int64, bitcast=True)
    folded = where(compare("lt", x, constant(0, x.dtype)),
                   sub(neg(x), constant(1, x.dtype)), x)
    return mul(folded, UNIFORM_SCALE[bits])


def rand(seed, offset, n_rounds=DEFAULT_ROUNDS) -> tensor:
    return uint_to_uniform_float(randint(seed, offset, n_rounds))


def rand4x(seed, offset, n_rounds=DEFAULT_ROUNDS) -> tuple:
    return tuple(uint_to_uniform_float(i) for i in randint4x(seed, offset, n_rounds))


def pair_uniform_to_normal(u1, u2) -> tuple:
    """Box-Muller: two uniforms -> two independent standard normals."""
    u1 = maximum(constant(1.0e-7, T.float32), u1)
    angle = mul(6.283185307179586, u2)
    radius = unary_math("sqrt", mul(-2.0, unary_math("log", u1)))
    return mul(radius, unary_math("cos", angle)), mul(radius, unary_math("sin", angle))


def randn(seed, offset, n_rounds=DEFAULT_ROUNDS) -> tensor:
    i1, i2, _, _ = randint4x(seed, offset, n_rounds)
    return pair_uniform_to_normal(uint_to_uniform_float(i1), uint_to_uniform_float(i2))[0]


def randn4x(seed, offset, n_rounds=DEFAULT_ROUNDS) -> tuple:
    u1, u2, u3, u4 = rand4x(seed, offset, n_rounds)
    return pair_uniform_to_normal(u1, u2) + pair_uniform_to_normal(u3, u4)


__all__ = ["philox", "philox_impl", "randint", "randint4x", "rand", "rand4x", "randn",
           "randn4x", "uint_to_uniform_float", "pair_uniform_to_normal"]
