"""The shared-memory layout of tensor-core operand tiles (backend.swizzle), evaluated on
integers: every chunk has one place, the eight rows an ldmatrix matrix reads never share a
bank group, the split addressing of the fragment loops equals the plain formula, and
128-byte rows are exactly the 128B swizzle that wgmma descriptors name."""
import itertools

import pytest

from aotk.backend.swizzle import CHUNK_BYTES, SwizzledTile
from aotk.ir import types as T


class IntBuilder:
    """The llvmlite builder calls SwizzledTile makes, on Python integers."""

    @staticmethod
    def _v(x):
        return x.constant if hasattr(x, "constant") else x

    def add(self, x, y):
        return self._v(x) + self._v(y)

    def mul(self, x, y):
        return self._v(x) * self._v(y)

    def udiv(self, x, y):
        return self._v(x) // self._v(y)

    def urem(self, x, y):
        return self._v(x) % self._v(y)

    def shl(self, x, y):
        return self._v(x) << self._v(y)

    def xor(self, x, y):
        return self._v(x) ^ self._v(y)


B = IntBuilder()
TILES = [(16, 16, T.float16), (64, 32, T.float16), (128, 64, T.float16), (64, 256, T.float16),
         (32, 8, T.float16), (16, 128, T.float16), (16, 32, T.int8), (64, 8, T.int8),
         (16, 8, T.float32), (32, 64, T.float32)]
# Tiles whose rows hold whole 16-byte chunks, the unit ldmatrix and cp.async move.
CHUNKED_TILES = [t for t in TILES if t[1] * t[2].itemsize >= CHUNK_BYTES]


def _chunk_offsets(tile):
    row_chunks = max(1, tile.columns * tile.element.itemsize // CHUNK_BYTES)
    return {(r, c): tile.offset(B, r, c * CHUNK_BYTES)
            for r in range(tile.rows) for c in range(row_chunks)}


@pytest.mark.parametrize("rows, columns, element", TILES)
def test_every_element_has_its_own_place_inside_the_tile(rows, columns, element):
    tile = SwizzledTile(rows, columns, element)
    size = element.itemsize
    offsets = [tile.element_offset(B, r, c) for r in range(rows) for c in range(columns)]
    assert sorted(offsets) == list(range(0, rows * columns * size, size))
    assert tile.bytes == rows * columns * size


@pytest.mark.parametrize("rows, columns, element", CHUNKED_TILES)
def test_eight_rows_of_one_chunk_fall_in_eight_bank_groups(rows, columns, element):
    tile = SwizzledTile(rows, columns, element)
    offsets = _chunk_offsets(tile)
    for (first, chunk) in offsets:
        if first % 8 == 0:
            groups = {offsets[(first + r, chunk)] // CHUNK_BYTES % 8 for r in range(8)}
            assert len(groups) == 8, (first, chunk)


def test_128_byte_rows_are_the_wgmma_128b_swizzle():
    """Panels of 128 bytes, rows back to back; chunk c of row r at chunk c ^ (r % 8)."""
    tile = SwizzledTile(64, 128, T.float16)     # two panels of 64 rows
    for (row, chunk), offset in _chunk_offsets(tile).items():
        panel, within = divmod(chunk, 8)
        assert offset == panel * 64 * 128 + row * 128 + (within ^ (row % 8)) * 16


@pytest.mark.parametrize("rows, columns, element", CHUNKED_TILES)
def test_split_addressing_matches_the_layout(rows, columns, element):
    """A lane's part (row below 8 * 2, low chunk bits) XOR a constant plus a constant, as
    mma.lower_mma addresses ldmatrix fragments, lands where ``offset`` says."""
    tile = SwizzledTile(rows, columns, element)
    row_chunks = columns * element.itemsize // CHUNK_BYTES
    for lane_bits in range(row_chunks.bit_length()):
        lane_limit = 1 << lane_bits
        for lane_row, lane_chunk in itertools.product(range(min(rows, 16)), range(lane_limit)):
            for row in range(0, rows - lane_row, 8):
                for chunk in range(0, row_chunks - lane_chunk, lane_limit):
                    split = tile.split_offset(B, lane_row, lane_chunk, row, chunk)
                    plain = tile.offset(B, lane_row + row, (lane_chunk + chunk) * CHUNK_BYTES)
                    assert split == plain, (lane_row, lane_chunk, row, chunk)


@pytest.mark.parametrize("rows, columns, element", TILES)
def test_a_shift_is_the_same_for_every_element(rows, columns, element):
    """Where ``shift`` gives a constant (rows moved by a multiple of the phase period, or a
    tile without swizzle; the byte by whole panels), every element's offset moves by it,
    as the cp.async destinations of backend.pipeline assume (None: no such promise)."""
    tile = SwizzledTile(rows, columns, element)
    row_bytes = columns * element.itemsize
    for rows_moved in (r for r in (0, 1, 4, 8, 16) if r < rows):
        for bytes_moved in (b for b in (0, 16, tile.width, 2 * tile.width) if b < row_bytes):
            shift = tile.shift(rows_moved, bytes_moved)
            moves = {tile.offset(B, r + rows_moved, c + bytes_moved) - tile.offset(B, r, c)
                     for r in range(rows - rows_moved)
                     for c in range(0, row_bytes - bytes_moved, element.itemsize)}
            if shift is not None:
                assert moves == {shift}, (rows_moved, bytes_moved)
    assert tile.shift(8, 0) == 8 * tile.width
