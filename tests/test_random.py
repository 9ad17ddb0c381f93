"""Random numbers: ``tl.philox`` against Random123's known-answer vectors, ``randint`` /
``rand`` / ``randn`` against numpy written from Triton's definitions, the compile for sm_80 /
sm_90, and the GPU against Triton's own ``tl.rand`` (bit for bit) where triton is installed."""
import numpy as np
import pytest

import aotk
import aotk.language as tl

MASK32 = np.uint64(0xFFFFFFFF)


@aotk.jit
def _philox_one(out_ptr, seed, C0: tl.constexpr, C1: tl.constexpr, C2: tl.constexpr,
                C3: tl.constexpr, WIDE: tl.constexpr):
    zero = tl.zeros((1,), tl.uint64 if WIDE else tl.uint32)
    counters = tl.philox(seed, zero + C0, zero + C1, zero + C2, zero + C3)
    for i in tl.static_range(4):
        tl.store(out_ptr + i + tl.arange(0, 1), counters[i])


# Random123's kat_vectors: (key as the seed, counters, Philox-10 output).
KNOWN_ANSWERS_4X32 = [
    (0, (0, 0, 0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    (0xFFFFFFFFFFFFFFFF, (0xFFFFFFFF,) * 4, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    (0x299F31D0A4093822, (0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]


@pytest.mark.parametrize("seed, counters, expected", KNOWN_ANSWERS_4X32)
def test_philox4x32_10_gives_random123s_known_answers(seed, counters, expected):
    out = np.zeros(4, np.uint32)
    _philox_one[(1,)](out, seed, *counters, WIDE=False)
    assert [int(v) for v in out] == list(expected)


def test_philox4x64_10_gives_random123s_known_answer():
    out = np.zeros(4, np.uint64)
    _philox_one[(1,)](out, 0, 0, 0, 0, 0, WIDE=True)
    assert [int(v) for v in out] == [0x16554D9ECA36314C, 0xDB20FE9D672D0FDC,
                                     0xD7E772CEE186176B, 0x7E68B68AEC7BA23B]


def _philox_reference(seed: int, c0, c1, rounds=10):
    """Philox4x32 in numpy: counters (c0, c1, 0, 0), key (seed low word, seed high word)."""
    c0, c1 = c0.astype(np.uint64), c1.astype(np.uint64)
    c2 = c3 = np.zeros_like(c0)
    k0, k1 = np.uint64(seed) & MASK32, (np.uint64(seed) >> np.uint64(32)) & MASK32
    for _ in range(rounds):
        product_b, product_a = np.uint64(0xCD9E8D57) * c2, np.uint64(0xD2511F53) * c0
        c0, c1, c2, c3 = ((product_b >> np.uint64(32)) ^ c1 ^ k0, product_b & MASK32,
                          (product_a >> np.uint64(32)) ^ c3 ^ k1, product_a & MASK32)
        k0, k1 = (k0 + np.uint64(0x9E3779B9)) & MASK32, (k1 + np.uint64(0xBB67AE85)) & MASK32
    return [c.astype(np.uint32) for c in (c0, c1, c2, c3)]


def _uniform_reference(bits):
    signed = bits.view(np.int32)
    folded = np.where(signed < 0, -signed - 1, signed)
    return folded.astype(np.float32) * np.float32(4.6566127342e-10)


@aotk.jit
def _streams(ints_ptr, uniforms_ptr, normals_ptr, four_ptr, seed, start, N: tl.constexpr):
    offsets = start + tl.arange(0, N)
    tl.store(ints_ptr + tl.arange(0, N), tl.randint(seed, offsets))
    tl.store(uniforms_ptr + tl.arange(0, N), tl.rand(seed, offsets))
    tl.store(normals_ptr + tl.arange(0, N), tl.randn(seed, offsets))
    a, b, c, d = tl.randint4x(seed, offsets)
    tl.store(four_ptr + tl.arange(0, N), b)
    tl.store(four_ptr + N + tl.arange(0, N), d)


@pytest.mark.parametrize("seed, start", [(0, 0), (1234, 17), (2**40 + 5, 2**33 - 64)])
def test_randint_rand_randn_follow_tritons_definitions(seed, start):
    n = 128
    ints, uniforms = np.zeros(n, np.uint32), np.zeros(n, np.float32)
    normals, four = np.zeros(n, np.float32), np.zeros(2 * n, np.uint32)
    _streams[(1,)](ints, uniforms, normals, four, seed, start, N=128)
    offsets = np.arange(start, start + n, dtype=np.int64)
    expected = _philox_reference(seed, offsets & 0xFFFFFFFF, offsets >> 32)
    np.testing.assert_array_equal(ints, expected[0])
    np.testing.assert_array_equal(four, np.concatenate([expected[1], expected[3]]))
    np.testing.assert_array_equal(uniforms.view(np.uint32),
                                  _uniform_reference(expected[0]).view(np.uint32))
    assert uniforms.min() >= 0 and uniforms.max() < 1
    u1 = np.maximum(np.float32(1e-7), _uniform_reference(expected[0]))
    u2 = _uniform_reference(expected[1])
    box_muller = np.sqrt(-2 * np.log(u1)) * np.cos(np.float32(6.283185307179586) * u2)
    np.testing.assert_allclose(normals, box_muller, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
def test_random_streams_compile_for_each_target(target):
    compiled = aotk.compile(_streams, "*u32, *fp32, *fp32, *u32, i64, i64", {"N": 128},
                            target=target)
    assert "mul.hi.u32" in compiled.ptx


@aotk.jit
def _dropout(x_ptr, out_ptr, n, p, seed, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    keep = tl.rand(seed, offsets) > p
    tl.store(out_ptr + offsets, tl.where(keep, x / (1 - p), 0.0), mask=mask)


@pytest.mark.gpu
def test_the_gpu_streams_are_tritons_bit_for_bit():
    torch = pytest.importorskip("torch")
    triton = pytest.importorskip("triton")
    import triton.language as ttl

    @triton.jit
    def triton_streams(ints_ptr, uniforms_ptr, normals_ptr, seed, start, N: ttl.constexpr):
        offsets = start + ttl.arange(0, N)
        ttl.store(ints_ptr + ttl.arange(0, N), ttl.randint(seed, offsets))
        ttl.store(uniforms_ptr + ttl.arange(0, N), ttl.rand(seed, offsets))
        ttl.store(normals_ptr + ttl.arange(0, N), ttl.randn(seed, offsets))

    for seed, start in [(0, 0), (1234, 17), (2**40 + 5, 2**33 - 64)]:
        ours = [torch.zeros(1024, dtype=d, device="cuda") for d in
                (torch.uint32, torch.float32, torch.float32)]
        theirs = [torch.zeros_like(t) for t in ours]
        four = torch.zeros(2048, dtype=torch.uint32, device="cuda")
        _streams[(1,)](*ours, four, seed, start, N=1024)
        triton_streams[(1,)](*theirs, seed, start, N=1024)
        assert torch.equal(ours[0], theirs[0]) and torch.equal(ours[1], theirs[1])
        torch.testing.assert_close(ours[2], theirs[2], rtol=1e-5, atol=1e-5)
    x = torch.randn(5000, device="cuda")
    dropped = torch.empty_like(x)
    _dropout[(5,)](x, dropped, 5000, 0.25, 42, BLOCK=1024)
    kept = dropped != 0
    assert 0.70 < kept.float().mean().item() < 0.80
    torch.testing.assert_close(dropped[kept], x[kept] / 0.75)
