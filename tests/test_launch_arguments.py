"""Launch arguments -> types and the Signature a GPU launch compiles for (no GPU needed:
CUDA arrays are stood in for by objects with ``__cuda_array_interface__``)."""
import ctypes

import numpy as np
import pytest

import aotk
import aotk.language as tl
from aotk.ir import types as T
from aotk.ir.signature import Signature
from aotk.launch.arguments import (cuda_array_dtype, interpreter_types, scalar_type_of,
                                   specialize)
from aotk.tools.tensor_descriptor import TensorDescriptor


class FakeCudaArray:
    """What the launcher reads of a CUDA array: the interface's typestr and address."""

    def __init__(self, address: int, typestr: str = "<f4"):
        self.address, self.typestr = address, typestr

    @property
    def __cuda_array_interface__(self):
        return {"typestr": self.typestr, "data": (self.address, False), "shape": (1,),
                "version": 3}


class FakeTensor(FakeCudaArray):
    """A torch tensor's cheaper path: dtype and data_ptr()."""

    def __init__(self, address: int, dtype: str):
        super().__init__(address, "")
        self.dtype = dtype

    def data_ptr(self) -> int:
        return self.address


@aotk.jit
def _kernel(x_ptr, y_ptr, n, m, flag, scale, BLOCK: tl.constexpr):
    pass


def _arguments(**changes):
    arguments = {"x_ptr": FakeCudaArray(4096), "y_ptr": FakeCudaArray(4100, "<i4"), "n": 1,
                 "m": 48, "flag": True, "scale": 0.5}
    arguments.update(changes)
    return arguments


def test_specialize_gives_a_signature_like_tritons_jit():
    signature, values = specialize(_kernel, _arguments())
    assert isinstance(signature, Signature)
    assert str(signature) == "*fp32:16, *i32, i32:1, i32:16, i1, fp32"
    assert signature.names == ("x_ptr", "y_ptr", "n", "m", "flag", "scale")
    assert values == [(4096, ctypes.c_uint64), (4100, ctypes.c_uint64), (1, ctypes.c_int32),
                      (48, ctypes.c_int32), (True, ctypes.c_bool), (0.5, ctypes.c_float)]


@pytest.mark.parametrize("n, m, text", [(0, 7, "i32:16, i32"), (2**40, 17, "i64:16, i32"),
                                        (-16, 2**63, "i32:16, u64:16")])
def test_integer_hints(n, m, text):
    signature, _ = specialize(_kernel, _arguments(n=n, m=m))
    assert str(signature).split(", ")[2:4] == text.split(", ")


def test_same_kinds_of_arguments_give_the_same_signature_object():
    first, _ = specialize(_kernel, _arguments())
    again, values = specialize(_kernel, _arguments(x_ptr=FakeCudaArray(8192), m=64))
    assert again is first and values[0][0] == 8192
    other, _ = specialize(_kernel, _arguments(x_ptr=FakeCudaArray(8200)))
    assert other != first and other["x_ptr"].hint is None


def test_torch_tensors_are_typed_by_dtype_and_addressed_by_data_ptr():
    signature, values = specialize(_kernel, _arguments(x_ptr=FakeTensor(256, "torch.bfloat16")))
    assert signature["x_ptr"].type == T.PointerType(T.bfloat16)
    assert values[0] == (256, ctypes.c_uint64)


def test_argument_types():
    assert scalar_type_of(True) is T.int1
    assert scalar_type_of(np.float64(1)) is T.float64
    assert scalar_type_of(2**31) is T.int64
    assert scalar_type_of(2**63) is T.uint64
    with pytest.raises(OverflowError, match="does not fit in 64 bits"):
        scalar_type_of(2**64)
    with pytest.raises(TypeError, match="unsupported kernel argument of type str"):
        scalar_type_of("x")
    assert cuda_array_dtype(FakeCudaArray(0, "<f2")) is T.float16
    with pytest.raises(TypeError, match="unsupported CUDA array element type '<c8'"):
        cuda_array_dtype(FakeCudaArray(0, "<c8"))


def test_interpreter_types_take_no_hints():
    arguments = {"x_ptr": np.zeros(4, np.float32), "y_ptr": np.zeros(4, np.int32), "n": 1,
                 "m": 48, "flag": True, "scale": 0.5}
    types = interpreter_types(_kernel, arguments)
    assert str(Signature.from_types(types)) == "*fp32, *i32, i32, i32, i1, fp32"
    with pytest.raises(TypeError, match="argument 'x_ptr' has unsupported dtype complex64"):
        interpreter_types(_kernel, {**arguments, "x_ptr": np.zeros(4, np.complex64)})


# -- @aotk.jit's Triton keywords ------------------------------------------------------


def test_do_not_specialize_drops_every_hint_of_those_parameters():
    kernel = aotk.jit(do_not_specialize=["x_ptr", 2, "m"])(_kernel.fn)
    assert kernel.do_not_specialize == {"x_ptr", "n", "m"}
    signature, _ = specialize(kernel, _arguments())
    assert str(signature) == "*fp32, *i32, i32, i32, i1, fp32"
    assert str(specialize(_kernel, _arguments())[0]) == "*fp32:16, *i32, i32:1, i32:16, i1, fp32"


def test_do_not_specialize_on_alignment_drops_16_and_keeps_1():
    kernel = aotk.jit(do_not_specialize_on_alignment=("x_ptr", "n", 3))(_kernel.fn)
    signature, _ = specialize(kernel, _arguments())
    assert str(signature) == "*fp32, *i32, i32:1, i32, i1, fp32"
    signature, _ = specialize(kernel, _arguments(n=32, m=1))
    assert str(signature) == "*fp32, *i32, i32, i32:1, i1, fp32"


def test_one_name_or_index_is_taken_as_a_list_of_one():
    assert aotk.jit(do_not_specialize="n")(_kernel.fn).do_not_specialize == {"n"}
    assert aotk.jit(do_not_specialize_on_alignment=0)(_kernel.fn) \
        .do_not_specialize_on_alignment == {"x_ptr"}


@pytest.mark.parametrize("keywords, message", [
    ({"do_not_specialize": ["count"]}, "do_not_specialize names 'count', which is not a "
                                       "parameter of _kernel (x_ptr, y_ptr, n, m, flag, "
                                       "scale, BLOCK)"),
    ({"do_not_specialize_on_alignment": [7]}, "do_not_specialize_on_alignment index 7 is out "
                                              "of range: _kernel has 7 parameters"),
])
def test_unknown_parameters_in_the_keywords_are_named(keywords, message):
    with pytest.raises(ValueError) as error:
        aotk.jit(**keywords)(_kernel.fn)
    assert str(error.value) == message


def test_tritons_other_jit_keywords_are_accepted():
    kernel = aotk.jit(noinline=True, repr=lambda _: "k", launch_metadata=None, version=2,
                      debug=True)(_kernel.fn)
    assert kernel.debug and not kernel.do_not_specialize
    assert str(specialize(kernel, _arguments())[0]) == str(specialize(_kernel, _arguments())[0])


@pytest.mark.parametrize("keyword, message", [
    ("num_warps", "aotk.jit() got an unexpected keyword argument 'num_warps' (known: debug, "
                  "do_not_specialize, do_not_specialize_on_alignment, noinline, repr, "
                  "launch_metadata, version)"),
    ("do_not_specialise", "aotk.jit() got an unexpected keyword argument 'do_not_specialise'; "
                          "did you mean 'do_not_specialize'?"),
])
def test_an_unknown_jit_keyword_is_a_type_error_naming_it(keyword, message):
    with pytest.raises(TypeError) as error:
        aotk.jit(**{keyword: 1})
    assert str(error.value) == message
    with pytest.raises(TypeError) as error:
        aotk.jit(_kernel.fn, **{keyword: 1})
    assert str(error.value) == message


@aotk.jit
def _scale_rows(x_ptr, out_ptr, stride_x, stride_out, n, scale, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * stride_x + cols, mask=cols < n, other=0.0)
    tl.store(out_ptr + row * stride_out + cols, (x * scale).to(out_ptr.dtype.element_ty),
             mask=cols < n)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_torch_cpu_tensors_run_on_the_interpreter_views_and_bf16_included(dtype, monkeypatch):
    """As under Triton's TRITON_INTERPRET=1: with AOTK_INTERPRET=1 a launch whose tensors
    are all in CPU memory runs on the CPU. A view (storage offset, row stride of its base)
    reads the base's memory."""
    torch = pytest.importorskip("torch")
    monkeypatch.setenv("AOTK_INTERPRET", "1")
    dtype = getattr(torch, dtype)
    base = torch.randn(6, 40).to(dtype)
    x = base[1:5, 3:33]                   # 4 rows of 30, storage offset 43, row stride 40
    out = torch.zeros(4, 30, dtype=dtype)
    _scale_rows[(4,)](x, out, x.stride(0), out.stride(0), 30, 2.0, BLOCK=32)
    torch.testing.assert_close(out, (x.float() * 2.0).to(dtype), rtol=0, atol=0)
    assert torch.count_nonzero(base[0]) == base[0].numel()   # the base is left alone



def test_record_launches_gives_the_gpu_specialization_of_each_launch():
    x = np.arange(64, dtype=np.float32).reshape(2, 32)
    out = np.zeros_like(x)
    with aotk.record_launches() as launches:
        _scale_rows[(2,)](x, out, 32, 32, 30, 2.0, BLOCK=32)
        _scale_rows[(1,)](x[1:], out, 32, 32, 17, 2.0, BLOCK=32, num_warps=2)
    assert [launch.grid for launch in launches] == [(2, 1, 1), (1, 1, 1)]
    first, second = launches
    assert first.kernel is _scale_rows and first.constants == {"BLOCK": 32}
    assert (first.num_warps, first.num_stages, second.num_warps) == (4, 3, 2)
    # Divisibility as a GPU launch would see it: x[1:] starts 128 bytes in, n=17 is not.
    hints = {p.name: p.hint for p in first.signature.parameters}
    assert hints == {"x_ptr": 16, "out_ptr": 16, "stride_x": 16, "stride_out": 16,
                     "n": None, "scale": None}
    assert {p.name: p.hint for p in second.signature.parameters}["n"] is None
    assert first.specialization() != second.specialization()
    compiled = aotk.compile(first.kernel, first.signature, first.constants, first.num_warps,
                            first.num_stages, target="sm_80")
    assert ".entry _scale_rows" in compiled.ptx
    np.testing.assert_array_equal(out[1, :30], x[1, :30] * 2)   # the first launch ran


@aotk.jit
def _warps_as_constexpr(out_ptr, num_warps: tl.constexpr, num_stages: tl.constexpr):
    tl.store(out_ptr + tl.arange(0, 2), tl.join(num_warps, num_stages).reshape(2) + 0)


def test_a_constexpr_named_like_a_launch_option_gets_the_keyword_too():
    """As in Triton: ``num_warps=8`` is the kernel's own constexpr and the launch option."""
    out = np.zeros(2, np.int32)
    with aotk.record_launches() as launches:
        _warps_as_constexpr[(1,)](out, num_warps=8, num_stages=2)
    np.testing.assert_array_equal(out, [8, 2])
    assert (launches[0].num_warps, launches[0].num_stages) == (8, 2)
    assert launches[0].constants == {"num_warps": 8, "num_stages": 2}


def test_without_aotk_interpret_a_cpu_tensor_is_tritons_value_error(monkeypatch):
    """As a compiled Triton launch (test_core's test_pointer_arguments): ValueError, naming
    the argument, whether or not a GPU is there."""
    torch = pytest.importorskip("torch")
    monkeypatch.delenv("AOTK_INTERPRET", raising=False)
    x = torch.zeros(4, 32)
    with pytest.raises(ValueError, match="argument 'x_ptr' is a tensor in CPU memory.*"
                                         "AOTK_INTERPRET=1"):
        _scale_rows[(1,)](x, x.clone(), 32, 32, 32, 1.0, BLOCK=32)


def test_arrays_of_another_dtype_get_another_signature():
    """The signature cache keys arrays by their dtype object: a launch with other dtypes
    is not given the first one's signature."""
    half, _ = specialize(_kernel, _arguments(x_ptr=FakeTensor(256, "torch.float16")))
    single, _ = specialize(_kernel, _arguments(x_ptr=FakeTensor(256, "torch.float32")))
    assert half["x_ptr"].type == T.PointerType(T.float16)
    assert single["x_ptr"].type == T.PointerType(T.float32)
    again, _ = specialize(_kernel, _arguments(x_ptr=FakeTensor(512, "torch.float16")))
    assert again is half


def test_launch_parameters_are_packed_as_c_lays_out_a_struct():
    """One buffer for cuLaunchKernel's ``extra``: every parameter at the offset a C struct
    of the same members gives it (each aligned to its size), with its value."""
    from aotk.launch.device import LAUNCH_PARAM_BUFFER_SIZE, ParameterPacking
    members = [ctypes.c_bool, ctypes.c_uint64, ctypes.c_int32, ctypes.c_float, ctypes.c_int8,
               ctypes.c_double, ctypes.c_int16, ctypes.c_int64]
    values = [True, 2**40 + 16, -7, 0.5, -3, 2.25, 1000, -2**40]

    class Expected(ctypes.Structure):
        _fields_ = [(f"p{i}", member) for i, member in enumerate(members)]

    extra = ParameterPacking(members).pack(values)
    assert extra[2] == LAUNCH_PARAM_BUFFER_SIZE and extra[4] is None
    size = ctypes.c_size_t.from_address(extra[3]).value
    packed = ctypes.string_at(extra[1], size)
    expected = bytes(Expected(*values))
    # The struct's own size is rounded up to its alignment; the parameters end before.
    assert packed == expected[:size] and len(expected) - size < 8


class FakeTorchTensor(FakeTensor):
    """What the launcher reads of a torch tensor: its device besides dtype and address."""
    __module__ = "torch.fake"

    def __init__(self, address: int, device: int, pinned: bool = False):
        super().__init__(address, "torch.float32")
        self.device_index, self.pinned = device, pinned
        self.device = f"cuda:{device}" if device >= 0 else "cpu"

    def get_device(self) -> int:
        return self.device_index

    def is_pinned(self) -> bool:
        return self.pinned


def test_a_torch_tensor_on_another_device_than_the_current_one_is_refused(monkeypatch):
    """The launch's one pass over the arguments checks torch tensors' devices: another GPU
    (it would fault or read through peer access) or unpinned host memory is a ValueError
    naming the argument; pinned host memory and the current GPU are taken."""
    import aotk.launch.arguments as arguments
    monkeypatch.setattr(arguments, "torch_current_device", lambda: 0)
    signature, values = specialize(_kernel, _arguments(x_ptr=FakeTorchTensor(4096, 0),
                                                       y_ptr=FakeTorchTensor(4100, -1, True)))
    assert str(signature).startswith("*fp32:16, *fp32, ") and values[0] == (4096, ctypes.c_uint64)
    with pytest.raises(ValueError, match=r"_kernel: argument 'y_ptr' is on cuda:1 but the "
                                         r"current device is cuda:0"):
        specialize(_kernel, _arguments(x_ptr=FakeTorchTensor(4096, 0),
                                       y_ptr=FakeTorchTensor(4096, 1)))
    with pytest.raises(ValueError, match=r"argument 'x_ptr' is a tensor in CPU memory"):
        specialize(_kernel, _arguments(x_ptr=FakeTorchTensor(4096, -1)))


@aotk.jit
def _with_defaults(x_ptr, n, scale=2.0, BLOCK: tl.constexpr = 64, EVEN: tl.constexpr = True):
    pass


def test_the_generated_binder_binds_as_split_arguments_does():
    """The launch binds arguments through a function generated with the kernel's own
    parameters (Python's binding, in C); its answer is _split_arguments' answer, in the
    same order (a None argument is a constant in parameter order: fla passes
    cu_seqlens=None to every kernel), and what it does not handle (descriptors, a call
    that does not bind) goes there."""
    x = FakeCudaArray(4096)
    for args, kwargs in [((x, 10), {}), ((x,), {"n": 10, "BLOCK": tl.constexpr(128)}),
                         ((x, 10, 0.5, 32), {"EVEN": False}), ((None, 10), {}),
                         ((x, None, None), {"BLOCK": tl.constexpr(16)})]:
        expected = _with_defaults._split_arguments(args, dict(kwargs))
        bound = _with_defaults._binder(*args, **kwargs)
        assert [list(part.items()) for part in bound] == \
            [list(part.items()) for part in expected]
    descriptor = TensorDescriptor(x, [64, 64], [64, 1], [16, 16])
    assert _with_defaults._binder(descriptor, 10) is None
    with pytest.raises(TypeError):
        _with_defaults._binder(x, 10, bogus=1)
    with pytest.raises(TypeError, match=r"_with_defaults\(\) got an unexpected argument 'bogus'"):
        _with_defaults[(1,)](x, 10, bogus=1)
    with pytest.raises(TypeError, match=r"_with_defaults\(\) missing argument 'n'"):
        _with_defaults[(1,)](x)
