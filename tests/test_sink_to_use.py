"""backend.sink_to_use: what a sum tree takes comes just before the combine that takes it,
the rest keeps its order; and what that does to a row kernel's registers (no GPU needed)."""
import llvmlite.ir as ir

import aotk
import aotk.language as tl
from aotk.backend.sink_to_use import computed_with_special_functions, sink_block

F32 = ir.FloatType()


def _names(block):
    return [i.opname if isinstance(i, ir.Terminator) else i.name for i in block.instructions]


def _module():
    module = ir.Module(name="m")
    i32 = ir.IntType(32)
    load = ir.Function(module, ir.FunctionType(F32, [i32]), name="side_effect")
    exp = ir.Function(module, ir.FunctionType(F32, [F32]), name="__nv_expf")
    shuffle = ir.Function(module, ir.FunctionType(F32, [i32, F32, i32, i32]),
                          name="llvm.nvvm.shfl.sync.bfly.f32")
    kernel = ir.Function(module, ir.FunctionType(ir.VoidType(), [F32]), name="k")
    return kernel, load, exp, lambda b, v, name: b.call(
        shuffle, [ir.Constant(i32, -1), v, ir.Constant(i32, 16), ir.Constant(i32, 31)],
        name=name)


def _two_squares(kernel, load):
    """A block that loads two registers (calls with side effects) and squares them."""
    block = kernel.append_basic_block("b")
    b = ir.IRBuilder(block)
    x0 = b.call(load, [ir.Constant(ir.IntType(32), 0)], name="x0")
    x1 = b.call(load, [ir.Constant(ir.IntType(32), 1)], name="x1")
    return block, b, (x0, x1, b.fmul(x0, x0, name="m0"), b.fmul(x1, x1, name="m1"))


def test_what_a_sum_tree_takes_comes_one_register_at_a_time():
    """Two registers through mul, exp and add, lowered op by op, then summed: each
    register's chain comes right before the tree that takes it, the tree where it was; the
    calls with side effects keep their order, and a product no tree takes stays put."""
    kernel, load, exp, shuffle = _module()
    block, b, (x0, x1, m0, m1) = _two_squares(kernel, load)
    kept = b.fmul(x0, x1, name="kept")
    e0, e1 = b.call(exp, [m0], name="e0"), b.call(exp, [m1], name="e1")
    a0, a1 = b.fadd(e0, kernel.args[0], name="a0"), b.fadd(e1, kernel.args[0], name="a1")
    total = b.fadd(a0, a1, name="total")
    b.call(load, [b.fptosi(kept, ir.IntType(32), name="t")], name="use")
    shuffle(b, total, "across")
    b.ret_void()
    before = _names(block)
    sink_block(block, keep={id(total)}, sinks=set())
    assert _names(block) == before   # a tree that takes its inputs where they are
    sink_block(block, keep={id(total)}, sinks={id(total)})
    assert _names(block) == ["x0", "x1", "kept", "m0", "e0", "a0", "m1", "e1", "a1", "total",
                             "t", "use", "across", "ret void"]


def test_a_value_something_else_also_takes_stays_with_what_made_it():
    """A softmax's exponentials are summed and divided, an attention row's probabilities
    summed and fed to a dot: such a value (and what only it takes) stays where it was; a
    register whose chain only the sum takes still moves."""
    kernel, load, exp, _ = _module()
    block, b, (x0, x1, m0, m1) = _two_squares(kernel, load)
    e0, e1 = b.call(exp, [m0], name="e0"), b.call(exp, [m1], name="e1")
    total = b.fadd(e0, e1, name="total")
    b.call(load, [b.fptosi(e0, ir.IntType(32), name="t")], name="use")
    b.ret_void()
    sink_block(block, keep={id(total)}, sinks={id(total)})
    assert _names(block) == ["x0", "x1", "m0", "e0", "m1", "e1", "total", "t", "use",
                             "ret void"]


def test_phis_and_the_loop_control_keep_their_places():
    """A one-block loop summing: the phis stay at the top, the increment and the exit test
    (no tree takes them) where they were, the branch last; the square comes just before the
    sum that takes it."""
    kernel, load, _, _ = _module()
    entry, loop, done = (kernel.append_basic_block(n) for n in ("entry", "loop", "done"))
    ir.IRBuilder(entry).branch(loop)
    b = ir.IRBuilder(loop)
    i32 = ir.IntType(32)
    i = b.phi(i32, name="i")
    acc = b.phi(F32, name="acc")
    step = b.add(i, ir.Constant(i32, 1), name="step")
    x = b.call(load, [i], name="x")
    square = b.fmul(x, x, name="square")
    more = b.icmp_signed("<", step, ir.Constant(i32, 8), name="more")
    total = b.fadd(acc, square, name="total")
    b.cbranch(more, loop, done)
    for phi, start, again in ((i, ir.Constant(i32, 0), step), (acc, ir.Constant(F32, 0), total)):
        phi.add_incoming(start, entry)
        phi.add_incoming(again, loop)
    ir.IRBuilder(done).ret_void()
    sink_block(loop, keep={id(total)}, sinks={id(total)})
    assert _names(loop) == ["i", "acc", "step", "x", "more", "square", "total", "br"]


@aotk.jit
def _kl_row_kernel(y_ptr, t_ptr, out_ptr, n, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    total = 0.0
    for start in range(0, n, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < n
        y = tl.load(y_ptr + row * n + offs, mask=mask, other=0.0)
        t = tl.load(t_ptr + row * n + offs, mask=mask, other=0.0)
        total += tl.sum(t * (tl.log(tl.maximum(t, eps)) - y), axis=0)
    tl.store(out_ptr + row, total)


def test_a_row_kernels_elementwise_chain_keeps_few_registers():
    """liger's kl_div forward at 32,000 columns: 32 elements a thread (16,384 over 16
    warps). Op by op its chain held 82 registers here (93 for this copy), one CTA per SM:
    299 us against Triton's 260 on an H200. A register at a time 35, three CTAs: 240 us."""
    compiled = aotk.compile(_kl_row_kernel, "*fp32:16, *fp32:16, *fp32:16, i32:16, fp32",
                            {"BLOCK": 16384}, num_warps=16, target="sm_90")
    assert compiled.metadata["spills"] == 0
    assert compiled.metadata["registers"] <= 40


def test_special_functions_are_found_through_pure_arithmetic_only():
    """The question backend.reduce asks of a sum's inputs: does an exponential, logarithm,
    root or division make them, through this block's pure instructions? Not through a load
    (a call with side effects) and not in another block."""
    kernel, load, exp, _ = _module()
    block, b, (x0, x1, m0, m1) = _two_squares(kernel, load)
    e0 = b.call(exp, [m0], name="e0")
    chained = b.select(b.fcmp_ordered("<", e0, m1, name="c"), e0, m1, name="chained")
    quotient = b.fdiv(x1, m1, name="q")
    assert computed_with_special_functions([chained], block)
    assert computed_with_special_functions([m0, quotient], block)
    assert not computed_with_special_functions([m0, m1, kernel.args[0]], block)
    from_load = b.call(load, [b.fptosi(e0, ir.IntType(32), name="address")], name="loaded")
    assert not computed_with_special_functions([b.fmul(from_load, x0, name="p")], block)
    other = kernel.append_basic_block("other")
    assert not computed_with_special_functions([m0], other)


@aotk.jit
def _smoothed_cross_entropy_row(x_ptr, w_ptr, out_ptr, n, eps, BLOCK: tl.constexpr):
    """liger's weighted cross entropy with label smoothing, its first pass over a row."""
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + row * n + offs, mask=mask, other=float("-inf"))
    w = tl.load(w_ptr + offs, mask=mask, other=0.0)
    smoothing = tl.sum(tl.where(mask, -eps * x * w, 0.0))
    exponentials = tl.sum(tl.exp(x - tl.max(x, axis=0)))
    tl.store(out_ptr + row, smoothing + exponentials)


def _first_line(lines, pattern, start=0):
    return next(i for i in range(start, len(lines)) if pattern in lines[i])


def test_a_sum_of_products_is_emitted_level_by_level_a_sum_of_exponentials_depth_first():
    """32 elements a thread (32,768 columns over 32 warps). The smoothing sum of products
    comes level by level, all products first: at 1,024 threads, the weighted cross
    entropy (H200, 4096 x 32000) took 497 us depth first with its products sunk, 437 level by
    level (Triton 430). The sum of exponentials keeps each exponential next to the add that
    takes it: level by level took liger's vocab-parallel cross entropy from 276 us to 323
    (Triton 319)."""
    compiled = aotk.compile(_smoothed_cross_entropy_row, "*fp32:16, *fp32:16, *fp32:16, "
                            "i32:16, fp32", {"BLOCK": 32768}, num_warps=32, target="sm_90")
    lines = compiled.lowered.splitlines()
    products = [i for i, line in enumerate(lines) if " fmul " in line]
    first_select = _first_line(lines, " select ")
    first_add = _first_line(lines, " fadd ", first_select)
    # the level-order tree: every product and select of the row before its first add
    assert len([i for i in products if i < first_add]) >= 64
    assert all(" fadd " not in line for line in lines[products[0]:first_add])
    # the depth-first tree: an add between the first and the last exponential
    exps = [i for i, line in enumerate(lines) if "ex2" in line and " call " in line]
    assert len(exps) == 32
    assert any(" fadd " in line for line in lines[exps[0]:exps[-1]])


@aotk.jit
def _weighted_steps(x_ptr, w_ptr, out_ptr, STEPS: tl.constexpr, ROWS: tl.constexpr,
                    COLS: tl.constexpr):
    """out[r, c] = sum over s of x[s, r, c] * w[r, s]: an unrolled accumulation whose steps
    each load a tile and a column of weights broadcast along it."""
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, COLS)
    acc = tl.zeros((ROWS, COLS), dtype=tl.float32)
    for s in tl.static_range(STEPS):
        w = tl.load(w_ptr + rows * STEPS + s)
        x = tl.load(x_ptr + s * 4096 * COLS + rows[:, None] * COLS + cols[None, :])
        acc += x * w[:, None]
    tl.store(out_ptr + rows[:, None] * COLS + cols[None, :], acc)


def test_an_unrolled_accumulation_adds_after_every_steps_loads():
    """Lowered in program order, each step's products were added right after its loads and
    ptxas kept every step's loads and partial sums live (liger's mhc_pre fwd: 120 registers
    against Triton's 64). The chain's terms now come at its last add, one register's chain
    at a time: every load first, then the arithmetic."""
    compiled = aotk.compile(_weighted_steps, "*fp32:16, *fp32:16, *fp32:16",
                            constants={"STEPS": 4, "ROWS": 32, "COLS": 128}, target="sm_90")
    lines = compiled.asm["ptx"].splitlines()
    loads = [i for i, line in enumerate(lines) if "ld.global" in line]
    arithmetic = [i for i, line in enumerate(lines)
                  if line.strip().startswith(("fma.rn.f32", "add.f32", "mul.f32"))]
    assert len(loads) >= 4 * 8 and arithmetic
    assert max(loads) < min(arithmetic)
    assert compiled.metadata["registers"] <= 64   # 52 on ptxas 13.5
