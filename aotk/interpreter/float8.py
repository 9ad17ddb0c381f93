"""The interpreter's 8-bit floats: held as their raw uint8 codes; converted with tables.

In: uint8 codes or numpy floats, and a ``Float8Format`` (``aotk.ir.float8``). Out: the
float32 values of codes (a 256-entry table per format, built from ``float8.decode``), or the
codes a conversion produces (nearest code by search, with ``float8.encode``'s rules). Only
casts and constants see values: loads, stores, selects and views move the codes unchanged,
and arithmetic on fp8 is done in float32 by the typing rules.
"""
from __future__ import annotations

import functools

import numpy as np

from ..ir import float8


@functools.lru_cache(maxsize=None)
def _table(fmt: float8.Float8Format) -> np.ndarray:
    return np.array([float8.decode(fmt, code) for code in range(256)], np.float32)


def decode(fmt: float8.Float8Format, codes) -> np.ndarray:
    """float32 values of uint8 codes."""
    return _table(fmt)[np.asarray(codes).astype(np.uint8)]


def encode(fmt: float8.Float8Format, values, rounding: str = "rtne",
           from_fp16: bool = False) -> np.ndarray:
    """uint8 codes of float values, as ``float8.encode`` rounds one value."""
    if fmt.through_fp16:
        return _encode_through_fp16(values, from_fp16)
    x = np.asarray(values, np.float64)
    magnitudes = _table(fmt)[:fmt.max_finite_code + 1].astype(np.float64)   # increasing
    a = np.abs(x)
    low = np.clip(np.searchsorted(magnitudes, np.nan_to_num(a, posinf=np.inf), side="right") - 1,
                  0, fmt.max_finite_code)
    high = np.minimum(low + 1, fmt.max_finite_code)
    below, above = a - magnitudes[low], magnitudes[high] - a
    if rounding == "rtz":
        code = low
    else:
        round_up = (above < below) | ((above == below) & (low % 2 == 1))
        code = np.where(round_up & (high > low), high, low)
    code = np.where(a >= magnitudes[-1], fmt.max_finite_code, code)
    sign = np.where(np.signbit(x), 0x80, 0)
    return np.where(np.isnan(x), float8.NAN_CODE, code | sign).astype(np.uint8)


def _encode_through_fp16(values, from_fp16: bool) -> np.ndarray:
    """float8e4b15 codes: float32 values narrowed to float16 towards zero first (NaN to the
    positive canonical NaN, as the GPU's cvt.rz does), then ``float8.e4b15_from_half_bits``
    on every element."""
    if from_fp16:
        bits = np.asarray(values, np.float16).view(np.uint16).astype(np.uint32)
    else:
        x = np.asarray(values, np.float32)
        with np.errstate(over="ignore", invalid="ignore"):
            nearest = x.astype(np.float16)
            farther = np.abs(nearest.astype(np.float32)) > np.abs(x)
            toward_zero = np.where(farther, np.nextafter(nearest, np.float16(0)), nearest)
        bits = np.where(np.isnan(x), 0x7FFF, toward_zero.view(np.uint16)).astype(np.uint32)
    magnitude = np.minimum(bits & 0x7FFF, float8.E4B15_LARGEST_HALF_BITS)
    return (((bits >> 8) & 0x80) | ((magnitude + 0x40) >> 7)).astype(np.uint8)
