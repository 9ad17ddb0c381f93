"""``tl.inline_asm_elementwise``, the hardware registers of ``tl.extra.cuda``
(``globaltimer``, ``smid``) and its grid dependency controls (``gdc_wait``,
``gdc_launch_dependents``): the PTX they compile to for sm_80 / sm_90 (ptxas accepts it),
the constraint checks, the interpreter's answers, and the GPU results (test_core's cases)."""
import numpy as np
import pytest

import aotk
import aotk.language as tl
from aotk.errors import CompilationError


@aotk.jit
def _funnel_shift(x_ptr, y_ptr, z_ptr, n: tl.constexpr, BLOCK: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, BLOCK))
    y = tl.load(y_ptr + tl.arange(0, BLOCK))
    s = tl.full([BLOCK], n, tl.int32)
    z = tl.inline_asm_elementwise("shf.l.wrap.b32 $0, $1, $2, $3;", "=r,r, r, r", [x, y, s],
                                  dtype=tl.int32, is_pure=True, pack=1)
    tl.store(z_ptr + tl.arange(0, BLOCK), z)


@aotk.jit
def _packed_bytes(x_ptr, y_ptr, BLOCK: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, BLOCK))
    y = tl.inline_asm_elementwise("and.b32 $0, $1, 0x1F1F1F1F;\n shl.b32 $0, $0, 3;", "=r,r",
                                  [x], dtype=tl.int8, is_pure=True, pack=4)
    tl.store(y_ptr + tl.arange(0, BLOCK), y)


@aotk.jit
def _through_pointers(x_ptr, y_ptr, BLOCK: tl.constexpr):
    tl.inline_asm_elementwise("ld.global.b8 $0, [$1]; shl.b32 $0, $0, 3; st.global.b8 [$2], $0;",
                              "=r,l,l", [x_ptr + tl.arange(0, BLOCK), y_ptr + tl.arange(0, BLOCK)],
                              dtype=tl.int8, is_pure=False, pack=1)


@aotk.jit
def _two_outputs(a_ptr, b_ptr, c_ptr, d_ptr, BLOCK: tl.constexpr):
    a = tl.load(a_ptr + tl.arange(0, BLOCK))
    b = tl.load(b_ptr + tl.arange(0, BLOCK))
    c, d = tl.inline_asm_elementwise("sub.u32 $0, $2, $3; // \"C = A - B\"\n"
                                     "sub.u32 $1, $3, $2;", "=r,=r,r,r", [a, b],
                                     dtype=(tl.uint32, tl.uint32), is_pure=True, pack=1)
    tl.store(c_ptr + tl.arange(0, BLOCK), c)
    tl.store(d_ptr + tl.arange(0, BLOCK), d)


@aotk.jit
def _packed_two_outputs(a_ptr, b_ptr, c_ptr, d_ptr, BLOCK: tl.constexpr):
    a = tl.load(a_ptr + tl.arange(0, BLOCK))
    b = tl.load(b_ptr + tl.arange(0, BLOCK))
    c, d = tl.inline_asm_elementwise(
        """
        {
            .reg .b8 tmp<4>;
            mov.b32 {tmp0, tmp1, tmp2, tmp3}, $8;
            cvt.u32.u8 $0, tmp0;
            cvt.u32.u8 $1, tmp1;
            cvt.u32.u8 $2, tmp2;
            cvt.u32.u8 $3, tmp3;
        }
        cvt.rn.f32.s32 $4, $0;
        cvt.rn.f32.s32 $5, $1;
        cvt.rn.f32.s32 $6, $2;
        cvt.rn.f32.s32 $7, $3;
        max.f32 $4, $4, $9;
        max.f32 $5, $5, $10;
        max.f32 $6, $6, $11;
        max.f32 $7, $7, $12;
        """, "=r,=r,=r,=r,=r,=r,=r,=r,r,r,r,r,r", [a, b], dtype=(tl.int32, tl.float32),
        is_pure=True, pack=4)
    tl.store(c_ptr + tl.arange(0, BLOCK), c)
    tl.store(d_ptr + tl.arange(0, BLOCK), d)


COMPILED = [
    (_funnel_shift, "*u32, *u32, *i32", {"n": 17, "BLOCK": 128}, "shf.l.wrap.b32"),
    (_packed_bytes, "*u8, *u8", {"BLOCK": 512}, "0x1F1F1F1F"),
    (_through_pointers, "*u8, *u8", {"BLOCK": 512}, "ld.global.b8"),
    (_two_outputs, "*u32, *u32, *u32, *u32", {"BLOCK": 512}, "sub.u32"),
    (_packed_two_outputs, "*u8, *fp32, *i32, *fp32", {"BLOCK": 512}, "cvt.u32.u8"),
]


@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
@pytest.mark.parametrize("kernel,signature,constants,text", COMPILED,
                         ids=[c[0].__name__ for c in COMPILED])
def test_the_assembly_reaches_the_ptx_and_ptxas_takes_it(target, kernel, signature, constants,
                                                         text):
    compiled = aotk.compile(kernel, signature, constants, target=target)
    assert text in compiled.ptx
    assert compiled.cubin   # ptxas assembled it


def test_a_packed_run_takes_four_bytes_in_one_register():
    compiled = aotk.compile(_packed_bytes, "*u8, *u8", {"BLOCK": 512}, target="sm_90")
    # 512 bytes over 128 threads: one packed run of 4 per thread.
    assert compiled.ptx.count("0x1F1F1F1F") == 1


def test_impure_assembly_is_kept_though_nothing_uses_its_result():
    compiled = aotk.compile(_through_pointers, "*u8, *u8", {"BLOCK": 512}, target="sm_90")
    assert compiled.ptx.count("st.global.b8") == 4   # 512 elements / 128 threads


def test_the_interpreter_names_the_builtin_it_cannot_run():
    x = np.arange(128, dtype=np.uint32)
    with pytest.raises(Exception, match="inline_asm_elementwise runs only on the GPU"):
        _funnel_shift[(1,)](x, x.copy(), np.zeros(128, np.int32), n=17, BLOCK=128)


@aotk.jit
def _wrong_constraints(x_ptr, WHAT: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, 16))
    if WHAT == "count":
        tl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r,r", [x], dtype=tl.int32,
                                  is_pure=True, pack=1)
    elif WHAT == "pack":
        tl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [x], dtype=tl.int32,
                                  is_pure=True, pack=3)
    elif WHAT == "no_dtype":
        tl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [x], dtype=(), is_pure=True,
                                  pack=1)


@pytest.mark.parametrize("what,message", [
    ("count", "name 1 outputs and 2 inputs, but 1 result"),
    ("pack", "pack must be a power of two"),
    ("no_dtype", "needs at least one result dtype"),
])
def test_constraints_that_do_not_match_the_arguments_are_one_clear_error(what, message):
    with pytest.raises(CompilationError, match=message):
        aotk.compile(_wrong_constraints, "*i32", {"WHAT": what}, target="sm_90")


@aotk.jit
def _timer(out_ptr, n):
    start = tl.extra.cuda.globaltimer()
    total = 0
    for i in range(n):
        total += i
    end = tl.extra.cuda.globaltimer()
    tl.store(out_ptr, start)
    tl.store(out_ptr + 1, end)
    tl.store(out_ptr + 2, total.to(tl.int64))


@aotk.jit
def _smid(out_ptr):
    tl.store(out_ptr + tl.program_id(0), tl.extra.cuda.smid())


def test_the_timer_reads_twice_and_moves_forward_on_the_interpreter():
    out = np.zeros(3, np.int64)
    _timer[(1,)](out, 1000)
    assert out[1] >= out[0] > 0 and out[2] == sum(range(1000))
    compiled = aotk.compile(_timer, "*i64, i32", {}, target="sm_90")
    assert compiled.ptx.count("%globaltimer") == 2


def test_smid_reads_the_register_once():
    out = np.full(4, -1, np.int32)
    _smid[(4,)](out)
    assert (out == 0).all()   # the interpreter's one multiprocessor
    compiled = aotk.compile(_smid, "*i32", {}, target="sm_80")
    assert compiled.ptx.count("%smid") == 1


@aotk.jit
def _dependent_copy(x_ptr, y_ptr, BLOCK: tl.constexpr):
    tl.extra.cuda.gdc_wait()          # the producer's writes are visible after this
    offsets = tl.arange(0, BLOCK)
    values = tl.tuple((tl.load(x_ptr + offsets), 2))
    tl.static_assert(isinstance(values, tl.tuple) and isinstance(slice(0, 1), tl.slice))
    tl.extra.cuda.gdc_launch_dependents()
    tl.store(y_ptr + offsets, values[0] * values[1])


def test_grid_dependency_controls_stay_in_order_and_do_nothing_on_the_interpreter():
    x = np.arange(64, dtype=np.float32)
    y = np.zeros_like(x)
    _dependent_copy[(1,)](x, y, BLOCK=64)
    np.testing.assert_array_equal(y, 2 * x)
    ptx = aotk.compile(_dependent_copy, "*fp32, *fp32", {"BLOCK": 64}, target="sm_90").ptx
    wait, launch = ptx.index("griddepcontrol.wait;"), ptx.index("griddepcontrol.launch_dependents;")
    assert wait < ptx.index("ld.global") and ptx.index("ld.global") < launch < ptx.index("st.global")


@pytest.mark.gpu
def test_grid_dependency_controls_on_the_gpu():
    torch = pytest.importorskip("torch")
    x = torch.randn(256, device="cuda")
    y = torch.zeros_like(x)
    _dependent_copy[(1,)](x, y, BLOCK=256)
    assert torch.equal(y, 2 * x)


@pytest.mark.gpu
def test_the_assembly_on_the_gpu_computes_test_cores_answers():
    torch = pytest.importorskip("torch")
    rng = np.random.RandomState(17)
    x, y = (rng.randint(0, 2**32, 128, dtype=np.uint64).astype(np.uint32) for _ in range(2))
    z = torch.zeros(128, dtype=torch.int32, device="cuda")
    _funnel_shift[(1,)](torch.from_numpy(x.view(np.int32)).cuda(),
                        torch.from_numpy(y.view(np.int32)).cuda(), z, n=17, BLOCK=128)
    expected = ((y.astype(np.uint64) << 17) | (x >> 15)).astype(np.uint32)
    np.testing.assert_array_equal(z.cpu().numpy().view(np.uint32), expected)

    bytes_in = torch.randint(0, 256, (512,), dtype=torch.uint8, device="cuda")
    shifted = torch.empty_like(bytes_in)
    _packed_bytes[(1,)](bytes_in, shifted, BLOCK=512)
    assert torch.equal(shifted, (bytes_in & 0x1F) << 3)

    stored = torch.zeros_like(bytes_in)
    _through_pointers[(1,)](bytes_in, stored, BLOCK=512)
    assert torch.equal(stored, bytes_in << 3)

    a = torch.randint(0, 2**31, (512,), dtype=torch.int32, device="cuda")
    b = torch.randint(0, 2**31, (512,), dtype=torch.int32, device="cuda")
    c, d = torch.empty_like(a), torch.empty_like(a)
    _two_outputs[(1,)](a, b, c, d, BLOCK=512)
    assert torch.equal(c, a - b) and torch.equal(d, b - a)

    small = torch.randint(0, 256, (512,), dtype=torch.uint8, device="cuda")
    floats = torch.randn(512, device="cuda") * 200
    ints, maxima = torch.empty(512, dtype=torch.int32, device="cuda"), torch.empty_like(floats)
    _packed_two_outputs[(1,)](small, floats, ints, maxima, BLOCK=512)
    assert torch.equal(ints, small.int())
    assert torch.equal(maxima, torch.maximum(small.float(), floats))


@pytest.mark.gpu
def test_the_timer_and_smid_on_the_gpu():
    torch = pytest.importorskip("torch")
    out = torch.zeros(3, dtype=torch.int64, device="cuda")
    _timer[(1,)](out, 100000)
    assert out[1] > out[0]
    sms = torch.full((1024,), -1, dtype=torch.int32, device="cuda")
    _smid[(1024,)](sms)
    count = torch.cuda.get_device_properties(0).multi_processor_count
    assert ((sms >= 0) & (sms < count)).all() and sms.unique().numel() > 1
