"""Launch arguments -> the types and the Signature a Python launch compiles for.

In: the values passed to ``kernel[grid](...)``: numpy arrays (the interpreter; torch CPU
tensors too with ``AOTK_INTERPRET=1``), torch CUDA tensors or ``__cuda_array_interface__`` objects (the GPU), Python and
numpy scalars. Out:
their element and scalar types (DESIGN.md section 7) and, for a GPU launch, a ``Signature``
specialized like Triton's JIT (pointers 16-byte aligned, integers divisible by 16 or equal
to 1; a kernel's ``do_not_specialize`` parameters get no hint, its
``do_not_specialize_on_alignment`` ones no ":16") with each argument as a (value, ctypes
type) pair for the driver. For ``aotk.load``'s calls: a tensor's dtype, device and declared
layout checked, an error naming the argument where one is wrong.
"""
from __future__ import annotations

import ctypes
import os

import numpy as np

from ..ir import types as T
from ..ir.pointer_layouts import dense_strides, strides_match
from ..ir.signature import SPECIALIZED_HINT, Signature, SignatureParameter
from ..tools.tensor_descriptor import RowStride

NUMPY_DTYPES = {
    np.dtype(np.bool_): T.int1, np.dtype(np.int8): T.int8, np.dtype(np.int16): T.int16,
    np.dtype(np.int32): T.int32, np.dtype(np.int64): T.int64, np.dtype(np.uint8): T.uint8,
    np.dtype(np.uint16): T.uint16, np.dtype(np.uint32): T.uint32, np.dtype(np.uint64): T.uint64,
    np.dtype(np.float16): T.float16, np.dtype(np.float32): T.float32,
    np.dtype(np.float64): T.float64,
}
TYPESTR_DTYPES = {
    "|b1": T.int1, "|i1": T.int8, "<i2": T.int16, "<i4": T.int32, "<i8": T.int64,
    "|u1": T.uint8, "<u2": T.uint16, "<u4": T.uint32, "<u8": T.uint64, "<f2": T.float16,
    "<f4": T.float32, "<f8": T.float64,
}
TORCH_DTYPES = {"torch.bool": T.int1, "torch.int8": T.int8, "torch.int16": T.int16,
                "torch.int32": T.int32, "torch.int64": T.int64, "torch.uint8": T.uint8,
                "torch.uint16": T.uint16, "torch.uint32": T.uint32, "torch.uint64": T.uint64,
                "torch.float16": T.float16, "torch.bfloat16": T.bfloat16,
                "torch.float32": T.float32, "torch.float64": T.float64,
                "torch.float8_e4m3fn": T.float8e4nv, "torch.float8_e5m2": T.float8e5}
SCALAR_CTYPES = {"int1": ctypes.c_bool, "int8": ctypes.c_int8, "int16": ctypes.c_int16,
                 "int32": ctypes.c_int32, "int64": ctypes.c_int64, "uint8": ctypes.c_uint8,
                 "uint16": ctypes.c_uint16, "uint32": ctypes.c_uint32,
                 "uint64": ctypes.c_uint64, "float32": ctypes.c_float,
                 "float64": ctypes.c_double}


def scalar_type_of(value) -> T.DType:
    """The type a runtime scalar argument takes at a Python launch (DESIGN.md section 7)."""
    if isinstance(value, (bool, np.bool_)):
        return T.int1
    if isinstance(value, np.generic):
        return NUMPY_DTYPES[value.dtype]
    if isinstance(value, int):
        if -2**31 <= value < 2**31:
            return T.int32
        if -2**63 <= value < 2**63:
            return T.int64
        if 0 <= value < 2**64:
            return T.uint64
        raise OverflowError(f"integer argument {value} does not fit in 64 bits")
    if isinstance(value, float):
        return T.float32
    raise TypeError(f"unsupported kernel argument of type {type(value).__name__}")


def cuda_array_dtype(obj) -> T.DType:
    """Element type of a torch tensor / ``__cuda_array_interface__`` object."""
    dtype = getattr(obj, "dtype", "")
    if isinstance(dtype, T.DType):   # an array that says its tl type (Triton's TensorWrapper)
        return dtype
    torch_dtype = str(dtype)
    if torch_dtype in TORCH_DTYPES:
        return TORCH_DTYPES[torch_dtype]
    typestr = obj.__cuda_array_interface__["typestr"]
    if typestr not in TYPESTR_DTYPES:
        raise TypeError(f"unsupported CUDA array element type {typestr!r}")
    return TYPESTR_DTYPES[typestr]


def is_cuda_array(value) -> bool:
    # Looked up on the type: evaluating torch's __cuda_array_interface__ property is slow.
    return hasattr(type(value), "__cuda_array_interface__")


def is_array(value) -> bool:
    return isinstance(value, np.ndarray) or is_cuda_array(value)


# Python type -> "numpy", "torch", "cuda" (other ``__cuda_array_interface__`` objects) or
# None: decided once per type, since every launch asks it of each of its arguments.
_array_kinds: dict = {}


def array_kind(cls):
    """What values of Python type ``cls`` are as kernel arguments (see ``_array_kinds``)."""
    kind = _array_kinds.get(cls, False)
    if kind is False:
        if issubclass(cls, np.ndarray):
            kind = "numpy"
        elif not hasattr(cls, "__cuda_array_interface__"):
            kind = None
        else:
            kind = "torch" if cls.__module__.startswith("torch") and \
                hasattr(cls, "get_device") else "cuda"
        _array_kinds[cls] = kind
    return kind


def launch_place(values) -> str:
    """Where a launch with arguments ``values`` runs: "interpreter" (its arrays are all
    numpy arrays or, with ``AOTK_INTERPRET=1``, numpy arrays and unpinned torch CPU
    tensors), "gpu", or "mixed" (numpy arrays beside GPU arrays). One pass that, once a GPU
    array is seen, only looks for numpy ones: every launch makes it."""
    numpy = host = gpu = False
    for value in values:
        cls = type(value)
        if cls is int or cls is float:
            continue
        kind = _array_kinds.get(cls, False)
        if kind is False:
            kind = array_kind(cls)
        if not kind:
            continue
        if kind == "numpy":
            numpy = True
        elif not gpu:
            if getattr(value, "is_cuda", True) is False and not value.is_pinned():
                host = True
            else:
                gpu = True
    if not gpu and (numpy or host) and (not host or interprets_cpu_tensors()):
        return "interpreter"
    return "mixed" if numpy else "gpu"


def interprets_cpu_tensors() -> bool:
    """``AOTK_INTERPRET=1``: launches on torch CPU tensors run on the interpreter, as every
    launch does under Triton's ``TRITON_INTERPRET=1``. Without it such a launch is Triton's
    ValueError, as a compiled launch is in Triton."""
    return os.environ.get("AOTK_INTERPRET", "").lower() in ("1", "true", "yes", "on")


def runs_on_interpreter(arrays) -> bool:
    """Numpy arrays always run on the interpreter; torch CPU tensors (unpinned) with
    ``AOTK_INTERPRET=1``; not where any array is on the GPU (``launch_place``)."""
    return launch_place(arrays) == "interpreter"


def host_bytes(tensor) -> np.ndarray:
    """A uint8 numpy view of a torch CPU tensor's whole storage, starting at the tensor's
    first element: the interpreter's address space then covers every element a kernel can
    reach through strides, and the view's address is ``tensor.data_ptr()``."""
    storage = tensor.untyped_storage()
    whole = np.ctypeslib.as_array((ctypes.c_uint8 * storage.nbytes()).from_address(
        storage.data_ptr())) if storage.nbytes() else np.zeros(0, np.uint8)
    return whole[tensor.data_ptr() - storage.data_ptr():]


def address_of(value) -> int:
    """The device address of a torch tensor or ``__cuda_array_interface__`` object."""
    data_ptr = getattr(value, "data_ptr", None)   # torch: much cheaper than the interface dict
    if data_ptr is not None:
        return data_ptr()
    return int(value.__cuda_array_interface__["data"][0])


def interpreter_types(kernel, runtime_args: dict) -> dict:
    """{param: type} of a launch on host arrays (the interpreter assumes no hints)."""
    types = {}
    for name, value in runtime_args.items():
        if is_cuda_array(value):   # a torch CPU tensor
            types[name] = T.PointerType(cuda_array_dtype(value))
        elif isinstance(value, np.ndarray):
            if value.dtype not in NUMPY_DTYPES:
                raise TypeError(f"{kernel.name}: argument {name!r} has unsupported dtype "
                                f"{value.dtype}")
            types[name] = T.PointerType(NUMPY_DTYPES[value.dtype])
        else:
            types[name] = scalar_type_of(value)
    return types



_current_device = None


def torch_current_device() -> int:
    """The index of torch's current CUDA device: the device of the context a launch from
    this thread runs in. Asked of torch's C binding of cudaGetDevice where it has one (as
    Triton's launcher does: ``torch.cuda.current_device()`` adds a lazy-init check in
    Python to every launch; a CUDA tensor already means torch has initialized CUDA)."""
    return torch_current_device_function()()


def torch_current_device_function():
    """The callable ``torch_current_device`` asks (imports torch on first use)."""
    global _current_device
    if _current_device is None:
        import torch
        _current_device = getattr(torch._C, "_cuda_getDevice", None) or torch.cuda.current_device
    return _current_device


def torch_dtype_names(type_: T.DType) -> tuple:
    """The torch dtypes (as ``str(dtype)``) a pointer to ``type_`` takes: the one of that
    element type, and for 8-bit floats their raw codes as uint8 / int8 too (torch has no
    float8e4b15; Triton's tests pass fp8 codes so)."""
    names = tuple(name for name, dtype in TORCH_DTYPES.items() if dtype == type_)
    return names + (("torch.uint8", "torch.int8") if type_.is_fp8() else ())


def check_dtypes(kernel_name: str, named_values) -> None:
    """Raises TypeError naming the first torch tensor among ``(name, value, pointer type)``
    whose dtype is not what the pointer points to (a float16 tensor where the kernel reads
    float32 would be read as other numbers)."""
    for name, value, pointer in named_values:
        dtype = getattr(value, "dtype", None)
        if dtype is None or not type(value).__module__.startswith("torch"):
            continue
        accepted = torch_dtype_names(pointer.element_ty)
        if str(dtype) not in accepted:
            raise TypeError(f"{kernel_name}: argument {name!r} is a {dtype} tensor, but the "
                            f"kernel takes *{pointer.element_ty.short} ({accepted[0]})")


def check_devices(kernel_name: str, named_values) -> None:
    """Raises ValueError naming the first torch tensor among ``(name, value)`` pairs that a
    launch in the current context cannot use: a CUDA tensor of another device (PyTorch's
    ops refuse mixed devices too; launched anyway, it would fault or quietly read another
    GPU's memory through peer access) or an unpinned CPU tensor. Other arrays and raw
    addresses carry no device and pass unchecked."""
    current = None
    for name, value in named_values:
        get_device = getattr(value, "get_device", None)
        if get_device is None or not type(value).__module__.startswith("torch"):
            continue
        index = get_device()
        if index < 0:
            if value.is_pinned():
                continue   # pinned host memory: every GPU reads it
            raise ValueError(f"{kernel_name}: argument {name!r} is a tensor in CPU memory "
                             f"(device {value.device}); move it to the GPU with .cuda()")
        if current is None:
            current = torch_current_device()
        if index != current:
            raise ValueError(_wrong_device(kernel_name, name, index, current))


def tensor_layout(value):
    """(shape, strides in elements) of a torch tensor or ``__cuda_array_interface__``
    object; None for a raw address, or an array that does not say its shape."""
    if type(value).__module__.startswith("torch"):
        return tuple(value.shape), tuple(value.stride())
    if not is_cuda_array(value):
        return None
    interface = value.__cuda_array_interface__
    if "shape" not in interface:
        return None
    shape = tuple(interface["shape"])
    strides = interface.get("strides")
    if strides is None:   # the interface's way of saying dense row-major
        return shape, dense_strides(shape)
    itemsize = np.dtype(interface["typestr"]).itemsize
    # Byte strides that are no multiple of the element size stay fractions: they match no
    # declaration, and the message shows them.
    return shape, tuple(s // itemsize if s % itemsize == 0 else s / itemsize for s in strides)


def check_layouts(kernel_name: str, layouts, values: dict) -> None:
    """Raises ValueError naming the first tensor whose layout is not what the kernel declares
    (``ir.pointer_layouts.PointerLayout``s): ``values`` maps each parameter to the call's value
    (integers already converted). Raw addresses carry no layout and pass."""
    for layout in layouts:
        found = tensor_layout(values[layout.name])
        if found is None:
            continue
        shape, strides = found
        name = layout.name
        if layout.strides is None:
            if not strides_match(shape, strides, dense_strides(shape)):
                raise ValueError(f"{kernel_name}: argument {name!r} must be contiguous "
                                 f"(row-major strides {dense_strides(shape)} for shape "
                                 f"{shape}), got strides {strides}; pass .contiguous()")
            continue
        if len(shape) != len(layout.strides):
            raise ValueError(f"{kernel_name}: argument {name!r} must have "
                             f"{len(layout.strides)} dimension(s), strides "
                             f"{layout.expected_text(values)}, got a tensor of shape {shape}")
        if not strides_match(shape, strides, layout.expected_strides(shape, values)):
            raise ValueError(f"{kernel_name}: argument {name!r} must have strides "
                             f"{layout.expected_text(values)}, got {strides}")


# Signatures already built, by kernel and argument types and hints: a launch like an
# earlier one (the common case) skips building and checking a new one.
_signatures: dict = {}
# Per array dtype object: the pointer type. A launch passes the same few types and dtypes
# every time, and this lookup (with ``array_kind``) replaces a dozen attribute tests per
# argument on the hot path.
_pointer_types: dict = {}
_INT32_MIN, _INT32_END = -2**31, 2**31


def _pointer_type(value) -> tuple:
    """(the pointer type of a CUDA array, its dtype attribute when that names the type
    alone, else None)."""
    dtype = getattr(value, "dtype", None)
    try:
        found = _pointer_types.get(dtype) if dtype is not None else None
    except TypeError:   # an unhashable dtype attribute
        return T.PointerType(cuda_array_dtype(value)), None
    if found is None:
        found = T.PointerType(cuda_array_dtype(value))
        if dtype is None or str(dtype) not in TORCH_DTYPES and not isinstance(dtype, T.DType):
            return found, None   # typed by its interface's typestr, not by the attribute
        _pointer_types[dtype] = found
    return found, dtype


def specialize(kernel, runtime_args: dict, host_memory: bool = False):
    """The Signature of a GPU launch, from the actual arguments, and per argument its
    (value, ctypes type): ``specialize_values`` with the types paired in."""
    signature, values = specialize_values(kernel, runtime_args, host_memory)
    return signature, list(zip(values, parameter_ctypes(signature)))


_ctypes_by_signature: dict = {}


def parameter_ctypes(signature) -> list:
    """The ctypes type each runtime parameter of ``signature`` is passed as."""
    found = _ctypes_by_signature.get(signature)
    if found is None:
        found = _ctypes_by_signature[signature] = [
            ctypes.c_uint64 if p.type.is_ptr() else SCALAR_CTYPES[p.type.name]
            for p in signature.parameters]
    return found


def specialize_values(kernel, runtime_args: dict, host_memory: bool = False):
    """The Signature of a GPU launch, from the actual arguments, and the value each
    argument is passed as (an array's address). ``kernel.do_not_specialize``: names that get no hint;
    ``kernel.do_not_specialize_on_alignment``: names that get no ":16" (":1" still).
    ``host_memory``: arrays in host memory (numpy, torch CPU tensors) are specialized as
    the same arrays on the GPU would be (``aotk.launch.recording``), not refused.

    Every launch runs this, so each argument adds one code that hashes in C (its hint for
    a 32-bit int, "f" for a float, the dtype object and hint of an array), and the types
    and hints are read back from the codes only for a launch unlike any before."""
    unhinted, unaligned = kernel.do_not_specialize, kernel.do_not_specialize_on_alignment
    values, codes = list(runtime_args.values()), []
    index = -1
    current = None   # torch's current device, asked once a tensor needs it
    for name, value in runtime_args.items():   # in parameter order; None ones are constants
        index += 1
        hint = None
        cls = type(value)
        if cls is int and _INT32_MIN <= value < _INT32_END:
            if name not in unhinted:
                if value == 1:
                    hint = 1
                elif value % SPECIALIZED_HINT == 0 and name not in unaligned:
                    hint = SPECIALIZED_HINT
            codes.append(hint)
            continue
        if cls is float:
            codes.append("f")
            continue
        kind = array_kind(cls)
        divisible = name not in unhinted and name not in unaligned
        if kind == "torch" and not host_memory:
            # A torch tensor: its device checked here (``check_devices``'s rule), since
            # this is the one pass over the arguments a launch makes.
            device = value.get_device()
            if device < 0:
                if not value.is_pinned():
                    raise ValueError(f"{kernel.name}: argument {name!r} is a tensor in CPU "
                                     f"memory (device {value.device}); move it to the GPU "
                                     "with .cuda(), or pin it (or set AOTK_INTERPRET=1 to run "
                                     "the launch on aotk's interpreter)")
            elif device != current:
                if current is None:
                    current = torch_current_device()
                if device != current:
                    raise ValueError(_wrong_device(kernel.name, name, device, current))
            dtype = value.dtype
            if dtype in _pointer_types or _pointer_type(value)[1] is not None:
                address = value.data_ptr()
                if divisible and address % SPECIALIZED_HINT == 0:
                    hint = SPECIALIZED_HINT
                values[index] = address
                codes.append((dtype, hint))
                continue
        if host_memory and isinstance(value, np.ndarray):
            type_ = T.PointerType(NUMPY_DTYPES[value.dtype])
            if divisible and value.ctypes.data % SPECIALIZED_HINT == 0:
                hint = SPECIALIZED_HINT
            values[index] = value.ctypes.data
        elif kind in ("torch", "cuda"):
            if not host_memory and getattr(value, "is_cuda", True) is False \
                    and not value.is_pinned():
                # torch CPU tensors expose data_ptr too: a host address the GPU cannot read.
                raise ValueError(f"{kernel.name}: argument {name!r} is a tensor in CPU memory "
                                 f"(device {value.device}); move it to the GPU with .cuda(), "
                                 "or pin it (or set AOTK_INTERPRET=1 to run the launch on "
                                 "aotk's interpreter)")
            type_, dtype = _pointer_type(value)
            address = address_of(value)
            if divisible and address % SPECIALIZED_HINT == 0:
                hint = SPECIALIZED_HINT
            values[index] = address
            if dtype is not None:
                codes.append(("p", dtype, hint))
                continue
        else:
            type_ = scalar_type_of(value)
            if type_.is_int() and not type_.is_bool() and name not in unhinted:
                if value == 1:
                    hint = 1
                elif divisible and value % SPECIALIZED_HINT == 0:
                    hint = SPECIALIZED_HINT
                elif divisible and isinstance(value, RowStride) and \
                        value % value.elements_per_16_bytes == 0:
                    # A host descriptor's stride: hinted on 16 bytes, not only on 16 elements.
                    hint = value.elements_per_16_bytes
        codes.append(("t", type_, hint))
    key = (kernel, tuple(runtime_args), tuple(codes))
    signature = _signatures.get(key)
    if signature is None:
        signature = _signatures[key] = Signature(tuple(
            SignatureParameter(name, *_decode(code)) for name, code in zip(runtime_args, codes)))
    return signature, values


def _decode(code) -> tuple:
    """(type, hint) of one of ``specialize``'s argument codes."""
    if code is None or type(code) is int:
        return T.int32, code
    if code == "f":
        return T.float32, None
    if len(code) == 2:   # a torch tensor's (dtype, hint)
        return _pointer_types[code[0]], code[1]
    kind, what, hint = code
    return (_pointer_types[what] if kind == "p" else what), hint


def _wrong_device(kernel_name: str, name: str, index: int, current: int) -> str:
    return (f"{kernel_name}: argument {name!r} is on cuda:{index} but the current device is "
            f"cuda:{current}; launch inside `with torch.cuda.device({index}):` or call "
            f"torch.cuda.set_device({index}) first")
