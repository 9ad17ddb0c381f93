"""Typing rules of ``tl.dot``: block matrix products on tensor cores, Triton's dtype rules.

In: two blocks of rank 2 ([M, K] @ [K, N]) or more (batched [B.., M, K] @ [B.., K, N]), an optional
accumulator, the input precision and output dtype. Out: the ``dot`` result [.., M, N].

  fp16 x fp16 -> fp32 (or fp16 with out_dtype=tl.float16)
  bf16 x bf16 -> fp32
  fp32 x fp32 -> fp32, inputs rounded to tf32 unless input_precision="ieee" ("tf32x3" splits
                 each input in two tf32 parts for close to fp32 accuracy; Triton's "bf16x3"
                 and "bf16x6" are computed as "ieee")
  fp64 x fp64 -> fp64
  int8 x int8 -> int32
  fp8 x fp8 (float8e4nv, float8e5, mixed) -> fp32: both upcast to fp16 (exact), then fp16
K is at least one tensor-core step (32 for 8-bit operands, 16 for 16-bit, 8 for 32-bit, 4
for fp64), as Triton asks; M and N may be as small as 1 (such dots run on CUDA cores).
"""
from __future__ import annotations

import os

from ..ir import types as T
from ..ir.types import BlockType
from ..language.core import tensor, unwrap
from .building import emit
from .elementwise import add, bitwise, cast, compare, maximum, mul, neg, sub, where
from .promotion import constant, to_tensor
from .views import broadcast_to, expand_dims, interleave, permute, reshape, trans

INPUT_PRECISIONS = ("tf32", "tf32x3", "ieee")
# Triton's bf16 splits of fp32 operands (3 or 6 bf16 products): approximations of the fp32
# product, which aotk computes instead ("ieee"), at least as accurate.
AS_IEEE = ("bf16x3", "bf16x6")
def min_dot_k(element) -> int:
    """The smallest K Triton's NVIDIA backend takes for operands of ``element`` (one
    tensor-core K step; M and N may be anything, small tiles are padded or go to FMAs)."""
    return {8: 32, 16: 16, 32: 8, 64: 4}[element.primitive_bitwidth]


def _default_precision() -> str:
    """Triton's TRITON_F32_DEFAULT, spelled for aotk."""
    return os.environ.get("AOTK_F32_DEFAULT", "tf32")


def dot(a, b, acc=None, input_precision=None, allow_tf32=None, out_dtype=T.float32) -> tensor:
    a, b = to_tensor(a), to_tensor(b)
    rank = len(a.type.shape)
    if rank > 3 and len(b.type.shape) == rank and a.type.shape[:-2] == b.type.shape[:-2]:
        # Several batch dimensions: one batch of their product, then the shape back.
        batch = a.type.shape[:-2]
        count = 1
        for d in batch:
            count *= d
        flat = [reshape(x, (count,) + x.type.shape[-2:]) for x in (a, b)]
        if acc is not None:
            acc = to_tensor(acc)
            acc = reshape(acc, (count,) + acc.type.shape[-2:])
        product = dot(*flat, acc, input_precision, allow_tf32, out_dtype)
        return reshape(product, batch + product.type.shape[-2:])
    if rank not in (2, 3) or len(b.type.shape) != rank:
        raise ValueError(f"tl.dot takes two 2-d blocks or two 3-d (batched) blocks, got shapes "
                         f"{list(a.type.shape)} and {list(b.type.shape)}")
    *batch_a, m, k = a.type.shape
    *batch_b, k_b, n = b.type.shape
    if k != k_b or batch_a != batch_b:
        raise ValueError(f"tl.dot shapes do not match: {list(a.type.shape)} @ "
                         f"{list(b.type.shape)} (the inner dimensions and batch must agree)")
    if a.dtype.is_fp8e4b15() or b.dtype.is_fp8e4b15():
        # No MMA reads e4b15: both sides become fp16 first (exact), as in Triton.
        a, b = cast(a, T.float16), cast(b, T.float16)
    min_k = min_dot_k(a.dtype)
    if k < min_k:
        raise ValueError(f"Input shapes should have M >= 1, N >= 1 and K >= {min_k} (got "
                         f"M={m}, N={n}, K={k} for {a.dtype} operands); use a larger K block "
                         "or tl.sum(a[:, :, None] * b[None, :, :], axis=1)")
    if a.dtype.is_fp8() and b.dtype.is_fp8():
        # Every fp8 value is exact in fp16: the product is the fp8 product (Triton upcasts
        # the same way where the target has no fp8 MMA).
        a, b = cast(a, T.float16), cast(b, T.float16)
    if a.dtype != b.dtype:
        raise TypeError(f"tl.dot needs operands of one element type, got {a.dtype} and {b.dtype}; "
                        "cast one with .to()")
    element = a.dtype
    out_dtype = unwrap(out_dtype)
    precision = unwrap(input_precision)
    if allow_tf32 is not None and precision is None:
        precision = "tf32" if unwrap(allow_tf32) else "ieee"
    if element.is_int():
        if element != T.int8:
            raise TypeError(f"integer tl.dot takes int8 operands, got {element}")
        result_element = T.int32
    elif element in (T.float16, T.bfloat16, T.float32, T.float64):
        if out_dtype == T.float16 and element != T.float16:
            raise TypeError(f"out_dtype=float16 needs float16 operands, got {element}")
        if out_dtype not in (T.float32, T.float16):
            raise TypeError(f"tl.dot out_dtype must be float32 or float16, got {out_dtype}")
        result_element = T.float64 if element == T.float64 else out_dtype
    else:
        raise TypeError(f"tl.dot does not take {element} operands")
    if element == T.float32:
        precision = precision or _default_precision()
        precision = "ieee" if str(precision).lower() in AS_IEEE else precision
        if precision not in INPUT_PRECISIONS:
            raise ValueError(f"input_precision must be one of {', '.join(INPUT_PRECISIONS)}, "
                             f"got {precision!r}")
    else:
        precision = None   # only fp32 inputs have a choice
    result_type = BlockType(result_element, tuple(batch_a) + (m, n))
    if acc is None:
        acc = constant(0, result_element, result_type.shape)
    else:
        acc = to_tensor(acc)
        if acc.type.shape != result_type.shape:
            raise ValueError(f"the accumulator has shape {list(acc.type.shape)}, the product "
                             f"{list(result_type.shape)}")
        if acc.dtype != result_element:
            raise TypeError(f"the accumulator is {acc.dtype} but the product is "
                            f"{result_element}; pass out_dtype={acc.dtype} or cast the "
                            "accumulator")
    return emit("dot", [a, b, acc], result_type, precision=precision)


# ---------------------------------------------------------------------------------------
# tl.dot_scaled: microscaling (MX) formats
# ---------------------------------------------------------------------------------------

# The element formats of tl.dot_scaled and the tl type each one's bits are; e2m1 (fp4) comes
# as two values per uint8, the low nibble first.
SCALED_FORMATS = {"e2m1": None, "e4m3": T.float8e4nv, "e5m2": T.float8e5,
                  "bf16": T.bfloat16, "fp16": T.float16}
_BITS_TYPE = {8: T.uint8, 16: T.uint16}
E8M0_NAN = 0xFF


def dot_scaled(lhs, lhs_scale, lhs_format, rhs, rhs_scale, rhs_format, acc=None,
               fast_math=False, lhs_k_pack=True, rhs_k_pack=True, out_dtype=T.float32) -> tensor:
    """``tl.dot_scaled``: each operand is upcast to bf16 (fp16 when either format is fp16),
    multiplied by its scale where it has one, and the two multiplied with ``tl.dot`` (fp32
    accumulation) -- what Triton does on GPUs without native scaled MMA (sm_80, sm_90).

    A scale is one e8m0 power of two (uint8, 2^(s-127); 0xFF is NaN unless ``fast_math``)
    or one float8e4nv value per 32 (16 for float8e4nv) consecutive values along K: the
    lhs scale is [M, K // 32], the rhs scale [N, K // 32].
    """
    lhs_format, rhs_format = unwrap(lhs_format), unwrap(rhs_format)
    for side, fmt in (("lhs", lhs_format), ("rhs", rhs_format)):
        if fmt not in SCALED_FORMATS:
            raise ValueError(f"tl.dot_scaled: {side}_format must be one of "
                             f"{', '.join(SCALED_FORMATS)}, got {fmt!r}")
    lhs, rhs = to_tensor(lhs), to_tensor(rhs)
    rank = len(lhs.type.shape)
    if rank not in (2, 3) or len(rhs.type.shape) != rank:
        raise ValueError(f"tl.dot_scaled takes two 2-d or two 3-d blocks, got shapes "
                         f"{list(lhs.type.shape)} and {list(rhs.type.shape)}")
    compute = T.float16 if "fp16" in (lhs_format, rhs_format) else T.bfloat16
    fast_math = bool(unwrap(fast_math))
    a = _upcast_scaled(lhs, unwrap(lhs_scale), lhs_format, compute, k_axis=rank - 1,
                       k_pack=bool(unwrap(lhs_k_pack)), fast_math=fast_math, side="lhs")
    b = _upcast_scaled(rhs, unwrap(rhs_scale), rhs_format, compute, k_axis=rank - 2,
                       k_pack=bool(unwrap(rhs_k_pack)), fast_math=fast_math, side="rhs")
    return dot(a, b, acc, out_dtype=unwrap(out_dtype))


def _upcast_scaled(x: tensor, scale, fmt: str, compute, k_axis: int, k_pack: bool,
                   fast_math: bool, side: str) -> tensor:
    rank = len(x.type.shape)
    other_axis = 2 * rank - 3 - k_axis   # the M (lhs) or N (rhs) axis
    if not k_pack and fmt != "e2m1":
        raise ValueError(f"tl.dot_scaled: only e2m1 operands can be packed along a dimension "
                         f"other than K ({side}_k_pack=False with {fmt})")
    if fmt == "e2m1":
        if x.dtype != T.uint8:
            raise TypeError(f"tl.dot_scaled: e2m1 {side} must be packed as uint8, got {x.dtype}")
        value = _unpack_e2m1(x, k_axis if k_pack else other_axis, compute)
    else:
        bits_type = SCALED_FORMATS[fmt]
        if x.dtype != bits_type:
            if x.dtype != _BITS_TYPE[bits_type.bits]:
                raise TypeError(f"tl.dot_scaled: {side} in format {fmt} must be {bits_type} "
                                f"or {_BITS_TYPE[bits_type.bits]}, got {x.dtype}")
            x = cast(x, bits_type, bitcast=True)
        value = cast(x, compute)
    if scale is None:
        return value
    scale = to_tensor(scale)
    group = 16 if scale.dtype == T.float8e4nv else 32
    k, rows = value.type.shape[k_axis], value.type.shape[other_axis]
    expected = tuple(value.type.shape[:-2]) + (rows, k // group)
    if scale.type.shape != expected:
        raise ValueError(f"tl.dot_scaled: {side}_scale must be a tensor of shape "
                         f"{list(expected)}, got {list(scale.type.shape)}")
    if scale.dtype == T.uint8:
        factor = _e8m0_value(scale, compute)
        if not fast_math:   # a NaN factor makes its whole group NaN
            factor = where(compare("eq", scale, E8M0_NAN), constant(float("nan"), compute),
                           factor)
    elif scale.dtype == T.float8e4nv:
        factor = cast(scale, compute)
    else:
        raise TypeError(f"tl.dot_scaled: {side}_scale must be uint8 (e8m0) or float8e4nv, got "
                        f"{scale.dtype}")
    # [.., rows, K / group] -> [.., rows, K], then in the operand's axis order.
    factor = _repeat_last(factor, group)
    if k_axis == rank - 2:
        factor = trans(factor)
    return mul(value, factor)


def _e8m0_value(scale: tensor, compute) -> tensor:
    """2^(s - 127) of uint8 exponents, in ``compute``: the bits placed in a bf16 exponent
    (fp32's for fp16, then rounded), as Triton's emulation does (0 gives 0)."""
    if compute == T.bfloat16:
        return cast(bitwise("shl", cast(scale, T.uint16), 7), T.bfloat16, bitcast=True)
    as_fp32 = cast(bitwise("shl", cast(scale, T.uint32), 23), T.float32, bitcast=True)
    return cast(as_fp32, compute)


def _repeat_last(x: tensor, times: int) -> tensor:
    """[.., n] -> [.., n * times], each element repeated ``times`` times in a row."""
    shape = x.type.shape
    wide = broadcast_to(expand_dims(x, len(shape)), shape + (times,))
    return reshape(wide, shape[:-1] + (shape[-1] * times,))


def _unpack_e2m1(packed: tensor, axis: int, compute) -> tensor:
    """uint8 holding two e2m1 values (low nibble first along ``axis``) -> values in
    ``compute``, ``axis`` twice as long. An e2m1 nibble is s.ee.m: 0, 0.5, 1, 1.5, 2, 3, 4, 6."""
    rank = len(packed.type.shape)
    to_last = tuple(d for d in range(rank) if d != axis) + (axis,)
    if axis != rank - 1:
        packed = permute(packed, to_last)
    halves = [_e2m1_value(bitwise("and", packed, 0xF), compute),
              _e2m1_value(bitwise("shr", packed, 4), compute)]
    value = interleave(*halves)
    if axis != rank - 1:
        back = tuple(to_last.index(d) for d in range(rank))
        value = permute(value, back)
    return value


def _e2m1_value(nibble: tensor, compute) -> tensor:
    code = cast(nibble, T.int32)
    exponent, mantissa = bitwise("shr", bitwise("and", code, 7), 1), bitwise("and", code, 1)
    # Twice the magnitude, an integer: the mantissa bit alone (subnormal), or (2 + m) << (e - 1).
    shift = maximum(sub(exponent, 1), 0)
    twice = where(compare("eq", exponent, 0), mantissa, bitwise("shl", add(mantissa, 2), shift))
    magnitude = mul(cast(twice, T.float32), 0.5)
    value = where(compare("ne", bitwise("and", code, 8), 0), neg(magnitude), magnitude)
    return cast(value, compute)
