"""One warp shuffle: ``shfl.sync`` of a scalar register of any type.

In: a register (integer or float, 8 to 64 bits), the lane argument (a lane for ``idx``, a
distance for ``bfly`` / ``up`` / ``down``) and the mode. Out: the register the shuffle
delivers, of the same type: moved in 32-bit pieces, each one ``llvm.nvvm.shfl.sync.*.i32``
over the full warp. Used by the reductions' and scans' butterflies and steps, the
conversions within a warp (``warp_conversions``) and the tf32 A fragments gathered within
a lane quad (``register_operands``).
"""
from __future__ import annotations

import llvmlite.ir as ir

from .llvm_types import I32

FULL_MASK = 0xFFFFFFFF


def shuffle(ctx, value, lane_argument, mode: str):
    """``shfl.sync.<mode>`` (idx, bfly, up, down) of any scalar type, in 32-bit pieces."""
    bld = ctx.builder
    fn_name = f"llvm.nvvm.shfl.sync.{mode}.i32"
    clamp = 0 if mode == "up" else 0x1F
    fn = ctx.module.globals.get(fn_name) or ir.Function(
        ctx.module, ir.FunctionType(I32, [I32, I32, I32, I32]), name=fn_name)
    width = value.type.width if isinstance(value.type, ir.IntType) else \
        {"half": 16, "bfloat": 16, "float": 32, "double": 64}[str(value.type)]
    as_int = value if isinstance(value.type, ir.IntType) else bld.bitcast(value, ir.IntType(width))
    pieces = []
    for start in range(0, max(width, 32), 32):
        piece = bld.lshr(as_int, ir.Constant(as_int.type, start)) if start else as_int
        piece = bld.trunc(piece, I32) if width > 32 else (bld.zext(piece, I32) if width < 32 else piece)
        pieces.append(bld.call(fn, [ir.Constant(I32, FULL_MASK), piece, lane_argument,
                                    ir.Constant(I32, clamp)]))
    if width < 32:
        result = bld.trunc(pieces[0], ir.IntType(width))
    elif width == 32:
        result = pieces[0]
    else:
        wide = ir.IntType(width)
        result = bld.or_(bld.zext(pieces[0], wide),
                         bld.shl(bld.zext(pieces[1], wide), ir.Constant(wide, 32)))
    return result if isinstance(value.type, ir.IntType) else bld.bitcast(result, value.type)
