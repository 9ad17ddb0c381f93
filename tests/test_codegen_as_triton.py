"""PTX whose shape follows Triton's lowering of the same source, without a GPU: fp32 exp and
exp2 as Triton emits them, reductions in Triton's combine order, mask constancy only where a
comparison's boundary falls between aligned runs, elementwise work once per constant run
(within a thread's vector and across the rows the warps tile),
and loop-invariant work hoisted past memory instructions."""
import re

import llvmlite.binding as llvm
import pytest

import aotk
import aotk.language as tl


@aotk.jit
def _exp_kernel(x_ptr, out_ptr, LIBDEVICE: tl.constexpr):
    offs = tl.arange(0, 128)
    x = tl.load(x_ptr + offs)
    if LIBDEVICE:
        y = tl.extra.libdevice.exp(x)
    else:
        y = tl.exp(x)
    tl.store(out_ptr + offs, y)


def test_exp_on_fp32_is_tritons_approximation_and_libdevice_exp_is_not():
    """tl.exp on fp32 is what Triton emits: ex2.approx.f32 (denormals kept) of x * log2(e),
    two instructions; tl.extra.libdevice.exp stays libdevice's __nv_expf (within 2 ulp)."""
    fast = aotk.compile(_exp_kernel, "*fp32:16, *fp32:16", {"LIBDEVICE": False}).ptx
    precise = aotk.compile(_exp_kernel, "*fp32:16, *fp32:16", {"LIBDEVICE": True}).ptx
    log2e = "0f3FB8AA3B"   # 1.4426950408889634 as an fp32 immediate
    assert "ex2.approx.f32" in fast and log2e in fast and "ex2.approx.ftz" not in fast
    assert "fma.rm" not in fast
    assert "ex2.approx.ftz.f32" in precise and "fma.rm" in precise


@aotk.jit
def _exp2_kernel(x_ptr, out_ptr):
    offs = tl.arange(0, 512)
    tl.store(out_ptr + offs, tl.exp2(tl.load(x_ptr + offs)))


def test_exp2_on_fp32_is_tritons_flush_to_zero_ex2():
    """Triton links libdevice with __nvvm_reflect("__CUDA_FTZ") = 1 (its enable_reflect_ftz,
    on by default), so its tl.exp2 on fp32 is one ex2.approx.ftz.f32 per element. Without the
    flag, libdevice's __nv_exp2f keeps denormals: ex2.approx.f32, which ptxas expands to a
    compare and two multiplies around the MUFU.EX2 (liger's cross entropy at 32000 columns:
    33 of them in its first loop, 32 in its second)."""
    compiled = aotk.compile(_exp2_kernel, "*fp32:16, *fp32:16", {})
    assert compiled.ptx.count("ex2.approx.ftz.f32") == 4
    assert "ex2.approx.f32" not in compiled.ptx and "__nv_exp2f" not in compiled.asm["llir"]


@aotk.jit
def _row_sum_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    tl.store(out_ptr, tl.sum(tl.load(x_ptr + tl.arange(0, BLOCK))))


def _longest_add_chain(ptx: str) -> int:
    """The most fp32 adds one after another on any path through the PTX's dataflow
    (a shuffle passes its source's count on; shared memory, the most stored there)."""
    depth, stored = {}, 0
    for line in ptx.splitlines():
        registers = re.findall(r"%r\d+", line)
        if re.match(r"\s*add(\.rn)?\.f32", line):
            depth[registers[0]] = 1 + max(depth.get(r, 0) for r in registers[1:])
        elif "shfl.sync" in line:
            depth[registers[0]] = depth.get(registers[1], 0)
        elif "st.shared" in line:
            stored = max([stored] + [depth.get(r, 0) for r in registers])
        elif "ld.shared" in line:
            for register in registers:
                depth[register] = stored
    return max(depth.values())


def test_reductions_combine_as_trees_like_triton():
    """A row of 8192 over 32 warps (8 elements a thread): a balanced tree in each thread,
    lanes combined farthest first (16 .. 1), and the 32 warps' partials combined by a
    butterfly of shuffles after one shared-memory load each, Triton's order throughout:
    3 + 5 + 5 dependent adds. Before: 7 sequential adds in the thread and 32 partials
    loaded by every thread (8 ld.shared.v4) and added one after another (7 + 5 + 31)."""
    ptx = aotk.compile(_row_sum_kernel, "*fp32:16, *fp32:16", {"BLOCK": 8192},
                       num_warps=32).ptx
    assert ptx.count("ld.shared") == 1 and "ld.shared.v4" not in ptx
    lanes = re.findall(r"shfl\.sync\.bfly\.b32\s+%r\d+, %r\d+, (\d+),", ptx)
    assert lanes == ["16", "8", "4", "2", "1"] * 2
    assert _longest_add_chain(ptx) == 3 + 5 + 5


@aotk.jit
def _row_dot_kernel(x_ptr, y_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr, tl.sum(tl.load(x_ptr + offs) * tl.load(y_ptr + offs)))


@pytest.mark.parametrize("fp_fusion", [True, False])
def test_a_reductions_adds_contract_with_its_products_as_tritons_do(fp_fusion):
    """A reduction's float adds carry the kernel's contract flag, as Triton's plain
    ``add.f32`` do: the thread's sum of products starts with FMAs, and ptxas may fuse
    further (fla's kkt solve: the FFMA / FADD / FMUL counts of Triton's SASS, where each
    step was an ``add.rn`` of its own before). ``enable_fp_fusion=False`` keeps every step
    rounded on its own, as in Triton."""
    ptx = aotk.compile(_row_dot_kernel, "*fp32:16, *fp32:16, *fp32:16", {"BLOCK": 1024},
                       num_warps=4, enable_fp_fusion=fp_fusion).ptx
    if fp_fusion:
        assert "add.rn.f32" not in ptx and "fma.rn.f32" in ptx
    else:
        assert "fma.rn.f32" not in ptx and "add.rn.f32" in ptx and "add.f32" not in ptx


def _tree_depths(ptx: str, instruction: str) -> list:
    """The depth in the thread's tree of each ``instruction`` before the first shuffle."""
    depth, order = {}, []
    for line in ptx[:ptx.index("shfl.sync")].splitlines():
        if re.match(rf"\s*{instruction}", line):
            target, *operands = re.findall(r"%r\d+", line)
            depth[target] = 1 + max(depth.get(r, 0) for r in operands)
            order.append(depth[target])
    return order


@aotk.jit
def _exp_row_kernel(x_ptr, exp_ptr, sum_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    e = tl.exp(tl.load(x_ptr + offs))
    tl.store(sum_ptr, tl.sum(e))
    tl.store(exp_ptr + offs, e)


def test_a_threads_tree_is_emitted_depth_first():
    """liger's vocab-parallel cross entropy: 32 elements a thread (32768 over 32 warps),
    exp'd, summed and stored. The thread's tree (Triton 3.8's sums) comes depth first, a
    subtree as soon as its elements are there: adds of depth 1, 1, 2, 1, 1, 2, 3, ... where
    level by level began with sixteen of depth 1. After that order ptxas issues the row's
    eight 16-byte loads before the ex2's (52 registers), after the other four, then one
    per group of ex2's (54): 0.85x Triton 3.6's time on an H200, whose chain it issues as
    the first."""
    ptx = aotk.compile(_exp_row_kernel, "*fp32:16, *fp32:16, *fp32:16", {"BLOCK": 32768},
                       num_warps=32).ptx
    order = _tree_depths(ptx, r"add(\.rn)?\.f32")
    assert len(order) == 31
    assert order[:15] == [1, 1, 2, 1, 1, 2, 3, 1, 1, 2, 1, 1, 2, 3, 4]
    assert max(order) == 5


@aotk.jit
def _max_row_kernel(x_ptr, max_ptr, BLOCK: tl.constexpr):
    tl.store(max_ptr, tl.max(tl.load(x_ptr + tl.arange(0, BLOCK)), axis=0))


def test_a_threads_maximum_is_emitted_level_by_level():
    """liger's grpo loss, one warp a row of 2,048: after a maximum's tree emitted depth
    first, ptxas began it before the row's last loads were issued, 7 % slower on an H200
    (141 against 130 us, Triton 133). A maximum is the same in any order: its 63 combines
    come level by level (32 of depth 1 first), the row's loads first again."""
    ptx = aotk.compile(_max_row_kernel, "*fp32:16, *fp32:16", {"BLOCK": 2048},
                       num_warps=1).ptx
    order = _tree_depths(ptx, r"max(\.NaN)?\.f32")
    assert len(order) == 63
    assert order == sorted(order) and order[:32] == [1] * 32


@aotk.jit
def _compare_mask_kernel(x_ptr, y_ptr, n, PREDICATE: tl.constexpr, SWAP: tl.constexpr):
    offs = tl.arange(0, 512)
    left, right = (n, offs) if SWAP else (offs, n)
    if PREDICATE == "lt":
        mask = left < right
    elif PREDICATE == "le":
        mask = left <= right
    elif PREDICATE == "gt":
        mask = left > right
    else:
        mask = left >= right
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask, other=0.0))


@pytest.mark.parametrize("predicate, swap, vector", [
    ("lt", False, True), ("ge", False, True), ("le", False, False), ("gt", False, False),
    ("gt", True, True), ("le", True, True), ("lt", True, False), ("ge", True, False)])
def test_a_mask_is_constant_over_aligned_runs_only_where_its_boundary_is(predicate, swap,
                                                                          vector):
    """offs < n and offs >= n (n divisible by 16) switch at a multiple of 16: one predicate
    per 4-element vector is exact. offs <= n and offs > n switch one past it (offs = n + 1
    is inside a run), so each element needs its own predicate (Triton: 4 scalar loads).
    aotk claimed the run for all four and loaded x[n + 1 .. n + 3] under offs <= n."""
    ptx = aotk.compile(_compare_mask_kernel, "*fp32:16, *fp32:16, i32:16",
                       {"PREDICATE": predicate, "SWAP": swap}).ptx
    assert ("ld.global.v4.b32" in ptx) == vector
    assert ptx.count("ld.global.b32") == (0 if vector else 4)


@aotk.jit
def _where_mask_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.store(y_ptr + offs, tl.where(offs < n, x * 2.0, 0.0))


def test_elementwise_ops_compute_once_per_constant_run():
    """offs < n with n:16 is constant over each thread's aligned 4-vector of offsets (axis
    info's constancy): Triton computes the compare once per vector and so does aotk now,
    1 setp per vector instead of 4 (and the offsets + 1, + 2, + 3 it needed go too). liger's
    cross entropy: 33 ISETP and 30 IADD3 fewer per trip of its first loop."""
    ptx = aotk.compile(_where_mask_kernel, "*fp32:16, *fp32:16, i32:16", {"BLOCK": 2048},
                       num_warps=4).ptx
    assert "ld.global.v4.b32" in ptx
    assert len(re.findall(r"setp\.\w+\.s32", ptx)) == 4
    unaligned = aotk.compile(_where_mask_kernel, "*fp32:16, *fp32:16, i32", {"BLOCK": 2048},
                             num_warps=4).ptx
    assert len(re.findall(r"setp\.\w+\.s32", unaligned)) == 16


@aotk.jit
def _row_mask_kernel(x_ptr, h_ptr, y_ptr, n, BLOCK_N: tl.constexpr, BLOCK_C: tl.constexpr):
    """liger's mhc pre-mix in small: a row mask on a [32, 128] tile and on its [32] row
    scales (a slice of the tile's layout)."""
    rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    cols = tl.arange(0, BLOCK_C)
    h = tl.load(h_ptr + rows, mask=rows < n, other=0.0)
    offsets = rows[:, None] * BLOCK_C + cols[None, :]
    x = tl.load(x_ptr + offsets, mask=rows[:, None] < n, other=0.0)
    tl.store(y_ptr + offsets, x * h[:, None], mask=rows[:, None] < n)


def test_a_row_mask_is_computed_once_per_run_across_the_threads_rows():
    """With 4 warps over a [32, 128] tile a thread holds rows w, w + 4, ..., w + 28. rows <
    n with n:16 is constant over rows 0-15 and 16-31 (axis info's constancy 16, a multiple
    of the 4 rows the warps tile), so whatever w is, the thread's first four rows share
    one value and its last four another: 2 compares, in the tile's layout and in the
    slice the row scales are loaded in; 8 without the hint (constancy 1)."""
    constants = {"BLOCK_N": 32, "BLOCK_C": 128}
    hinted = aotk.compile(_row_mask_kernel, "*fp32:16, *fp32:16, *fp32:16, i32:16", constants,
                          num_warps=4, target="sm_90").ptx
    assert len(re.findall(r"setp\.\w+\.s32", hinted)) == 2
    unhinted = aotk.compile(_row_mask_kernel, "*fp32:16, *fp32:16, *fp32:16, i32", constants,
                            num_warps=4, target="sm_90").ptx
    assert len(re.findall(r"setp\.\w+\.s32", unhinted)) == 8


@aotk.jit
def _scaled_rows_kernel(x_ptr, out_ptr, n, count, BLOCK: tl.constexpr):
    """liger's jsd loop in small: load, scale by 1 / count (the same every trip), store."""
    for start in range(0, n, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask, other=0.0)
        tl.store(out_ptr + offs, x * (1.0 / count), mask=mask)


def test_a_loop_invariant_division_after_a_load_leaves_the_loop():
    """fp32 ``/`` is an asm ``div.full.f32``; after a load (an asm with side effects) it is
    only sure to run if the load returns, which the load's call site says: LLVM's LICM
    then computes it once before the loop, as Triton does (one MUFU.RCP and its fix-ups
    less per trip)."""
    compiled = aotk.compile(_scaled_rows_kernel, "*fp32:16, *fp32:16, i32, i32", {"BLOCK": 512})
    body = compiled.ptx.split(".entry")[1]
    # The first label is the loop's header (the bounds are checked before it).
    loop = re.search(r"^\$L__BB0_\d+:", body, re.MULTILINE).start()
    assert body.count("div.full.f32") == 1 and body.index("div.full.f32") < loop
    assert "ld.global" in body and body.index("ld.global") > loop


@aotk.jit
def _scale_row_kernel(x_ptr, x_stride, scale_ptr, n, BLOCK: tl.constexpr):
    """liger's element_mul_kernel: a row in place, in blocks, times one loaded value."""
    x_ptr += tl.program_id(0).to(tl.int64) * x_stride
    scale = tl.load(scale_ptr)
    for start in range(0, n, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs, mask=offs < n)
        tl.store(x_ptr + offs, x * scale, mask=offs < n)


@pytest.mark.skipif(llvm.llvm_version_info < (22,), reason="nvptx-mad-wide-opt is LLVM 22's")
def test_an_offset_scaled_onto_a_base_is_one_mad_wide():
    """A 32-bit offset scaled and added to a 64-bit pointer is one mad.wide.s32, as Triton
    has LLVM emit it (its nvptx-mad-wide-opt), not mul.wide.s32 then add.s64: with the
    64-bit product in between, ptxas 13 gave liger's element_mul_kernel (bf16, 512 columns,
    32 warps) 22 registers for sm_90a where Triton's PTX needs 16; now 16 too."""
    compiled = aotk.compile(_scale_row_kernel, "*bf16:16, i32, *bf16:16, i32", {"BLOCK": 512},
                            num_warps=32, target="sm_90")
    assert "mad.wide.s32" in compiled.ptx and "mul.wide.s32" not in compiled.ptx
    assert compiled.metadata["registers"] <= 16


@aotk.jit
def _warp_sum_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    tl.store(out_ptr, tl.sum(tl.load(x_ptr + tl.arange(0, BLOCK))))


def test_shared_addresses_are_32_bit_as_in_triton():
    """Triton's data layout makes shared, constant and local pointers 32-bit (LLVM's
    nvptx-short-ptr): a shared address is one register. Before, the warps' partials went
    through 64-bit ones (cvt.u64.u32 and add.s64 per address, st.shared [%rd..])."""
    compiled = aotk.compile(_warp_sum_kernel, "*fp32:16, *fp32:16", {"BLOCK": 1024},
                            num_warps=8)
    assert "p3:32:32" in compiled.llir
    shared = re.findall(r"(?:ld|st)\.shared\S*\s+(?:%\w+, )?\[(%\w+)", compiled.ptx)
    assert shared and all(register.startswith("%r") and not register.startswith("%rd")
                          for register in shared)
