"""Reshapes that add or drop size-1 dimensions keep their elements in registers, and the
layout conversions through shared memory that remain move vectors where both sides hold
whole vectors of a row.

liger's fused SwiGLU MLP forward (``mlp._swiglu_kernel_forward``) stores three fp32
accumulators through rank-3 descriptors (``tl.reshape(acc, [1, BM, BN])``): each crossed
shared memory twice (mma fragments -> the rank-2 layout, then the reshape's own shuffle
into the rank-3 layout), one word at a time with bank conflicts.
"""
from __future__ import annotations

import re

import numpy as np
import pytest

import aotk
import aotk.language as tl
from aotk.passes.layouts import Blocked, Layout, SCALAR, unit_reshape_layout
from aotk.passes.mma_layout import Mma


RANK3 = Blocked((1, 1, 4), (1, 1, 32), (1, 8, 1), (2, 1, 0))
RANK2 = Blocked((1, 4), (1, 32), (8, 1), (1, 0))


def test_size1_dimensions_come_and_go_with_the_same_threads_and_registers():
    assert unit_reshape_layout(Layout(RANK3), (1, 128, 128), (128, 128)) == Layout(RANK2)
    assert unit_reshape_layout(Layout(RANK2), (128, 128), (1, 128, 128)) == Layout(RANK3)
    # A size-1 dimension inserted in the middle or at the end is slowest in the order.
    assert unit_reshape_layout(Layout(RANK2), (128, 128), (128, 1, 128)) == \
        Layout(Blocked((1, 1, 4), (1, 1, 32), (8, 1, 1), (2, 0, 1)))
    assert unit_reshape_layout(Layout(RANK2), (128, 128), (128, 128, 1)) == \
        Layout(Blocked((1, 4, 1), (1, 32, 1), (8, 1, 1), (1, 0, 2)))


def test_other_reshapes_stay_shuffles():
    assert unit_reshape_layout(Layout(RANK2), (128, 128), (16384,)) is None
    assert unit_reshape_layout(Layout(RANK2), (128, 128), (1, 64, 256)) is None
    # Lanes spread along a size-1 dimension hold replicas the other shape has no room for.
    replicated = Blocked((1, 1, 4), (2, 1, 16), (1, 8, 1), (2, 1, 0))
    assert unit_reshape_layout(Layout(replicated), (1, 128, 128), (128, 128)) is None
    assert unit_reshape_layout(Layout(RANK3, (0,)), (128, 128), (1, 128, 128)) is None
    assert unit_reshape_layout(Layout(Mma((4, 1))), (128, 128),
                               (1, 128, 128)) is None
    assert unit_reshape_layout(SCALAR, (1,), ()) is None


@aotk.jit
def dot_rank3_store_kernel(a_ptr, b_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr,
                           K: tl.constexpr):
    """A dot's result stored as [1, M, N], as a rank-3 descriptor store would."""
    rm = tl.arange(0, M)
    rn = tl.arange(0, N)
    rk = tl.arange(0, K)
    a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * N + rn[None, :])
    c = tl.reshape(tl.dot(a, b), [1, M, N])
    offsets = (tl.arange(0, 1)[:, None, None] * M * N + rm[None, :, None] * N
               + rn[None, None, :])
    tl.store(c_ptr + offsets, c)


@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
def test_an_accumulator_reshaped_for_a_rank3_store_crosses_shared_memory_once(target):
    """The fragments go straight to the store's layout; the reshape moves nothing. Before:
    a second round trip for the reshape (8 more st.shared.v4 and 8 ld.shared.v4 per
    thread) and two more barriers."""
    compiled = aotk.compile(dot_rank3_store_kernel, "*fp16:16, *fp16:16, *fp32:16",
                            {"M": 64, "N": 64, "K": 32}, num_warps=4, target=target)
    ptx = compiled.ptx
    assert ptx.count("st.shared.v4.b32") == 4      # the dot's operands only
    assert ptx.count("bar.sync") == 3
    # The one conversion: fragment pairs written 8 bytes, rows read 16 bytes at a time
    # (it was one word at a time: 32 st.shared.b32 and 32 ld.shared.b32 per thread),
    # through rows padded by 8 words, not 1: a half-warp's pair stores cover 4 rows of
    # 32 bytes, which then fall in distinct banks.
    per_thread = 64 * 64 // 128
    assert ptx.count("st.shared.v2.b32") == per_thread // 2
    assert ptx.count("ld.shared.v4.b32") == per_thread // 4
    assert not re.search(r"(st|ld)\.shared\.b32", ptx)
    assert compiled.metadata["shared"] == 64 * (64 + 8) * 4


def test_conversion_vectors_are_whole_aligned_runs_of_a_row():
    from aotk.backend.shared_conversions import conversion_vector
    from aotk.ir.types import float16 as fp16, float32 as fp32, int1 as i1
    mma = Layout(Mma((4, 1)))
    assert conversion_vector(mma, (64, 64), fp32) == 2          # column pairs
    assert conversion_vector(Layout(RANK2), (128, 128), fp32) == 4
    assert conversion_vector(Layout(Blocked((1, 8), (4, 8), (4, 1), (1, 0))), (64, 64),
                             fp16) == 8
    assert conversion_vector(Layout(Blocked((1, 8), (4, 8), (4, 1), (1, 0))), (64, 64),
                             fp32) == 4                         # at most 16 bytes
    assert conversion_vector(Layout(RANK2), (128, 128), i1) == 1
    assert conversion_vector(Layout(RANK2), (128,), fp32) == 1
    # Column-major registers (order [0, 1]): a thread's row elements are not neighbours.
    assert conversion_vector(Layout(Blocked((4, 1), (32, 1), (1, 8), (0, 1))), (128, 128),
                             fp32) == 1
    # The last dimension sliced away: rows are the parent's axis 0.
    assert conversion_vector(Layout(RANK2, (1,)), (128,), fp32) == 1


def test_the_interpreter_matches_numpy(monkeypatch):
    monkeypatch.setenv("AOTK_INTERPRET", "1")
    rng = np.random.default_rng(0)
    a = rng.standard_normal((64, 32)).astype(np.float16)
    b = rng.standard_normal((32, 64)).astype(np.float16)
    c = np.zeros((1, 64, 64), np.float32)
    dot_rank3_store_kernel[(1,)](a, b, c, M=64, N=64, K=32)
    want = a.astype(np.float32) @ b.astype(np.float32)
    np.testing.assert_allclose(c[0], want, rtol=1e-3, atol=1e-3)
