"""FP16 matmul through tensor descriptors whose last, partial wave is split along K.

With T output tiles and a wave of W programs (W = the GPU's SM count: one program per SM),
a grid of one program per tile runs ceil(T / W) waves, and the last one holds T % W tiles:
at 3000^3 with 128 x 256 tiles, 288 tiles on 132 SMs make two full waves and a third of
24 tiles that leaves 108 SMs idle for a whole tile's time. Here the first T - T % W tiles
run as in matmul_descriptor.py, one program each, and each of the T % W tail tiles is
computed by ``splits`` programs, each over an equal share of the K loop:

- a tail program stores its fp32 partial tile in its own workspace slot, then (after a
  barrier, so that every thread's stores come before it) one thread adds 1 to the tile's
  counter with an acq_rel atomic; the program that brings the counter to ``splits`` resets
  it to 0 and sums the tile's slots in slot order (so the result does not depend on which
  program arrived last), in slices of FIXUP_ROWS rows read with .cg (from L2), and writes C;
- the tail programs of two neighbouring tiles alternate (2i: tile t, 2i + 1: tile t + 1,
  the same K share): with num_ctas = 2 such a pair shares its B tiles as whole-tile pairs do.

No program waits for another, so the grid need not be co-resident and the CPU interpreter,
which runs programs one after another, gets the same result. The grid is
``tiles + (tiles % wave) * (splits - 1)`` programs; ``splits = 1`` is matmul_descriptor.py's
grid. The caller allocates ``workspace``, fp32, ``(tiles % wave) * splits * BLOCK_SIZE_M *
BLOCK_SIZE_N`` elements (any contents), and ``counters``, int32, ``tiles % wave`` elements (at
least one), zero before the first launch; the kernel leaves them zero, so both can be reused
by the next launch on the stream (not by two launches at once). ``tail_plan`` below gives
the splits, grid and sizes for a shape.
"""
import aotk
import aotk.language as tl


@aotk.jit
def matmul_descriptor_tail_kernel(a_ptr, b_ptr, c_ptr, workspace, counters, M, N, K,
                                  stride_am, stride_bk, stride_cm, wave, splits,
                                  BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr,
                                  BLOCK_SIZE_K: tl.constexpr, GROUP_SIZE_M: tl.constexpr,
                                  FIXUP_ROWS: tl.constexpr,
                                  WARP_SPECIALIZE: tl.constexpr = False):
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    tiles = num_pid_m * num_pid_n
    iterations = tl.cdiv(K, BLOCK_SIZE_K)
    tail = tiles % wave
    if splits == 1:
        tail = 0
    whole = tiles - tail
    # Whole tiles: tile pid, every K step. Tail programs: pairs of tiles, one K share each.
    tile = pid
    tail_tile = 0
    share = 0
    k_lo = 0
    k_hi = iterations
    if pid >= whole:
        q = pid - whole
        pair = q // (2 * splits)
        within = q % (2 * splits)
        tail_tile = 2 * pair + within % 2
        share = within // 2
        if (tail % 2 == 1) & (pair == tail // 2):   # the last tile of an odd tail: alone
            tail_tile = tail - 1
            share = within
        tile = whole + tail_tile
        k_lo = share * iterations // splits
        k_hi = (share + 1) * iterations // splits

    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    group_id = tile // num_pid_in_group
    first_pid_m = group_id * GROUP_SIZE_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
    pid_m = first_pid_m + ((tile % num_pid_in_group) % group_size_m)
    pid_n = (tile % num_pid_in_group) // group_size_m

    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[stride_am, 1],
                                       block_shape=[BLOCK_SIZE_M, BLOCK_SIZE_K])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[stride_bk, 1],
                                       block_shape=[BLOCK_SIZE_K, BLOCK_SIZE_N])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[stride_cm, 1],
                                       block_shape=[BLOCK_SIZE_M, BLOCK_SIZE_N])
    offs_am = pid_m * BLOCK_SIZE_M
    offs_bn = pid_n * BLOCK_SIZE_N
    accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k in tl.range(k_lo, k_hi, warp_specialize=WARP_SPECIALIZE):
        offs_k = k * BLOCK_SIZE_K
        a = a_desc.load([offs_am, offs_k])
        b = b_desc.load([offs_k, offs_bn])
        accumulator = tl.dot(a, b, accumulator)

    if pid < whole:
        c_desc.store([offs_am, offs_bn], accumulator.to(tl.float16))
    else:
        slot_elements = BLOCK_SIZE_M * BLOCK_SIZE_N
        rows = tl.arange(0, BLOCK_SIZE_M)
        columns = tl.arange(0, BLOCK_SIZE_N)
        # Stored from the accumulator's fragments, 8 bytes a thread (no change of layout).
        tl.store(workspace + (tail_tile * splits + share) * slot_elements
                 + rows[:, None] * BLOCK_SIZE_N + columns[None, :], accumulator)
        tl.debug_barrier()   # every thread's partial is stored before the one release
        arrived = tl.atomic_add(counters + tail_tile, 1, sem="acq_rel", scope="gpu")
        if arrived == splits - 1:
            tl.atomic_xchg(counters + tail_tile, 0, sem="relaxed", scope="gpu")
            offs_cn = offs_bn + columns
            for row in range(0, BLOCK_SIZE_M, FIXUP_ROWS):
                slice_rows = row + tl.arange(0, FIXUP_ROWS)
                offsets = slice_rows[:, None] * BLOCK_SIZE_N + columns[None, :]
                total = tl.zeros((FIXUP_ROWS, BLOCK_SIZE_N), dtype=tl.float32)
                for part in range(0, splits):
                    total += tl.load(workspace + (tail_tile * splits + part) * slot_elements
                                     + offsets, cache_modifier=".cg")
                offs_cm = offs_am + slice_rows
                c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + offs_cn[None, :]
                c_mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
                tl.store(c_ptrs, total.to(tl.float16), mask=c_mask)


def tail_plan(m: int, n: int, k: int, wave: int, block_m: int = 128, block_n: int = 256,
              block_k: int = 64, splits: int | None = None) -> dict:
    """splits, grid, workspace and counter sizes for a (m, n, k) on a wave of ``wave``
    programs: the tail tiles split into as many K shares as the wave has room for, an even
    number (so that tail programs pair), each of at least 4 K steps; 1 (no split) where
    that leaves fewer than 2. ``splits``, if given, is taken as it is (any number >= 1)."""
    tiles = -(-m // block_m) * -(-n // block_n)
    tail = tiles % wave
    if splits is None:
        splits = wave // tail if tail else 1
        splits = min(splits, -(-k // block_k) // 4)
        splits -= splits % 2
        if splits < 2:
            splits = 1
    tail_tiles = tail if splits > 1 else 0
    return {"splits": splits, "grid": tiles + tail_tiles * (splits - 1),
            "workspace": max(tail_tiles * splits * block_m * block_n, 1),
            "counters": max(tail_tiles, 1)}
