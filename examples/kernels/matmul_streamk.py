"""FP16 matmul with fp32 accumulation on a persistent grid: whole tiles in full waves, then
the last partial wave's K-iterations split evenly over every program (stream-K).

With T output tiles on P programs (P = the number of SMs, the grid's size), the first
(T // P) * P tiles run data-parallel: program p computes tiles p, p + P, ... whole, with the
tutorial's K loop. The R = T % P tiles left would make a wave R/P full; instead their
R * ipt K-iterations (ipt = cdiv(K, BLOCK_SIZE_K) per tile) are cut into P ranges of equal
length (+-1), one per program. As R < P, a range is shorter than a tile, so it touches at
most two tiles: the end of one and the start of the next, each a *segment* of K-iterations.

Fixup of a tile split over several programs (its *contributors*), with no program waiting
for another (so the grid need not be co-resident, and the CPU interpreter, which runs the
programs one after another, gets the same result):
1. every contributor stores its fp32 partial tile into its own workspace slot (program p's
   first segment in slot 2p, its second in slot 2p + 1);
2. a barrier (every thread's stores come before it), then one thread adds the segment's
   length to the tile's counter with an acq_rel atomic: the release publishes the stores of
   the whole program (the barrier makes them the releasing thread's), the acquire makes
   the other contributors' published partials visible to this one;
3. the contributor that brings the counter to ipt holds the tile's last contribution: it
   resets the counter to 0 and sums the contributors' slots in program order (always the
   same order, so the result does not depend on which program arrived last), in slices of
   FIXUP_ROWS rows loaded with .cg (from L2, never a stale L1 line), and writes C.

Arguments the caller allocates: ``workspace``, fp32, 2 * P * BLOCK_SIZE_M * BLOCK_SIZE_N
elements (any contents); ``counters``, int32, T % P elements (at least 1), all zero before
the first launch. The kernel leaves the counters zero again, so both buffers can be reused
by the next launch on the same stream (not by two launches running at once). K >= 1.

In a manifest, ``grid = ["min(num_sms, cdiv(M, BLOCK_SIZE_M) * cdiv(N, BLOCK_SIZE_N))"]``
makes P the GPU's SM count at each call (tests/test_matmul_streamk.py builds it so). Speed:
on an H200 it is not yet faster than one program per tile (3000^3: 0.53x cuBLAS either
way); bench/results/2026-11-26_nvidia-h200_streamk.md says where the time goes.
"""
import aotk
import aotk.language as tl


@aotk.jit
def tile_coordinates(tile, M, N, BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr,
                     GROUP_SIZE_M: tl.constexpr):
    """(pid_m, pid_n) of a tile in the tutorial's grouped order (for L2 reuse)."""
    num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    group_id = tile // num_pid_in_group
    first_pid_m = group_id * GROUP_SIZE_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
    pid_m = first_pid_m + ((tile % num_pid_in_group) % group_size_m)
    pid_n = (tile % num_pid_in_group) // group_size_m
    return pid_m, pid_n


@aotk.jit
def range_start(program, base, extra):
    """The first stream-K iteration of ``program``: the first ``extra`` programs take
    ``base + 1`` iterations, the others ``base``."""
    return program * base + min(program, extra)


@aotk.jit
def range_owner(iteration, base, extra):
    """The program whose stream-K range holds ``iteration``."""
    long_part = extra * (base + 1)
    if iteration < long_part:
        owner = iteration // (base + 1)
    else:
        owner = extra + (iteration - long_part) // max(base, 1)
    return owner


@aotk.jit
def matmul_streamk_kernel(a_ptr, b_ptr, c_ptr, workspace, counters, M, N, K,
                          stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                          BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr,
                          BLOCK_SIZE_K: tl.constexpr, GROUP_SIZE_M: tl.constexpr,
                          FIXUP_ROWS: tl.constexpr):
    pid = tl.program_id(axis=0)
    programs = tl.num_programs(axis=0)
    num_tiles = tl.cdiv(M, BLOCK_SIZE_M) * tl.cdiv(N, BLOCK_SIZE_N)
    iters_per_tile = tl.cdiv(K, BLOCK_SIZE_K)
    waves = num_tiles // programs
    dp_tiles = waves * programs
    # The stream-K iterations: tile dp_tiles + i // iters_per_tile, K-step i % iters_per_tile.
    sk_iters = (num_tiles - dp_tiles) * iters_per_tile
    base = sk_iters // programs
    extra = sk_iters % programs
    sk_start = range_start(pid, base, extra)
    sk_end = sk_start + base + (pid < extra)
    first_end = min(sk_end, (sk_start // iters_per_tile + 1) * iters_per_tile)
    slot_elements = BLOCK_SIZE_M * BLOCK_SIZE_N

    # Units 0 .. waves-1: whole tiles; units waves and waves+1: the stream-K range's one or
    # two segments (empty ones skipped).
    for unit in range(0, waves + 2):
        if unit < waves:
            tile = pid + unit * programs
            k_lo = 0
            k_hi = iters_per_tile
            slot = 0
            sk_tile = 0
        else:
            seg_start = sk_start if unit == waves else first_end
            seg_end = first_end if unit == waves else sk_end
            sk_tile = seg_start // max(iters_per_tile, 1)
            tile = dp_tiles + sk_tile
            k_lo = seg_start - sk_tile * iters_per_tile
            k_hi = min(seg_end - sk_tile * iters_per_tile, iters_per_tile)
            slot = 2 * pid + (unit - waves)
        if k_lo < k_hi:
            pid_m, pid_n = tile_coordinates(tile, M, N, BLOCK_SIZE_M, BLOCK_SIZE_N,
                                            GROUP_SIZE_M)
            offs_am = (pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)) % M
            offs_bn = (pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)) % N
            offs_k = tl.arange(0, BLOCK_SIZE_K)
            a_ptrs = a_ptr + k_lo * BLOCK_SIZE_K * stride_ak + \
                (offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)
            b_ptrs = b_ptr + k_lo * BLOCK_SIZE_K * stride_bk + \
                (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn)
            accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
            for k in range(k_lo, k_hi):
                a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_SIZE_K, other=0.0)
                b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_SIZE_K, other=0.0)
                accumulator = tl.dot(a, b, accumulator)
                a_ptrs += BLOCK_SIZE_K * stride_ak
                b_ptrs += BLOCK_SIZE_K * stride_bk

            if (k_lo == 0) & (k_hi == iters_per_tile):
                offs_cm = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
                offs_cn = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
                c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
                c_mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
                tl.store(c_ptrs, accumulator.to(tl.float16), mask=c_mask)
            else:
                rows = tl.arange(0, BLOCK_SIZE_M)
                columns = tl.arange(0, BLOCK_SIZE_N)
                # Stored from the accumulator's fragments, 8 bytes a thread (no change of
                # layout, so nothing of it runs on the whole tiles' path).
                tl.store(workspace + slot * slot_elements + rows[:, None] * BLOCK_SIZE_N
                         + columns[None, :], accumulator)
                # Every thread's partial is stored before the one thread's release.
                tl.debug_barrier()
                done = tl.atomic_add(counters + sk_tile, k_hi - k_lo, sem="acq_rel",
                                     scope="gpu")
                if done + (k_hi - k_lo) == iters_per_tile:
                    tl.atomic_xchg(counters + sk_tile, 0, sem="relaxed", scope="gpu")
                    tile_first = sk_tile * iters_per_tile
                    first = range_owner(tile_first, base, extra)
                    last = range_owner(tile_first + iters_per_tile - 1, base, extra)
                    offs_cn = pid_n * BLOCK_SIZE_N + columns
                    for row in range(0, BLOCK_SIZE_M, FIXUP_ROWS):
                        slice_rows = row + tl.arange(0, FIXUP_ROWS)
                        offsets = slice_rows[:, None] * BLOCK_SIZE_N + columns[None, :]
                        total = tl.zeros((FIXUP_ROWS, BLOCK_SIZE_N), dtype=tl.float32)
                        for program in range(first, last + 1):
                            # A contributor whose range began in an earlier tile holds this
                            # one in its second slot.
                            second = range_start(program, base, extra) < tile_first
                            source = (2 * program + second.to(tl.int32)) * slot_elements
                            total += tl.load(workspace + source + offsets, cache_modifier=".cg")
                        offs_cm = pid_m * BLOCK_SIZE_M + slice_rows
                        c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + \
                            stride_cn * offs_cn[None, :]
                        c_mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
                        tl.store(c_ptrs, total.to(tl.float16), mask=c_mask)


def workspace_elements(programs: int, block_m: int, block_n: int) -> int:
    """fp32 elements of the workspace for ``programs`` programs: two slots each."""
    return 2 * programs * block_m * block_n


def counter_count(m: int, n: int, programs: int, block_m: int, block_n: int) -> int:
    """int32 counters to allocate (zeroed once): one per stream-K tile, at least one."""
    tiles = -(-m // block_m) * -(-n // block_n)
    return max(tiles % programs, 1)
