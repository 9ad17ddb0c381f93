"""passes.unused_results: an ``if`` result nothing reads is dropped, with what its branches
yield for it, down nested ``if``s (fla's KDA inter-solve kernel reassigns a transposed dot
operand in its branches). Checked on the kir, by running the rewritten kir on the
interpreter against the original, on the PTX (no conversion of the transposes) and on the
GPU against numpy."""
import copy

import numpy as np
import pytest

import aotk
import aotk.language as tl
from aotk import interpreter
from aotk.ir import kir
from aotk.passes.unused_results import drop_unused_if_results


@aotk.jit
def _reassigned_in_branches(x_ptr, y_ptr, out_ptr, n, READ_AFTER: tl.constexpr):
    """``t`` (a transposed tile, B of the dots) is reassigned in nested branches; only with
    READ_AFTER does anything after the branches read it."""
    o = tl.arange(0, 16)
    x = tl.load(x_ptr + o[:, None] * 16 + o[None, :])
    y = tl.load(y_ptr + o[:, None] * 16 + o[None, :])
    acc = tl.zeros((16, 16), dtype=tl.float32)
    t = tl.trans(y)
    acc = tl.dot(x, t, acc)
    if n > 1:
        t = tl.trans(y * 2.0)
        acc = tl.dot(x, t, acc)
        if n > 2:
            t = tl.trans(y * 3.0)
            acc = tl.dot(x, t, acc)
    if READ_AFTER:
        acc += t
    tl.store(out_ptr + o[:, None] * 16 + o[None, :], acc)


SIGNATURE = "*fp16:16, *fp16:16, *fp32:16, i32"


def _kir(read_after: bool):
    return copy.deepcopy(_reassigned_in_branches.kir(SIGNATURE,
                                                     constants={"READ_AFTER": read_after}))


def _if_results(function) -> list:
    return [len(op.results) for op in kir.walk(function.body) if op.opcode == "if"]


def test_an_unread_result_is_dropped_down_the_nested_ifs():
    function = _kir(read_after=False)
    before = _if_results(function)
    assert drop_unused_if_results(function) == 2       # t out of both ifs
    after = _if_results(function)
    assert [b - a for b, a in zip(before, after)] == [1, 1]
    assert all(len(region.terminator.operands) == len(op.results)
               for op in kir.walk(function.body) if op.opcode == "if"
               for region in op.regions)


def test_a_result_read_after_the_if_stays():
    function = _kir(read_after=True)
    before = _if_results(function)
    assert drop_unused_if_results(function) == 0
    assert _if_results(function) == before


def _expected(x, y, n, read_after):
    """In fp32, from the fp16 tiles (the scaled ones rounded to fp16, as the kernel's)."""
    acc = x.astype(np.float32) @ y.astype(np.float32).T
    t = y.astype(np.float32).T
    for k in (2.0, 3.0)[:max(0, n - 1)]:
        t = (y * np.float16(k)).astype(np.float32).T
        acc = acc + x.astype(np.float32) @ t
    return acc + t if read_after else acc


def _inputs(seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((16, 16)).astype(np.float16),
            rng.standard_normal((16, 16)).astype(np.float16))


@pytest.mark.parametrize("n", [1, 2, 3])
def test_the_rewritten_kir_computes_what_the_original_does(n):
    original, rewritten = _kir(False), _kir(False)
    drop_unused_if_results(rewritten)
    x, y = _inputs(n)
    results = []
    for function in (original, rewritten):
        out = np.zeros((16, 16), np.float32)
        interpreter.run(function, (1, 1, 1), [x, y, out, n])
        results.append(out)
    np.testing.assert_array_equal(results[0], results[1])
    np.testing.assert_allclose(results[0], _expected(x, y, n, False), rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
def test_the_transposes_are_not_converted_through_shared_memory(target):
    """Unread after the ifs, each transpose is only a dot's B: stored K-major for it, not
    first converted to a layout of its own (scalar shared stores and loads between two
    barriers) to be yielded."""
    def scalar_shared_accesses(read_after):
        compiled = aotk.compile(_reassigned_in_branches, SIGNATURE,
                                constants={"READ_AFTER": read_after}, num_warps=4,
                                target=target)
        return sum(line.strip().startswith(("st.shared.b16", "ld.shared.b16"))
                   for line in compiled.ptx.splitlines())
    assert scalar_shared_accesses(False) == 0 < scalar_shared_accesses(True)


@pytest.mark.gpu
@pytest.mark.parametrize("read_after", [False, True])
@pytest.mark.parametrize("n", [1, 2, 3])
def test_the_kernel_on_the_gpu_matches_numpy(n, read_after):
    import torch
    x, y = _inputs(n)
    out = torch.zeros((16, 16), device="cuda", dtype=torch.float32)
    _reassigned_in_branches[(1,)](torch.from_numpy(x).cuda(), torch.from_numpy(y).cuda(), out,
                                  n, READ_AFTER=read_after)
    torch.cuda.synchronize()
    np.testing.assert_allclose(out.cpu().numpy(), _expected(x, y, n, read_after),
                               rtol=1e-2, atol=1e-2)
