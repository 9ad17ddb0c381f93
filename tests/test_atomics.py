"""Atomics, debug_barrier, device_print and device_assert: interpreter semantics, the PTX
they become, and their error messages. (Contention cases live in tests/kernels/atomics.py
and run through every runner.)"""
import numpy as np
import pytest

import aotk
import aotk.language as tl
from aotk.errors import CompilationError


def _ptx(kernel, signature, constants=None, target="sm_90", debug=None):
    return aotk.compile(kernel, signature, constants or {}, target=target, debug=debug).ptx


def _atom_lines(ptx):
    return [l.strip() for l in ptx.splitlines() if "atom." in l]


# -- interpreter semantics ----------------------------------------------------------------

@aotk.jit
def _same_address_kernel(ptr, old_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(old_ptr + offs, tl.atomic_add(ptr + offs // 4, offs + 1, mask=offs % 8 != 7))


def test_duplicate_addresses_apply_in_row_major_order():
    ptr, old = np.array([100, 200, 300, 400], np.int32), np.zeros(16, np.int32)
    _same_address_kernel[(1,)](ptr, old, BLOCK=16)
    values = np.where(np.arange(16) % 8 != 7, np.arange(16) + 1, 0)
    expected_old = np.zeros(16, np.int64)
    for slot in range(4):
        lanes = np.arange(4 * slot, 4 * slot + 4)
        start = [100, 200, 300, 400][slot]
        expected_old[lanes] = start + np.concatenate([[0], np.cumsum(values[lanes])[:-1]])
    expected_old[np.arange(16) % 8 == 7] = 0          # masked-off lanes read 0
    np.testing.assert_array_equal(old, expected_old)
    np.testing.assert_array_equal(ptr, [100, 200, 300, 400] + values.reshape(4, 4).sum(1))


@aotk.jit
def _float_max_kernel(ptr, x_ptr, old_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(old_ptr + offs, tl.atomic_max(ptr + offs, tl.load(x_ptr + offs)))
    tl.atomic_min(ptr + BLOCK + offs, tl.load(x_ptr + offs))


def test_float_max_min_across_signs():
    x = np.array([-1.5, 2.0, -3.0, 4.0, -0.5, np.inf, -np.inf, 1e-30], np.float32)
    start = np.array([-2.0, 1.0, -1.0, -5.0, -0.25, 3.0, -7.0, -1e-30] * 2, np.float32)
    ptr, old = start.copy(), np.zeros(8, np.float32)
    _float_max_kernel[(1,)](ptr, x, old, BLOCK=8)
    np.testing.assert_array_equal(ptr[:8], np.maximum(start[:8], x))
    np.testing.assert_array_equal(ptr[8:], np.minimum(start[8:], x))
    np.testing.assert_array_equal(old, start[:8])


@aotk.jit
def _cas_scalar_kernel(ptr, out_ptr):
    first = tl.atomic_cas(ptr, 5, 9)
    second = tl.atomic_cas(ptr, 5, 11)
    tl.store(out_ptr, first * 100 + second)


def test_scalar_cas_returns_old_value_and_swaps_once():
    ptr, out = np.array([5], np.int64), np.zeros(1, np.int64)
    _cas_scalar_kernel[(1,)](ptr, out)
    assert ptr[0] == 9 and out[0] == 5 * 100 + 9


# -- PTX ----------------------------------------------------------------------------------

@aotk.jit
def _orders_kernel(f32, i64, u32, SEM: tl.constexpr, SCOPE: tl.constexpr):
    offs = tl.arange(0, 128)
    tl.atomic_add(f32 + offs, 1.0, sem=SEM, scope=SCOPE)
    tl.atomic_min(i64 + offs, -3, sem=SEM, scope=SCOPE)
    tl.atomic_max(u32 + offs, 3, sem=SEM, scope=SCOPE)
    tl.atomic_xchg(u32 + offs, 7, sem=SEM, scope=SCOPE)


@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
@pytest.mark.parametrize("sem,scope", [(None, None), ("relaxed", "cta"), ("acquire", "sys"),
                                       ("release", "gpu")])
def test_atom_carries_semantic_and_scope(sem, scope, target):
    lines = _atom_lines(_ptx(_orders_kernel, "*fp32:16, *i64:16, *u32:16",
                             {"SEM": sem, "SCOPE": scope}, target))
    q = f"{sem or 'acq_rel'}.{scope or 'gpu'}"
    for instruction in (f"atom.global.{q}.add.f32", f"atom.global.{q}.min.s64",
                        f"atom.global.{q}.max.u32", f"atom.global.{q}.exch.b32"):
        assert any(instruction in l for l in lines), (instruction, lines)


@aotk.jit
def _half_add_kernel(h_ptr, b_ptr, x_ptr):
    offs = tl.arange(0, 128)
    x = tl.load(x_ptr + offs)
    tl.atomic_add(h_ptr + offs, x)
    tl.atomic_add(b_ptr + offs, x)


def test_half_adds_native_or_cas_loop():
    signature = "*fp16:16, *bf16:16, *fp32:16"
    sm90 = _atom_lines(_ptx(_half_add_kernel, signature, target="sm_90"))
    assert any("add.noftz.f16" in l for l in sm90)
    assert any("add.noftz.bf16" in l for l in sm90)
    # sm_80 has no bf16 atomic add: a 16-bit compare-and-swap loop instead
    sm80 = _atom_lines(_ptx(_half_add_kernel, signature, target="sm_80"))
    assert any("add.noftz.f16" in l for l in sm80)
    assert not any("bf16" in l for l in sm80)
    assert any("atom.global.acq_rel.gpu.cas.b16" in l for l in sm80)


@aotk.jit
def _vector_add_kernel(ptr, x_ptr, old_ptr, n, STRIDE: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    old = tl.atomic_add(ptr + offs * STRIDE, x, mask=offs < n)
    tl.store(old_ptr + offs, old)


def _vector_add_ptx(element, target, stride=1, n_hint=":16"):
    return _ptx(_vector_add_kernel, f"*{element}:16, *{element}:16, *{element}:16, i32{n_hint}",
                {"STRIDE": stride, "BLOCK": 1024}, target)


@pytest.mark.parametrize("element, instruction, count", [
    ("fp32", "atom.global.acq_rel.gpu.add.v4.f32", 2),
    ("fp16", "atom.global.acq_rel.gpu.add.noftz.v8.f16", 1),
    ("bf16", "atom.global.acq_rel.gpu.add.noftz.v8.bf16", 1)])
def test_float_adds_on_sm_90_are_vector_atoms_as_in_triton(element, instruction, count):
    """1024 contiguous, aligned elements over 128 threads, the mask constant over 16: each
    thread's 8 elements take 16 bytes per atom (Triton's atom.add.v4.f32 / .noftz.v8), the
    PTX declaring ISA 8.1, which vector atoms need."""
    ptx = _vector_add_ptx(element, "sm_90")
    lines = _atom_lines(ptx)
    assert len(lines) == count and all(instruction in l for l in lines), lines
    assert ".version 8.1" in ptx


@pytest.mark.parametrize("text, features", [
    ('asm "atom.global.acq_rel.gpu.add.v4.f32 $0, [$1], {$2, $3, $4, $5};"', "+ptx81"),
    ("atom.global.add.noftz.v8.bf16", "+ptx81"),
    ("; xatom.global.add.v4.f32 (a longer word, not the instruction)", "+ptx80"),
    ('asm "atom.global.acq_rel.gpu.add.f32 $0, [$1], $2;"', "+ptx80")])
def test_the_isa_a_module_declares_follows_its_vector_atoms(text, features):
    """ISA 8.1 where the inline PTX has a vector atom add (a whole word), else sm_90's 8.0."""
    from aotk.backend.ptx import ptx_features
    assert ptx_features("sm_90", "define void @k() {\n" + text + "\n}") == features


def test_vector_atoms_only_where_provable_and_on_sm_90():
    """sm_80 has no vector atom; a strided pointer or a mask that may change inside a
    vector (``n`` without a divisibility hint) keeps one atom per element, and ISA 8.0."""
    for ptx in (_vector_add_ptx("fp32", "sm_80"), _vector_add_ptx("fp32", "sm_90", stride=2),
                _vector_add_ptx("fp32", "sm_90", n_hint="")):
        lines = _atom_lines(ptx)
        assert len(lines) == 8 and not any(".v4." in l or ".v2." in l for l in lines)
        assert ".version 8.0" in ptx


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_vector_atomic_adds_on_gpu(dtype):
    """Two launches add into the same 1008 of 1024 elements (mask at a multiple of 16) with
    16-byte vector atoms: every element gets both adds, each old value is what was there
    before one of them, masked-off lanes read 0 and their elements stay."""
    torch = pytest.importorskip("torch")
    element = getattr(torch, dtype)
    x = torch.randint(1, 5, (2, 1024), device="cuda").to(element)
    start = torch.randint(0, 9, (1024,), device="cuda").to(element)
    ptr, old = start.clone(), torch.empty(2, 1024, device="cuda", dtype=element)
    for program in range(2):
        _vector_add_kernel[(1,)](ptr, x[program], old[program], 1008, STRIDE=1, BLOCK=1024)
    torch.cuda.synchronize()
    kept = torch.arange(1024, device="cuda") < 1008
    expected = torch.where(kept, start + x[0] + x[1], start)
    torch.testing.assert_close(ptr, expected, rtol=0, atol=0)
    torch.testing.assert_close(old[0], torch.where(kept, start, 0), rtol=0, atol=0)
    torch.testing.assert_close(old[1], torch.where(kept, start + x[0], 0), rtol=0, atol=0)


@aotk.jit
def _replicated_kernel(ptr, out_ptr):
    offs = tl.arange(0, 16)   # 16 elements over 128 threads: most threads hold replicas
    tl.store(out_ptr + offs, tl.atomic_add(ptr + offs, 1))


def test_replicated_elements_are_applied_once():
    compiled = aotk.compile(_replicated_kernel, "*i32:16, *i32:16", {})
    atom = [l for l in _atom_lines(compiled.ptx)]
    assert len(atom) == 1 and atom[0].startswith("mov.b32") and "@%p" in atom[0]
    assert "st.shared" in compiled.ptx and compiled.metadata["shared"] >= 64


@aotk.jit
def _debug_kernel(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.device_assert(x >= 0, "x must be non-negative")
    assert n > 0, "n must be positive"
    tl.device_print("x", x)
    tl.debug_barrier()


@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
def test_asserts_only_in_debug_builds(target):
    quiet = _ptx(_debug_kernel, "*fp32:16, i32", {"BLOCK": 64}, target, debug=False)
    loud = _ptx(_debug_kernel, "*fp32:16, i32", {"BLOCK": 64}, target, debug=True)
    assert "__assertfail" not in quiet
    assert loud.count("call.uni __assertfail") == 2
    for ptx in (quiet, loud):
        assert "vprintf" in ptx and "bar.sync 0" in ptx


def test_debug_flag_from_decorator_and_environment(monkeypatch):
    def make(**options):
        @aotk.jit(**options)
        def kernel(x_ptr):
            tl.device_assert(tl.load(x_ptr) > 0)
        return kernel
    types = {"x_ptr": tl.pointer_type(tl.float32)}
    monkeypatch.delenv("AOTK_DEBUG", raising=False)
    assert "device_assert" not in str(make().kir(types))
    assert "device_assert" in str(make(debug=True).kir(types))
    monkeypatch.setenv("AOTK_DEBUG", "1")
    kernel = make()
    assert "device_assert" in str(kernel.kir(types))
    assert "device_assert" not in str(make(debug=False).kir(types))
    monkeypatch.setenv("AOTK_DEBUG", "0")
    assert "device_assert" not in str(kernel.kir(types))   # the flag is part of the key


def test_interpreter_assert_names_file_and_line():
    kernel = aotk.jit(debug=True)(_debug_kernel.fn)
    good = np.arange(4, dtype=np.float32)
    kernel[(1,)](good, 3, BLOCK=4)
    with pytest.raises(AssertionError, match=r"test_atomics\.py:\d+: .*x must be non-negative"):
        kernel[(1,)](good - 2, 3, BLOCK=4)
    with pytest.raises(AssertionError, match="n must be positive"):
        kernel[(1,)](good, 0, BLOCK=4)
    _debug_kernel[(1,)](good - 2, 0, BLOCK=4)   # debug off: nothing is checked


@aotk.jit
def _print_kernel(x_ptr, i_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.device_print("vals", tl.load(x_ptr + offs), tl.load(i_ptr + offs))
    tl.device_print("bits", tl.load(i_ptr + offs), hex=True)
    tl.device_print("done")


def test_interpreter_print_matches_triton_format(capsys):
    _print_kernel[(2,)](np.array([0.5, -2.0], np.float32), np.array([-3, 12], np.int32), BLOCK=2)
    lines = capsys.readouterr().out.splitlines()
    assert lines[:5] == ["pid (0, 0, 0) idx (0) vals: (operand 0) 0.500000",
                         "pid (0, 0, 0) idx (1) vals: (operand 0) -2.000000",
                         "pid (0, 0, 0) idx (0) vals: (operand 1) -3",
                         "pid (0, 0, 0) idx (1) vals: (operand 1) 12",
                         "pid (0, 0, 0) idx (0) bits: 0xfffffffd"]
    assert lines[6] == "pid (0, 0, 0) done" and lines[7].startswith("pid (1, 0, 0)")


def test_print_format_string_in_ptx():
    ptx = _ptx(_print_kernel, "*fp32:16, *i32:16", {"BLOCK": 128})
    text = bytes(int(b) for line in ptx.splitlines() if "printf_format_0" in line and "{" in line
                 for b in line.split("{")[1].split("}")[0].split(",")).decode()
    assert text.startswith("pid (%u, %u, %u) idx (%3u) vals: (operand 0) %f")
    assert ptx.count("call.uni (retval0), vprintf") >= 3


# -- errors -------------------------------------------------------------------------------

@aotk.jit
def _bad_kernel(ptr, OP: tl.constexpr, SEM: tl.constexpr, SCOPE: tl.constexpr):
    offs = tl.arange(0, 16)
    if OP == "xor":
        tl.atomic_xor(ptr + offs, 1, sem=SEM, scope=SCOPE)
    elif OP == "max":
        tl.atomic_max(ptr + offs, 1, sem=SEM, scope=SCOPE)
    elif OP == "cas":
        tl.atomic_cas(ptr + offs, 1, 2, sem=SEM, scope=SCOPE)
    elif OP == "mask":
        tl.atomic_add(ptr + offs, 1, mask=offs)
    else:
        tl.atomic_add(ptr + offs, 1, sem=SEM, scope=SCOPE)


@pytest.mark.parametrize("element,op,sem,scope,message", [
    (tl.float32, "xor", None, None, "atomic_xor does not support float32 elements; supported: "
                                    "int32, uint32, int64, uint64"),
    (tl.float16, "max", None, None, "atomic_max does not support float16"),
    (tl.int8, "add", None, None, "atomic_add does not support int8"),
    (tl.int8, "cas", None, None, "atomic_cas needs 16-, 32- or 64-bit elements, got int8"),
    (tl.int32, "add", "seq_cst", None, "unknown memory semantic sem='seq_cst'; expected one of "
                                       "'relaxed', 'acquire', 'release', 'acq_rel'"),
    (tl.int32, "add", None, "device", "unknown memory scope scope='device'; expected one of "
                                      "'gpu', 'cta', 'sys'"),
    (tl.int32, "mask", None, None, "a mask must be a boolean block"),
])
def test_errors_name_what_is_allowed(element, op, sem, scope, message):
    with pytest.raises(CompilationError, match=message.replace("(", r"\(").replace(")", r"\)")):
        _bad_kernel.kir({"ptr": tl.pointer_type(element)}, {},
                        {"OP": op, "SEM": sem, "SCOPE": scope})


# -- GPU ----------------------------------------------------------------------------------

@pytest.mark.gpu
def test_bf16_atomic_add_on_gpu():
    torch = pytest.importorskip("torch")
    from tests.kernels.atomics import contention_kernel
    x = torch.randint(0, 2, (1000,), device="cuda").to(torch.bfloat16)
    counters = torch.zeros(8, device="cuda", dtype=torch.bfloat16)
    contention_kernel[(8,)](x, counters, 1000, BLOCK=128, SLOTS=8)
    expected = x.float().reshape(125, 8).sum(0)
    torch.testing.assert_close(counters.float(), expected, rtol=0, atol=0)


@pytest.mark.gpu
def test_device_print_and_passing_assert_on_gpu(capfd):
    torch = pytest.importorskip("torch")
    kernel = aotk.jit(debug=True)(_debug_kernel.fn)
    x = torch.arange(4, device="cuda", dtype=torch.float32)
    kernel[(1,)](x, 3, BLOCK=4)
    torch.cuda.synchronize()
    out = capfd.readouterr().out
    assert "pid (0, 0, 0) idx (3) x: 3.000000" in out
