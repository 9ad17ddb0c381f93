"""Kernels whose kir (or whose compile error) the frontend tests check. Line numbers matter:
tests assert that errors point at the lines below."""
import aotk
import aotk.language as tl


@aotk.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask),
             mask=mask)


@aotk.jit
def other_without_mask(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.load(x_ptr + offs, other=0.0)  # line 19


@aotk.jit
def not_power_of_two(x_ptr):
    offs = tl.arange(0, 100)  # line 24
    tl.store(x_ptr + offs, offs)


@aotk.jit
def mixed_signedness(a_ptr, b_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    a = tl.load(a_ptr + offs)
    b = tl.load(b_ptr + offs)
    tl.store(a_ptr + offs, a // b)  # line 33


@aotk.jit
def block_condition_if(x_ptr, n):
    if tl.arange(0, 4) > n:  # line 38
        tl.store(x_ptr, 1.0)


@aotk.jit
def unknown_name(x_ptr):
    tl.store(x_ptr, undefined_thing)  # line 44  # noqa: F821


@aotk.jit
def exp_of_int(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.exp(offs))  # line 50


@aotk.jit
def helper(x, scale: tl.constexpr = 2):
    return x * scale, x + scale


@aotk.jit
def calls_helper(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    doubled, shifted = helper(tl.load(x_ptr + offs))
    tl.static_assert(BLOCK >= 16, "BLOCK too small")  # line 62
    for i in tl.static_range(2):
        doubled += i
    tl.store(x_ptr + offs, doubled + shifted)


@aotk.jit
def loop_changes_type(x_ptr, n):
    acc = 0
    for i in range(n):  # line 71
        acc += tl.load(x_ptr + i)
    tl.store(x_ptr, acc)


@aotk.jit
def return_in_loop(x_ptr, n):
    for i in range(n):
        if i > 3:
            return  # line 80
    tl.store(x_ptr, 1.0)


@aotk.jit
def branches_disagree(x_ptr, n):
    if n > 0:  # line 86
        value = 1.0
    else:
        value = 2
    tl.store(x_ptr, value)


@aotk.jit
def mixed_signedness_true_division(a_ptr, b_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    a = tl.load(a_ptr + offs)
    b = tl.load(b_ptr + offs)
    tl.store(a_ptr + offs, (a / b).to(tl.int32))  # line 98


@aotk.jit
def bool_modulo_int(a_ptr, b_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    a = tl.load(a_ptr + offs)
    b = tl.load(b_ptr + offs) > 0
    tl.store(a_ptr + offs, a % b)  # line 106
