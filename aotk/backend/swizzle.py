"""Where a tensor-core operand tile lives in shared memory: one swizzled layout, written by
threads (``mma.store_tile``) or ``cp.async`` (``backend.pipeline``) and read by ``ldmatrix``
(mma.sync) or through ``wgmma`` descriptors.

In: a row-major [rows, columns] tile of one element type. Out: byte offsets (i32) of its
elements.

Each row's bytes are cut into panels W = min(row bytes, 128) wide; a panel holds W bytes
of every row, rows back to back, and the panels follow one another. Inside a panel the
16-byte chunk c of row r sits at chunk c ^ phase(r), with phase(r) = (r / P) % C for
C = W / 16 chunks per row and P = 128 / W rows per 128-byte line (P * C = 8). The same
chunk of eight consecutive rows, which one ``ldmatrix`` 8x8 matrix or one wgmma core
matrix reads, so lands in eight different 16-byte bank groups without padding. For W = 128
this is the hardware's 128B swizzle that wgmma descriptors name. Rows narrower than 16
bytes (one chunk) are not swizzled.

Reads in a loop over a tile's fragments use ``split_offset``: a lane-dependent part
computed once, XORed with a constant per fragment column, plus a constant, which ptxas
keeps in a few registers and the instructions' immediate offsets (Triton's ldmatrix
addressing does the same).
"""
from __future__ import annotations

import llvmlite.ir as ir

from .llvm_types import I32

CHUNK_BYTES = 16
LINE_BYTES = 128
PHASE_ROWS = LINE_BYTES // CHUNK_BYTES   # rows after which the chunk permutation repeats
# The 128B swizzle's atom: the rows of one whole permutation (wgmma tiles start on one).
SWIZZLE_ATOM_BYTES = PHASE_ROWS * LINE_BYTES


def _c(value: int):
    return ir.Constant(I32, value)


class SwizzledTile:
    """The layout of one [rows, columns] tile of ``element`` (see the module text)."""

    def __init__(self, rows: int, columns: int, element):
        self.rows, self.columns, self.element = rows, columns, element
        row_bytes = columns * element.itemsize
        self.width = min(row_bytes, LINE_BYTES)
        self.chunks = max(1, self.width // CHUNK_BYTES)
        self.rows_per_line = max(1, LINE_BYTES // self.width) if self.chunks > 1 else 1
        self.bytes = rows * row_bytes

    def _phase(self, builder, row):
        """phase(row) * 16: the chunk bits this row's chunks are XORed with."""
        if self.chunks == 1:
            return _c(0)
        line = builder.udiv(row, _c(self.rows_per_line)) if self.rows_per_line > 1 else row
        return builder.shl(builder.urem(line, _c(self.chunks)), _c(4))

    def offset(self, builder, row, column_bytes):
        """Byte offset (i32) of byte ``column_bytes`` (i32) of ``row`` (i32)."""
        panel = builder.udiv(column_bytes, _c(self.width))
        within = builder.urem(column_bytes, _c(self.width))
        linear = builder.add(builder.mul(panel, _c(self.rows * self.width)),
                             builder.mul(row, _c(self.width)))
        return builder.add(linear, builder.xor(within, self._phase(builder, row)))

    def shift(self, rows: int, column_bytes: int):
        """The constant that ``offset`` adds when its row moves by ``rows`` and its byte by
        ``column_bytes``, for every row and byte; None when that depends on them. Exact
        where the phase repeats (rows a multiple of ``PHASE_ROWS``, or no swizzle) and the
        byte moves by whole panels."""
        if self.chunks > 1 and rows % (self.rows_per_line * self.chunks) or \
                column_bytes % self.width:
            return None
        return rows * self.width + column_bytes // self.width * self.rows * self.width

    def element_offset(self, builder, row, column):
        """Byte offset (i32) of element (``row``, ``column``), both i32."""
        return self.offset(builder, row,
                           builder.mul(column, _c(self.element.itemsize)))

    def split_offset(self, builder, lane_row, lane_chunk, row: int, chunk: int):
        """Byte offset (i32) of the 16-byte chunk ``lane_chunk + chunk`` of row ``lane_row +
        row``: the registers' part, XORed with a constant, plus a constant. Needs ``row`` a
        multiple of 8 (phases repeat every 8 rows) and ``chunk``'s bits disjoint from those
        ``lane_chunk`` may take, so that the sums carry nothing between the two parts."""
        assert row % PHASE_ROWS == 0, row
        panel_bytes = self.rows * self.width
        lane_panel = builder.udiv(lane_chunk, _c(self.chunks))
        lane_within = builder.shl(builder.urem(lane_chunk, _c(self.chunks)), _c(4))
        lane_part = builder.add(
            builder.add(builder.mul(lane_panel, _c(panel_bytes)),
                        builder.mul(lane_row, _c(self.width))),
            builder.xor(lane_within, self._phase(builder, lane_row)))
        swizzled = builder.xor(lane_part, _c((chunk % self.chunks) * CHUNK_BYTES)) \
            if chunk % self.chunks else lane_part
        constant = (chunk // self.chunks) * panel_bytes + row * self.width
        return builder.add(swizzled, _c(constant)) if constant else swizzled


def tile_of(value) -> SwizzledTile:
    """The layout of a 2-d block value's tile."""
    rows, columns = value.type.shape
    return SwizzledTile(rows, columns, value.element)


def aligned_tile_bytes(tile: SwizzledTile, alignment: int = LINE_BYTES) -> int:
    """``tile.bytes`` rounded up so that the next tile starts on ``alignment`` bytes."""
    return (tile.bytes + alignment - 1) // alignment * alignment
