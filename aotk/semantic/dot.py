"""Typing rules of ``tl.dot``: block matrix products on tensor cores, Triton's dtype rules.

In: two blocks of rank 2 ([M, K] @ [K, N]) or 3 (batched [B, M, K] @ [B, K, N]), an optional
accumulator, the input precision and output dtype. Out: the ``dot`` result [.., M, N].

  fp16 x fp16 -> fp32 (or fp16 with out_dtype=tl.float16)
  bf16 x bf16 -> fp32
  fp32 x fp32 -> fp32, inputs rounded to tf32 unless input_precision="ieee" ("tf32x3" splits
                 each input in two tf32 parts for close to fp32 accuracy)
  fp64 x fp64 -> fp64
  int8 x int8 -> int32
Every non-batch dimension is at least 16 (the smallest tensor-core tile).
"""
from __future__ import annotations

import os

from ..ir import types as T
from ..ir.types import BlockType
from ..language.core import tensor, unwrap
from .building import emit
from .promotion import constant, to_tensor

INPUT_PRECISIONS = ("tf32", "tf32x3", "ieee")
MIN_DOT_SIZE = 16


def _default_precision() -> str:
    """Triton's TRITON_F32_DEFAULT, spelled for aotk."""
    return os.environ.get("AOTK_F32_DEFAULT", "tf32")


def dot(a, b, acc=None, input_precision=None, allow_tf32=None, out_dtype=T.float32) -> tensor:
    a, b = to_tensor(a), to_tensor(b)
    rank = len(a.type.shape)
    if rank not in (2, 3) or len(b.type.shape) != rank:
        raise ValueError(f"tl.dot takes two 2-d blocks or two 3-d (batched) blocks, got shapes "
                         f"{list(a.type.shape)} and {list(b.type.shape)}")
    *batch_a, m, k = a.type.shape
    *batch_b, k_b, n = b.type.shape
    if k != k_b or batch_a != batch_b:
        raise ValueError(f"tl.dot shapes do not match: {list(a.type.shape)} @ "
                         f"{list(b.type.shape)} (the inner dimensions and batch must agree)")
    if min(m, n, k) < MIN_DOT_SIZE:
        raise ValueError(f"tl.dot needs every non-batch dimension >= {MIN_DOT_SIZE}, got "
                         f"M={m}, N={n}, K={k}; use larger blocks or tl.sum(a[:, :, None] * "
                         "b[None, :, :], axis=1)")
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
