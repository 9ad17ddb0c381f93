"""FP16 matmul through tensor descriptors with the output tile's columns in two accumulators,
BLOCK_N1 + BLOCK_N2 wide: a 128 x 192 tile (128 + 64 columns) although every block shape is a
power of two. At 3000^3 a 128 x 192 tile makes 384 tiles, 2.9 waves on an H200's 132 SMs,
where 128 x 256 makes 288 (2.2 waves: the last one a fifth full); cuBLAS runs 192-wide tiles
there. The grouped ordering of Triton's tutorial (tl.swizzle2d); a descriptor reads zeros
outside its shape, so no tile needs masks. WARP_SPECIALIZE gives the K loop a producer warp
(launched with num_ctas=2, neighbouring programs' producers then share B's tiles)."""
import aotk
import aotk.language as tl


@aotk.jit
def matmul_descriptor_split_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bk,
                                   stride_cm, BLOCK_SIZE_M: tl.constexpr,
                                   BLOCK_N1: tl.constexpr, BLOCK_N2: tl.constexpr,
                                   BLOCK_SIZE_K: tl.constexpr, GROUP_SIZE_M: tl.constexpr,
                                   WARP_SPECIALIZE: tl.constexpr = False):
    BLOCK_SIZE_N: tl.constexpr = BLOCK_N1 + BLOCK_N2
    pid = tl.program_id(axis=0)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    # The tutorial's grouped ordering: GROUP_SIZE_M row tiles down one column, then the next
    # column (consecutive programs share B's tiles, which pairs of programs exploit).
    pid_m, pid_n = tl.swizzle2d(pid // num_pid_n, pid % num_pid_n, tl.cdiv(M, BLOCK_SIZE_M),
                                num_pid_n, GROUP_SIZE_M)

    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[stride_am, 1],
                                       block_shape=[BLOCK_SIZE_M, BLOCK_SIZE_K])
    b1_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[stride_bk, 1],
                                        block_shape=[BLOCK_SIZE_K, BLOCK_N1])
    b2_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[stride_bk, 1],
                                        block_shape=[BLOCK_SIZE_K, BLOCK_N2])
    c1_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[stride_cm, 1],
                                        block_shape=[BLOCK_SIZE_M, BLOCK_N1])
    c2_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[stride_cm, 1],
                                        block_shape=[BLOCK_SIZE_M, BLOCK_N2])
    offs_am = pid_m * BLOCK_SIZE_M
    offs_bn = pid_n * BLOCK_SIZE_N
    left = tl.zeros((BLOCK_SIZE_M, BLOCK_N1), dtype=tl.float32)
    right = tl.zeros((BLOCK_SIZE_M, BLOCK_N2), dtype=tl.float32)
    for k in tl.range(0, tl.cdiv(K, BLOCK_SIZE_K), warp_specialize=WARP_SPECIALIZE):
        offs_k = k * BLOCK_SIZE_K
        a = a_desc.load([offs_am, offs_k])
        left = tl.dot(a, b1_desc.load([offs_k, offs_bn]), left)
        right = tl.dot(a, b2_desc.load([offs_k, offs_bn + BLOCK_N1]), right)
    c1_desc.store([offs_am, offs_bn], left.to(tl.float16))
    c2_desc.store([offs_am, offs_bn + BLOCK_N1], right.to(tl.float16))
