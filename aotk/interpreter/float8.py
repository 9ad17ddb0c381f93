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


def encode(fmt: float8.Float8Format, values, rounding: str = "rtne") -> np.ndarray:
    """uint8 codes of float values, as ``float8.encode`` rounds one value."""
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
