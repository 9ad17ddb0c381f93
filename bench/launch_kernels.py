"""A kernel with as many parameters as liger's mHC Sinkhorn kernels (six tensors, three
more after two dozen sizes and strides, three floats, two constexprs): the JIT launch cost
of bench/launch.py grows with the parameter count, so this is its other end."""
import aotk
import aotk.language as tl


@aotk.jit
def many_arguments_kernel(a_ptr, b_ptr, c_ptr, d_ptr, e_ptr, f_ptr, N, HC: tl.constexpr, M,
                          s0, s1, s2, s3, s4, s5, s6, s7, s8, s9, s10, s11, s12, s13,
                          g_ptr, h_ptr, i_ptr, pre_eps, sinkhorn_eps, post_mult,
                          TMAX: tl.constexpr, STORE_HIST: tl.constexpr):
    pid = tl.program_id(0)
    x = tl.load(a_ptr + pid)
    tl.store(c_ptr + pid, x * pre_eps + s0 + s13 + N + M)
