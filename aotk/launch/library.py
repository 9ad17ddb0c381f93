"""``aotk.load(path)``: a built ``lib<name>.so`` as Python callables.

In: the library path. Out: a ``Library`` whose attributes are its kernels. ctypes
signatures are built once from ``<name>_info()``; each call converts arguments (torch
tensors, ``__cuda_array_interface__`` objects, raw int addresses, Python numbers, and a
``TensorDescriptor`` for a parameter the manifest types ``tensordesc<...>``, which passes
its base, shape and strides) and raises ``AotkError`` with the library's own message when
the status is not 0. A launch runs in the thread's current CUDA context (torch's current
device); a torch tensor of another device, or in unpinned CPU memory, is a ValueError
naming the argument (``arguments.check_devices``), never a launch on the wrong device; one
whose dtype is not the pointer's element type a TypeError (``arguments.check_dtypes``);
one whose shape and strides are not the layout the manifest declares for that pointer
(``contiguous`` / ``strides``, ``ir/pointer_layouts.py``) a ValueError
(``arguments.check_layouts``).
"""
from __future__ import annotations

import ctypes
import json
import os

from ..errors import AotkError
from ..ir.pointer_layouts import layouts_from_json
from ..ir.types import parse_type
from .arguments import (check_devices, check_dtypes, check_layouts, torch_current_device,
                        torch_current_device_function, torch_dtype_names)

_SCALAR_CTYPES = {"i1": ctypes.c_bool, "i8": ctypes.c_int8, "i16": ctypes.c_int16,
                  "i32": ctypes.c_int32, "i64": ctypes.c_int64, "u8": ctypes.c_uint8,
                  "u16": ctypes.c_uint16, "u32": ctypes.c_uint32, "u64": ctypes.c_uint64,
                  "fp16": ctypes.c_uint16, "bf16": ctypes.c_uint16, "fp32": ctypes.c_float,
                  "fp64": ctypes.c_double}


def _pointer_value(value, kernel, name):
    data_ptr = getattr(value, "data_ptr", None)
    if data_ptr is not None:
        return data_ptr()
    interface = getattr(type(value), "__cuda_array_interface__", None)
    if interface is not None:
        return int(value.__cuda_array_interface__["data"][0])
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise TypeError(f"{kernel}: argument {name!r} must be a CUDA array, a tensor or an integer "
                    f"address, not {type(value).__name__}")


def _stream_value(stream):
    if stream is None:
        return None
    if isinstance(stream, int):
        return stream
    handle = getattr(stream, "cuda_stream", None)
    if handle is None:
        raise TypeError("stream= takes None, an integer handle or an object with .cuda_stream")
    return handle


class Kernel:
    def __init__(self, library, name: str, description: dict):
        self.name = name
        self.description = description
        self._library = library
        prefix = f"{library.name}_{name}"
        self._params = [(p["name"], parse_type(p["type"])) for p in description["params"]]
        arg_types = [ctypes.c_void_p if t.is_ptr() else _SCALAR_CTYPES[t.short]
                     for _, t in self._params]
        self._launch = getattr(library.handle, prefix)
        self._launch.argtypes = [ctypes.c_void_p] + arg_types
        self._launch.restype = ctypes.c_int
        self._select = getattr(library.handle, f"{prefix}_select")
        self._select.argtypes = arg_types
        self._select.restype = ctypes.c_int
        self._variant_name = getattr(library.handle, f"{prefix}_variant_name")
        self._variant_name.argtypes = [ctypes.c_int]
        self._variant_name.restype = ctypes.c_char_p
        self._converters = [self._converter(n, t) for n, t in self._params]
        self._pointer_layouts = layouts_from_json(description.get("pointer_layouts", {}),
                                                  [n for n, _ in self._params])
        self._descriptors = description.get("descriptors", {})
        # The arguments a call takes: a parameter name, or a descriptor's name standing for
        # its base, shape and strides (which a call may also pass one by one).
        parts = {p: d for d, info in self._descriptors.items() for p in info["params"]}
        self._arguments = []
        for param, _ in self._params:
            if param not in parts:
                self._arguments.append(param)
            elif parts[param] not in self._arguments:
                self._arguments.append(parts[param])
        # The specialized caller becomes this kernel's own __call__ (Python looks __call__
        # up on the type): one Python frame per launch.
        fast = self._compile_fast_call() if not self._descriptors else \
            (lambda self, *args, stream=None: self._call(args, stream))
        self.__class__ = type(f"Kernel_{name}", (Kernel,), {"__call__": fast})

    def _converter(self, name, type_):
        kernel = self.name
        if type_.is_ptr():
            return lambda v: _pointer_value(v, kernel, name)
        if type_.is_floating():
            def to_float(v):
                if not isinstance(v, (int, float)) or isinstance(v, bool):
                    raise TypeError(f"{kernel}: argument {name!r} must be a number, "
                                    f"not {type(v).__name__}")
                return v
            return to_float

        def to_int(v):
            if not isinstance(v, int) and not hasattr(v, "__index__"):
                raise TypeError(f"{kernel}: argument {name!r} must be an integer, "
                                f"not {type(v).__name__}")
            return int(v)
        return to_int

    def _expand_descriptors(self, args):
        """The arguments with each TensorDescriptor replaced by its base, shape and strides,
        checked against the block shape and padding the kernel was built for."""
        expanded = []
        for name, value in zip(self._arguments, args):
            info = self._descriptors.get(name)
            if info is None:
                expanded.append(value)
                continue
            block_shape = getattr(value, "block_shape", None)
            if block_shape is None or not hasattr(value, "runtime_arguments"):
                raise TypeError(f"{self.name}: argument {name!r} must be a TensorDescriptor "
                                f"(aotk.tools.tensor_descriptor), not {type(value).__name__}")
            if [int(b) for b in block_shape] != info["block_shape"] or \
                    value.padding != info["padding"]:
                raise ValueError(f"{self.name}: argument {name!r} is a descriptor of block "
                                 f"{list(block_shape)} with {value.padding} padding, but the "
                                 f"library was built for block {info['block_shape']} with "
                                 f"{info['padding']} padding")
            expanded += list(value.runtime_arguments(name).values())
        return expanded

    def _convert(self, args):
        if self._descriptors and len(args) == len(self._arguments):
            args = self._expand_descriptors(args)
        if len(args) != len(self._converters):
            names = ", ".join(n for n, _ in self._params)
            raise TypeError(f"{self.name}() takes {len(self._converters)} arguments ({names}), "
                            f"got {len(args)}")
        return args, [convert(a) for convert, a in zip(self._converters, args)]

    def _compile_fast_call(self):
        """A caller specialized to this kernel's parameters, for the common case of tensors
        with ``data_ptr()`` and plain numbers: no per-argument loop or converter calls.
        Anything else (raw addresses, other CUDA arrays, bad types) takes the general path,
        which converts or explains."""
        names = [f"a{i}" for i in range(len(self._params))]
        passed = [f"{n}.data_ptr()" if t.is_ptr() else n for n, (_, t) in zip(names, self._params)]
        unpack = f"    {', '.join(names)}{',' if len(names) == 1 else ''} = args\n" if names else ""
        # Tensors all on the current device and of the pointers' dtypes (else the general
        # path explains which is not). The dtypes are torch's objects, bound at the first
        # call the general path accepts (torch is not imported before).
        pointers = [n for n, (_, t) in zip(names, self._params) if t.is_ptr()]
        same_dtype = "".join(f"        if {n}.dtype is not dtype_{n}:\n"
                             f"            return general(args, stream)\n" for n in pointers)
        same_device = "".join(f"        if {n}.get_device() != device:\n"
                              f"            return general(args, stream)\n"
                              for n in pointers[1:])
        if pointers:
            same_device = (f"        device = {pointers[0]}.get_device()\n"
                           f"        if device < 0 or device != current_device():\n"
                           f"            return general(args, stream)\n" + same_device)
        # The declared layouts, only for the kernels that declare some: the exact strides
        # (else the general path decides, which also forgives dimensions of size 1).
        variable = {n: v for v, (n, _) in zip(names, self._params)}
        same_layout = ""
        for layout in self._pointer_layouts:
            tensor = variable[layout.name]
            if layout.strides is None:
                test = f"not {tensor}.is_contiguous()"
            else:
                entries = [variable[e] if isinstance(e, str) else str(e) for e in layout.strides]
                test = f"{tensor}.stride() != ({', '.join(entries)},)"
            same_layout += f"        if {test}:\n            return general(args, stream)\n"
        source = (f"def call(self, *args, stream=None):\n"
                  f"    if len(args) != {len(names)}:\n"
                  f"        return general(args, stream)\n"
                  f"{unpack}"
                  f"    try:\n"
                  f"{same_dtype}"
                  f"{same_device}"
                  f"{same_layout}"
                  f"        status = launch(stream if stream is None or stream.__class__ is int "
                  f"else stream_value(stream), {', '.join(passed)})\n"
                  f"    except (AttributeError, ArgumentError, ImportError):\n"
                  f"        return general(args, stream)\n"
                  f"    if status:\n"
                  f"        fail(status)\n")
        scope = {"launch": self._launch, "stream_value": _stream_value, "general": self._call,
                 "fail": self._fail, "ArgumentError": ctypes.ArgumentError,
                 "current_device": torch_current_device}
        # Until bound, a dtype no tensor has: the first call takes the general path.
        unbound = object()
        scope.update({f"dtype_{n}": unbound for n in pointers})
        self._fast_dtypes = (scope, [(f"dtype_{n}", t) for n, (_, t)
                                     in zip(names, self._params) if t.is_ptr()])
        exec(compile(source, f"<aotk launcher {self._library.name}_{self.name}>", "exec"), scope)
        return scope["call"]

    def _bind_torch_dtypes(self):
        """Gives the fast caller torch's dtype objects to compare with (by identity), and
        torch's current-device function itself (no wrapper frame per launch)."""
        import torch
        scope, slots = self._fast_dtypes
        for slot, type_ in slots:
            scope[slot] = getattr(torch, torch_dtype_names(type_.element_ty)[0][len("torch."):])
        scope["current_device"] = torch_current_device_function()
        self._fast_dtypes = None

    def _call(self, args, stream):
        args, converted = self._convert(args)
        qualified = f"{self._library.name}_{self.name}"
        check_dtypes(qualified, [(n, a, t) for (n, t), a in zip(self._params, args)
                                 if t.is_ptr()])
        check_devices(qualified, [(n, a) for (n, t), a in zip(self._params, args) if t.is_ptr()])
        if self._pointer_layouts:
            check_layouts(qualified, self._pointer_layouts, {
                n: a if t.is_ptr() else c for (n, t), a, c in zip(self._params, args, converted)})
        if getattr(self, "_fast_dtypes", None) and any(
                type(a).__module__.startswith("torch") for a in args):
            self._bind_torch_dtypes()
        status = self._launch(_stream_value(stream), *converted)
        if status != 0:
            self._fail(status)

    def _fail(self, status):
        raise AotkError(f"{self._library.name}_{self.name}: "
                        f"{self._library.last_error()} (status {status})")

    def __call__(self, *args, stream=None):   # replaced per kernel by _compile_fast_call
        self._call(args, stream)

    def select(self, *args):
        """The variant that would run for these arguments, or None; needs no GPU."""
        index = self._select(*self._convert(args)[1])
        if index < 0:
            return None
        return self._variant_name(index).decode()

    def __repr__(self) -> str:
        return f"<aotk kernel {self._library.name}.{self.name}: {len(self.description['variants'])} variants>"


class Library:
    def __init__(self, path):
        path = os.fspath(path)
        base = os.path.basename(path)
        if not (base.startswith("lib") and base.endswith(".so")):
            raise ValueError(f"{path}: expected a lib<name>.so built by aotk")
        self.path = path
        self.name = base[3:-3]
        self.handle = ctypes.CDLL(os.path.abspath(path))
        info = getattr(self.handle, f"{self.name}_info", None)
        if info is None:
            raise ValueError(f"{path}: not an aotk library ({self.name}_info is missing)")
        info.restype = ctypes.c_char_p
        self.info = json.loads(info().decode())
        self._last_error = getattr(self.handle, f"{self.name}_last_error")
        self._last_error.restype = ctypes.c_char_p
        self.kernels = self.info["kernels"]
        self._entries = {name: Kernel(self, name, description)
                         for name, description in self.kernels.items()}
        for name, entry in self._entries.items():
            if not hasattr(type(self), name):
                # Instance attributes: no __getattr__ on the launch path.
                setattr(self, name, entry)

    def last_error(self) -> str:
        return self._last_error().decode()

    def modules_loaded(self) -> int:
        """Kernel modules this library has loaded: one per variant and CUDA context (each
        device's primary context, for torch users) where that variant ran."""
        return self.handle[f"{self.name}_modules_loaded"]()

    def __getattr__(self, name):
        entries = self.__dict__.get("_entries", {})
        if name in entries:
            return entries[name]
        raise AttributeError(f"library {self.__dict__.get('name')!r} has no kernel {name!r}")

    def __dir__(self):
        return list(super().__dir__()) + list(self._entries)


def load(path) -> Library:
    return Library(path)
