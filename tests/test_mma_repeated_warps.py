"""Dots with more warps than tensor-core tiles (16 x 16 on 4 warps): ``choose_mma`` places
the warps as Triton's warpsPerTileV2 does, the extra ones repeating the first ones' tiles,
and the dot runs on mma.sync instead of CUDA cores (fla's kkt solve at 4 warps: 1,160 FFMA
and no HMMA before). Where the block has tiles enough for its warps, the arrangement is the
one it always had. Checked: the layouts and the PTX for every shape and type (CPU), and
(marked gpu) the results against torch, consumed in each way the accumulator can be:
stored, reduced along either axis, added atomically, fed to a second dot."""
import numpy as np
import pytest

import aotk
import aotk.language as tl
from aotk.passes.mma_layout import choose_mma


@aotk.jit
def dot_consumers(a_ptr, b_ptr, c_ptr, rows_ptr, columns_ptr, total_ptr, chained_ptr,
                  M: tl.constexpr, N: tl.constexpr, K: tl.constexpr, F32: tl.constexpr):
    m, n, k = tl.arange(0, M), tl.arange(0, N), tl.arange(0, K)
    a = tl.load(a_ptr + m[:, None] * K + k[None, :])
    b = tl.load(b_ptr + k[:, None] * N + n[None, :])
    if F32:
        c = tl.dot(a, b, input_precision="tf32")
    else:
        c = tl.dot(a, b)
    tl.store(c_ptr + m[:, None] * N + n[None, :], c)
    tl.store(rows_ptr + m, tl.sum(c, 1))
    tl.store(columns_ptr + n, tl.max(c, 0))
    tl.atomic_add(total_ptr + n, tl.sum(c, 0))
    # c @ c.T's first N columns need N == M; the chained dot reads c as its A operand.
    if M == N:
        tl.store(chained_ptr + m[:, None] * N + n[None, :],
                 tl.dot(c.to(a.dtype), tl.trans(c.to(a.dtype))))


SHAPES = [  # (M, N, K, warps): more warps than 16 x 8 tiles
    (16, 16, 16, 4), (16, 16, 32, 8), (16, 32, 16, 8), (32, 16, 16, 8), (16, 8, 16, 2),
    (16, 16, 64, 4),
]
TYPES = {"fp16": ("*fp16:16", False), "bf16": ("*bf16:16", False),
         "fp32": ("*fp32:16", True)}


def _signature(dtype):
    pointer, _ = TYPES[dtype]
    return ", ".join([pointer, pointer] + ["*fp32:16"] * 5)


class _Dot:
    """What choose_mma reads: an op with operands and a result of these shapes."""

    def __init__(self, m, n, k, element):
        from aotk.ir import types as T
        from aotk.ir.kir import Op, Value
        a, b = Value(T.BlockType(element, (m, k))), Value(T.BlockType(element, (k, n)))
        self.op = Op("dot", [a, b, None], Value(T.BlockType(T.float32, (m, n))),
                     {"precision": "tf32"})


@pytest.mark.parametrize("m, n, warps, expected", [
    ((16, 16, 4, (1, 4))), ((16, 16, 8, (1, 8))), ((32, 16, 8, (2, 4))), ((64, 8, 8, (4, 2))),
])
def test_extra_warps_repeat_tiles_as_triton_places_them(m, n, warps, expected):
    from aotk.ir import types as T
    assert choose_mma(_Dot(m, n, 16, T.float16).op, warps).warps_per_cta == expected


@pytest.mark.parametrize("m, n, warps", [(64, 64, 8), (128, 64, 8), (32, 32, 4), (16, 64, 4),
                                         (64, 16, 4)])
def test_blocks_with_tiles_enough_keep_their_arrangement(m, n, warps):
    """The arrangement of every dot that fitted before: Triton's rule, which only ever
    differs from the old one where the old one gave more warps than tiles."""
    from aotk.ir import types as T
    layout = choose_mma(_Dot(m, n, 16, T.float16).op, warps)
    wm, wn = layout.warps_per_cta
    assert wm * wn == warps and 16 * wm <= m and 8 * wn <= n


@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
@pytest.mark.parametrize("dtype", list(TYPES))
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_small_dots_on_many_warps_run_on_tensor_cores(shape, dtype, target):
    m, n, k, warps = shape
    compiled = aotk.compile(dot_consumers, _signature(dtype),
                            dict(M=m, N=n, K=k, F32=TYPES[dtype][1]), num_warps=warps,
                            target=target)
    assert "mma.sync" in compiled.ptx and "fma.rn.f32" not in compiled.ptx.split("mma.sync")[0]
    dots = [line for line in compiled.gir.splitlines() if " = dot " in line]
    assert dots and all("#mma" in line for line in dots), dots
    assert compiled.metadata["spills"] == 0


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", list(TYPES))
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_small_dots_on_many_warps_match_torch(shape, dtype):
    torch = pytest.importorskip("torch")
    m, n, k, warps = shape
    torch_type = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}[dtype]
    generator = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn((m, k), generator=generator, device="cuda").to(torch_type)
    b = torch.randn((k, n), generator=generator, device="cuda").to(torch_type)
    c, chained = (torch.full((m, n), float("nan"), device="cuda") for _ in range(2))
    rows, columns = torch.full((m,), float("nan"), device="cuda"), torch.zeros(n, device="cuda")
    total = torch.zeros(n, device="cuda")
    dot_consumers[(1,)](a, b, c, rows, columns, total, chained, M=m, N=n, K=k,
                        F32=TYPES[dtype][1], num_warps=warps)
    expected = a.double() @ b.double()
    tolerance = dict(rtol=2e-2, atol=2e-2 * k ** 0.5)
    torch.testing.assert_close(c.double(), expected, **tolerance)
    torch.testing.assert_close(rows.double(), expected.sum(1), **tolerance)
    torch.testing.assert_close(columns.double(), expected.max(0).values, **tolerance)
    torch.testing.assert_close(total.double(), expected.sum(0), **tolerance)  # added once
    if m == n:
        rounded = c.to(torch_type).double()
        torch.testing.assert_close(chained.double(), rounded @ rounded.T,
                                   rtol=2e-2, atol=2e-2 * n)


def test_the_interpreter_agrees_with_numpy(monkeypatch):
    """The kernel itself, on the interpreter (what the GPU test compares against)."""
    monkeypatch.setenv("AOTK_INTERPRET", "1")
    rng = np.random.default_rng(0)
    a = rng.standard_normal((16, 16)).astype(np.float16)
    b = rng.standard_normal((16, 16)).astype(np.float16)
    c, chained = np.zeros((16, 16), np.float32), np.zeros((16, 16), np.float32)
    rows, columns, total = (np.zeros(16, np.float32) for _ in range(3))
    dot_consumers[(1,)](a, b, c, rows, columns, total, chained, M=16, N=16, K=16, F32=False,
                        num_warps=4)
    expected = a.astype(np.float32) @ b.astype(np.float32)
    np.testing.assert_allclose(c, expected, rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(total, expected.sum(0), rtol=1e-3, atol=1e-3)


@aotk.jit
def dot_added_twice(a_ptr, b_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    """c += a @ b twice, atomically, element by element: a warp that repeats another's
    tiles must not add its copy."""
    m, n, k = tl.arange(0, M), tl.arange(0, N), tl.arange(0, K)
    c = tl.dot(tl.load(a_ptr + m[:, None] * K + k[None, :]),
               tl.load(b_ptr + k[:, None] * N + n[None, :]))
    tile = c_ptr + m[:, None] * N + n[None, :]
    tl.atomic_add(tile, c)
    tl.atomic_add(tile, c)


@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
def test_atomics_of_repeated_tiles_compile_on_tensor_cores(target):
    compiled = aotk.compile(dot_added_twice, "*fp16:16, *fp16:16, *fp32:16",
                            dict(M=16, N=16, K=16), num_warps=4, target=target)
    assert "mma.sync" in compiled.ptx and compiled.metadata["spills"] == 0


@pytest.mark.gpu
@pytest.mark.parametrize("warps", [4, 8])
def test_atomics_of_repeated_tiles_add_once_per_element(warps):
    torch = pytest.importorskip("torch")
    a = torch.randn((16, 16), device="cuda", dtype=torch.float16)
    b = torch.randn((16, 16), device="cuda", dtype=torch.float16)
    c = torch.zeros((16, 16), device="cuda")
    dot_added_twice[(1,)](a, b, c, M=16, N=16, K=16, num_warps=warps)
    torch.testing.assert_close(c, 2 * (a.float() @ b.float()), rtol=1e-2, atol=1e-2)
