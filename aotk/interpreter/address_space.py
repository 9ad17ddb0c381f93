"""Byte-addressed view of the numpy arrays a kernel received.

In: the array arguments. Out: an ``AddressSpace`` that gathers and scatters elements at real
byte addresses (``arr.ctypes.data``), so alignment and offsets behave as on the GPU, views
(``x[1:]``, transposes) included. Only active lanes touch memory; an active lane outside
every argument's buffer raises ``IndexError``.
"""
from __future__ import annotations

import numpy as np


def _owner(array: np.ndarray) -> np.ndarray:
    while isinstance(array.base, np.ndarray):
        array = array.base
    return array


class AddressSpace:
    def __init__(self, kernel_name: str, arrays):
        self.kernel_name = kernel_name
        regions = {}
        for array in arrays:
            owner = _owner(array)
            if not owner.flags.c_contiguous and not owner.flags.f_contiguous:
                raise ValueError(f"{kernel_name}: array memory must come from a contiguous "
                                 "buffer (a view of one is fine)")
            start = owner.ctypes.data
            regions[start] = owner.reshape(-1, order="A").view(np.uint8)
        self.starts = np.array(sorted(regions), dtype=np.uint64)
        self.buffers = [regions[int(s)] for s in self.starts]

    def _locate(self, addresses: np.ndarray, itemsize: int):
        """(region index, byte offset) of each address; raises on active lanes outside."""
        index = np.searchsorted(self.starts, addresses, side="right").astype(np.int64) - 1
        offsets = np.zeros(addresses.shape, np.int64)
        ok = index >= 0
        sizes = np.array([b.size for b in self.buffers], np.int64)
        offsets[ok] = (addresses[ok] - self.starts[index[ok]]).astype(np.int64)
        ok &= offsets + itemsize <= np.where(index >= 0, sizes[np.maximum(index, 0)], 0)
        if not ok.all():
            bad = int(addresses[~ok][0])
            raise IndexError(f"{self.kernel_name}: out-of-bounds access at address {bad:#x} "
                             "(no kernel argument holds it; is a mask missing?)")
        return index, offsets

    def load(self, addresses: np.ndarray, dtype: np.dtype) -> np.ndarray:
        dtype = np.dtype(dtype)
        out = np.empty(addresses.shape, dtype)
        if addresses.size == 0:
            return out
        index, offsets = self._locate(addresses, dtype.itemsize)
        lanes = np.arange(dtype.itemsize)
        for region in np.unique(index):
            selected = index == region
            raw = self.buffers[region][offsets[selected][:, None] + lanes]
            out[selected] = raw.copy().view(dtype).reshape(-1)
        return out

    def store(self, addresses: np.ndarray, values: np.ndarray):
        """Lanes in row-major order; of duplicate addresses the last write wins
        (on the GPU that order is unspecified)."""
        if addresses.size == 0:
            return
        values = np.ascontiguousarray(values)
        index, offsets = self._locate(addresses, values.dtype.itemsize)
        lanes = np.arange(values.dtype.itemsize)
        raw = values.reshape(-1).view(np.uint8).reshape(-1, values.dtype.itemsize)
        for region in np.unique(index):
            selected = index == region
            self.buffers[region][offsets[selected][:, None] + lanes] = raw[selected]
