"""Control-flow kernels (tier 2): runtime loops, branches, early returns, inlined helpers.

Shared by the interpreter, ptxas and GPU tests; each case has a numpy reference.
"""
from __future__ import annotations

import importlib.util
import pathlib

import numpy as np

import aotk
import aotk.language as tl
from tests.kernels.elementwise import Case


@aotk.jit
def strided_sum_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """A block accumulator over a runtime loop, an `if` inside, counters of two dtypes."""
    acc = tl.zeros([BLOCK], tl.float32)
    count = 0
    big = tl.full([], 0, tl.int64)
    for off in range(0, n, BLOCK):
        offs = off + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
        if off % (2 * BLOCK) == 0:
            acc += x
        else:
            acc -= x
        count += 1
        big += 1 << 33
    i = 0
    while i < 3:
        i += 1
    tl.store(out_ptr + tl.arange(0, BLOCK),
             acc + (count * 10 + i).to(tl.float32) + (big >> 33).to(tl.float32))


def _strided_sum_reference(args):
    x, n, block = args["x_ptr"], args["n"], 64
    acc = np.zeros(block, np.float64)
    count = 0
    for off in range(0, n, block):
        chunk = np.zeros(block)
        chunk[:min(block, n - off)] = x[off:off + block]
        acc += chunk if off % (2 * block) == 0 else -chunk
        count += 1
    return {"out_ptr": (acc + count * 10 + 3 + count).astype(np.float32)}


@aotk.jit
def early_return_kernel(x_ptr, out_ptr, n, limit, BLOCK: tl.constexpr):
    """Programs at or past `limit` return at once; the rest scale by a runtime ternary."""
    pid = tl.program_id(0)
    if pid >= limit:
        return
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    scale = 2.0 if n > 100 else 0.5
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(out_ptr + offs, x * scale, mask=offs < n)


def _early_return_reference(args):
    out = args["out_ptr"].copy()
    stop = args["limit"] * 32
    out[:stop] = args["x_ptr"][:stop] * (2.0 if args["n"] > 100 else 0.5)
    return {"out_ptr": out}


@aotk.jit
def _shift_or_keep(x, amount, bias=1.0):
    """Inlined helper: an early return, two results, a default argument."""
    if amount > 0:
        return x + amount + bias, 1
    return x - bias, 0


@aotk.jit
def helper_calls_kernel(x_ptr, out_ptr, flag_ptr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + pid * BLOCK + offs)
    y, taken = _shift_or_keep(x, pid - 1)
    z, _ = _shift_or_keep(y, pid, bias=0.25)
    tl.store(out_ptr + pid * BLOCK + offs, z)
    tl.store(flag_ptr + pid, taken)


def _helper_calls_reference(args):
    x = args["x_ptr"].reshape(-1, 16).astype(np.float64)
    out, flags = np.empty_like(x), np.zeros(len(x), np.int32)
    for pid, row in enumerate(x):
        y = row + (pid - 1) + 1.0 if pid - 1 > 0 else row - 1.0
        flags[pid] = int(pid - 1 > 0)
        out[pid] = y + pid + 0.25 if pid > 0 else y - 0.25
    return {"out_ptr": out.astype(np.float32).ravel(), "flag_ptr": flags}


@aotk.jit
def nested_loops_kernel(x_ptr, out_ptr, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """Nested runtime loops over 2D tiles with a fp16 and a 2D fp32 carried value, a
    carried pointer, and a static_range unrolled inside."""
    acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    peak = tl.full([BLOCK_N], -60000.0, tl.float16)
    row_ptr = x_ptr
    for m in range(0, M, BLOCK_M):
        rows = m + tl.arange(0, BLOCK_M)
        for n0 in tl.range(0, N, BLOCK_N):
            cols = n0 + tl.arange(0, BLOCK_N)
            mask = (rows[:, None] < M) & (cols[None, :] < N)
            tile = tl.load(row_ptr + tl.arange(0, BLOCK_M)[:, None] * N + cols[None, :],
                           mask=mask, other=0.0)
            for k in tl.static_range(2):
                acc += tile * (k + 1)
            peak = tl.maximum(peak, tl.max(tl.where(mask, tile, -60000.0), axis=0).to(tl.float16))
        row_ptr += BLOCK_M * N
    offs = tl.arange(0, BLOCK_M)[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
    tl.store(out_ptr + offs, acc)
    tl.store(out_ptr + BLOCK_M * BLOCK_N + tl.arange(0, BLOCK_N), peak.to(tl.float32))


def _nested_loops_reference(args):
    M, N, bm, bn = args["M"], args["N"], 8, 16
    x = args["x_ptr"].reshape(M, N).astype(np.float64)
    acc = np.zeros((bm, bn))
    peak = np.full(bn, -60000.0)
    for m in range(0, M, bm):
        for n0 in range(0, N, bn):
            tile = np.zeros((bm, bn))
            part = x[m:m + bm, n0:n0 + bn]
            tile[:part.shape[0], :part.shape[1]] = part
            acc += 3 * tile
            masked = np.full((bm, bn), -60000.0)
            masked[:part.shape[0], :part.shape[1]] = part
            peak = np.maximum(peak, masked.max(0))
    return {"out_ptr": np.concatenate([acc.ravel(), peak]).astype(np.float32)}


@aotk.jit
def countdown_kernel(x_ptr, out_ptr, n):
    """A negative compile-time step, and a data-dependent while loop per program."""
    pid = tl.program_id(0)
    total = 0.0
    for i in range(n - 1, -1, -1):
        total = total * 0.5 + tl.load(x_ptr + i)
    value = tl.load(x_ptr + pid).to(tl.int32)
    steps = 0
    while value != 1 and steps < 200:
        value = tl.where(value % 2 == 0, value // 2, 3 * value + 1)
        steps += 1
    tl.store(out_ptr + pid, total + steps)


def _countdown_reference(args):
    x, n = args["x_ptr"], args["n"]
    total = np.float32(0.0)
    for i in range(n - 1, -1, -1):
        total = np.float32(total * np.float32(0.5) + x[i])
    out = np.zeros_like(args["out_ptr"])
    for pid in range(len(out)):
        value, steps = int(x[pid]), 0
        while value != 1 and steps < 200:
            value = value // 2 if value % 2 == 0 else 3 * value + 1
            steps += 1
        out[pid] = total + np.float32(steps)
    return {"out_ptr": out}


@aotk.jit
def nested_return_kernel(flags_ptr, out_ptr):
    """Program p reads three flags (bits of p): a return in one branch of an inner ``if``
    must not stop the store on the paths that fall through (Triton's
    test_nested_if_else_return)."""
    pid = tl.program_id(0)
    value = 0
    if tl.load(flags_ptr + 3 * pid):
        if tl.load(flags_ptr + 3 * pid + 1):
            value = 1
        else:
            return
    else:
        if tl.load(flags_ptr + 3 * pid + 2):
            value = 2
        else:
            value = 3
    tl.store(out_ptr + pid, value)


def _nested_return_reference(args):
    out = args["out_ptr"].copy()
    for pid, (first, second, third) in enumerate(args["flags_ptr"].reshape(8, 3)):
        if first and not second:
            continue
        out[pid] = (1 if second else 0) if first else (2 if third else 3)
    return {"out_ptr": out}


@aotk.jit
def static_branch_return_kernel(exit_ptr, out_ptr, DYNAMIC: tl.constexpr):
    """A runtime early return inside a compile-time ``if``: the store after the outer
    ``if`` still runs where the early return is not taken (Triton's test_if_return)."""
    pid = tl.program_id(0)
    if DYNAMIC:
        if tl.load(exit_ptr + pid):
            tl.store(out_ptr + pid, 0)
            return
    tl.store(out_ptr + pid, 1)


@aotk.jit
def early_return_then_rebound_constexpr_kernel(out_ptr, n, LIMIT: tl.constexpr):
    """After an early return, a constexpr parameter is rebound to a runtime i64 (fla's
    ``NC = min(NC, tl.cdiv(T - i_t * BT, BC))``): the path that returned keeps the
    constexpr, and the two paths never meet again."""
    pid = tl.program_id(0).to(tl.int64)
    if pid >= n:
        return
    LIMIT = min(LIMIT, n - pid)
    tl.store(out_ptr + pid, LIMIT)


def _early_return_then_rebound_reference(args):
    n, out = args["n"], args["out_ptr"].copy()
    out[:n] = np.minimum(4, n - np.arange(n))
    return {"out_ptr": out}


@aotk.jit
def recurrent_state_kernel(q_ptr, k_ptr, v_ptr, o_ptr, T, K: tl.constexpr, V: tl.constexpr):
    """Linear attention's fused-recurrent form: a [K, V] state decays and takes the outer
    product of the step's k and v rows; the output row is q's contraction with it. The
    loop carries the pointers to the step's rows, read as slices of the state's layout."""
    base = tl.program_id(0).to(tl.int64) * T
    p_q = q_ptr + base * K + tl.arange(0, K)
    p_k = k_ptr + base * K + tl.arange(0, K)
    p_v = v_ptr + base * V + tl.arange(0, V)
    p_o = o_ptr + base * V + tl.arange(0, V)
    h = tl.zeros([K, V], tl.float32)
    for _ in range(0, T):
        b_q = tl.load(p_q)
        b_k = tl.load(p_k)
        b_v = tl.load(p_v)
        h = h * 0.5 + b_k[:, None] * b_v[None, :]
        tl.store(p_o, tl.sum(h * b_q[:, None], 0))
        p_q += K
        p_k += K
        p_v += V
        p_o += V


def _recurrent_state_reference(args):
    k_dim = 32
    q, k, v = (args[name].astype(np.float64) for name in ("q_ptr", "k_ptr", "v_ptr"))
    programs, steps = 2, args["T"]
    q, k = q.reshape(programs, steps, k_dim), k.reshape(programs, steps, k_dim)
    v = v.reshape(programs, steps, -1)
    out = np.zeros_like(v)
    for program in range(programs):
        h = np.zeros((k_dim, v.shape[2]))
        for step in range(steps):
            h = h * 0.5 + np.outer(k[program, step], v[program, step])
            out[program, step] = q[program, step] @ h
    return {"o_ptr": out.ravel().astype(np.float32)}


def _c(name, kernel, make, grid, constants, reference, outputs=("out_ptr",), exact=True,
       rtol=1e-5):
    return Case(name, kernel, make, grid, constants, outputs, reference, exact, rtol)


def _example(name: str):
    """A module of examples/kernels (not a package: loaded by path, as `aotk build` does)."""
    path = pathlib.Path(__file__).resolve().parents[2] / "examples" / "kernels" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"examples_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _layer_norm_args(rng, rows=3, cols=300):
    return {"X": (rng.standard_normal((rows, cols)) * 2 + 1).astype(np.float16),
            "Y": np.zeros((rows, cols), np.float16),
            "W": rng.uniform(0, 1, cols).astype(np.float16),
            "B": rng.standard_normal(cols).astype(np.float16),
            "Mean": np.zeros(rows, np.float32), "Rstd": np.zeros(rows, np.float32),
            "stride": cols, "M": rows, "N": cols, "eps": 1e-5}


def _layer_norm_reference(args):
    x = args["X"].astype(np.float64)
    mean = x.mean(1, keepdims=True)
    rstd = 1 / np.sqrt(((x - mean) ** 2).mean(1, keepdims=True) + args["eps"])
    y = (x - mean) * rstd * args["W"].astype(np.float64) + args["B"].astype(np.float64)
    return {"Y": y.astype(np.float16), "Mean": mean.ravel().astype(np.float32),
            "Rstd": rstd.ravel().astype(np.float32)}


def _row_argmax_reference(args):
    x = args["x_ptr"].reshape(args["n_rows"], args["n_cols"])
    return {"out_ptr": x.argmax(1).astype(np.int32)}


CASES = [
    _c("recurrence-carries-row-pointers", recurrent_state_kernel,
       lambda rng: {name: rng.standard_normal(2 * 5 * 32).astype(np.float32)
                    for name in ("q_ptr", "k_ptr")} | {
           "v_ptr": rng.standard_normal(2 * 5 * 64).astype(np.float32),
           "o_ptr": np.zeros(2 * 5 * 64, np.float32), "T": 5},
       (2,), {"K": 32, "V": 64}, _recurrent_state_reference, outputs=("o_ptr",),
       exact=False),
    _c("example-layer-norm-loops-over-blocks", _example("layer_norm").layer_norm_fwd_kernel,
       _layer_norm_args, (3,), {"BLOCK_SIZE": 128}, _layer_norm_reference,
       outputs=("Y", "Mean", "Rstd"), exact=False, rtol=4e-3),
    _c("example-row-argmax", _example("row_argmax").row_argmax_kernel,
       lambda rng: {"x_ptr": rng.integers(-20, 20, 5 * 300).astype(np.float32),
                    "out_ptr": np.zeros(5, np.int32), "row_stride": 300, "n_rows": 5,
                    "n_cols": 300},
       (5,), {"BLOCK": 64}, _row_argmax_reference),
    _c("loop-carried-block-if-while", strided_sum_kernel,
       lambda rng: {"x_ptr": rng.standard_normal(1000).astype(np.float32),
                    "out_ptr": np.zeros(64, np.float32), "n": 1000},
       (1,), {"BLOCK": 64}, _strided_sum_reference, exact=False),
    _c("early-return-and-ternary", early_return_kernel,
       lambda rng: {"x_ptr": rng.standard_normal(200).astype(np.float32),
                    "out_ptr": np.full(200, 7.0, np.float32), "n": 200, "limit": 4},
       (7,), {"BLOCK": 32}, _early_return_reference),
    _c("inlined-helper-early-return", helper_calls_kernel,
       lambda rng: {"x_ptr": rng.standard_normal(4 * 16).astype(np.float32),
                    "out_ptr": np.zeros(4 * 16, np.float32), "flag_ptr": np.zeros(4, np.int32)},
       (4,), {"BLOCK": 16}, _helper_calls_reference, outputs=("out_ptr", "flag_ptr"),
       exact=False),
    _c("nested-loops-2d-fp16-pointer", nested_loops_kernel,
       lambda rng: {"x_ptr": rng.integers(-8, 8, 21 * 37).astype(np.float32),
                    "out_ptr": np.zeros(8 * 16 + 16, np.float32), "M": 21, "N": 37},
       (1,), {"BLOCK_M": 8, "BLOCK_N": 16}, _nested_loops_reference),
    _c("early-return-then-rebound-constexpr", early_return_then_rebound_constexpr_kernel,
       lambda rng: {"out_ptr": np.full(10, -1, np.int64), "n": 7},
       (10,), {"LIMIT": 4}, _early_return_then_rebound_reference),
    _c("early-return-in-one-nested-branch", nested_return_kernel,
       lambda rng: {"flags_ptr": np.array([((p >> 2) & 1, (p >> 1) & 1, p & 1) for p in range(8)],
                                          np.int32).ravel(),
                    "out_ptr": np.full(8, -1, np.int32)},
       (8,), {}, _nested_return_reference),
    _c("early-return-inside-a-static-if", static_branch_return_kernel,
       lambda rng: {"exit_ptr": np.array([1, 0, 0, 1], np.int32),
                    "out_ptr": np.full(4, -1, np.int32)},
       (4,), {"DYNAMIC": True},
       lambda args: {"out_ptr": np.where(args["exit_ptr"] == 1, 0, 1).astype(np.int32)}),
    _c("negative-step-and-data-dependent-while", countdown_kernel,
       lambda rng: {"x_ptr": rng.integers(1, 60, 16).astype(np.float32),
                    "out_ptr": np.zeros(16, np.float32), "n": 16},
       (16,), {}, _countdown_reference, exact=False),
]
