"""``@aotk.jit``: a kernel function plus its launchers.

``kernel[grid](*args, **constexprs)`` runs the kir interpreter when the arrays are numpy
arrays, and compiles + launches on the GPU when they expose ``__cuda_array_interface__``.
Compiled kernels are specialized like Triton's JIT: pointers 16-byte aligned, integers
divisible by 16 or equal to 1.
"""
from __future__ import annotations

import ast
import inspect
import linecache
import os
import textwrap

import numpy as np

from .errors import CompilationError
from .frontend.codegen import SourceInfo, generate_kir
from .ir import types as T
from .ir.signature import Signature
from .language.core import constexpr

_NUMPY_TO_DTYPE = {
    np.dtype(np.bool_): T.int1, np.dtype(np.int8): T.int8, np.dtype(np.int16): T.int16,
    np.dtype(np.int32): T.int32, np.dtype(np.int64): T.int64, np.dtype(np.uint8): T.uint8,
    np.dtype(np.uint16): T.uint16, np.dtype(np.uint32): T.uint32, np.dtype(np.uint64): T.uint64,
    np.dtype(np.float16): T.float16, np.dtype(np.float32): T.float32,
    np.dtype(np.float64): T.float64,
}
_TYPESTR_TO_DTYPE = {
    "|b1": T.int1, "|i1": T.int8, "<i2": T.int16, "<i4": T.int32, "<i8": T.int64,
    "|u1": T.uint8, "<u2": T.uint16, "<u4": T.uint32, "<u8": T.uint64, "<f2": T.float16,
    "<f4": T.float32, "<f8": T.float64,
}


def scalar_type_of(value) -> T.DType:
    """The type a runtime scalar argument takes at a Python launch (DESIGN.md section 7)."""
    if isinstance(value, (bool, np.bool_)):
        return T.int1
    if isinstance(value, np.generic):
        return _NUMPY_TO_DTYPE[value.dtype]
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


_TORCH_DTYPES = {"torch.bool": T.int1, "torch.int8": T.int8, "torch.int16": T.int16,
                 "torch.int32": T.int32, "torch.int64": T.int64, "torch.uint8": T.uint8,
                 "torch.uint16": T.uint16, "torch.uint32": T.uint32, "torch.uint64": T.uint64,
                 "torch.float16": T.float16, "torch.bfloat16": T.bfloat16,
                 "torch.float32": T.float32, "torch.float64": T.float64}


def cuda_array_dtype(obj) -> T.DType:
    """Element type of a torch tensor / ``__cuda_array_interface__`` object."""
    torch_dtype = str(getattr(obj, "dtype", ""))
    if torch_dtype in _TORCH_DTYPES:
        return _TORCH_DTYPES[torch_dtype]
    typestr = obj.__cuda_array_interface__["typestr"]
    if typestr not in _TYPESTR_TO_DTYPE:
        raise TypeError(f"unsupported CUDA array element type {typestr!r}")
    return _TYPESTR_TO_DTYPE[typestr]


class JITFunction:
    def __init__(self, fn, debug=None):
        self.fn = fn
        # None: follow AOTK_DEBUG at each compile; True/False: fixed by the decorator.
        self.debug_option = debug
        self.name = fn.__name__
        self.__name__ = fn.__name__
        self.__doc__ = fn.__doc__
        self.__module__ = fn.__module__
        signature = inspect.signature(fn)
        self.param_names = list(signature.parameters)
        self.defaults = {name: p.default for name, p in signature.parameters.items()
                         if p.default is not inspect.Parameter.empty}
        self.constexpr_names = {name for name, p in signature.parameters.items()
                                if _is_constexpr_annotation(p.annotation, fn)}
        self.runtime_names = [n for n in self.param_names if n not in self.constexpr_names]
        self.source_info, self._source = _read_source(fn)
        self._tree = None
        self._kir_cache: dict = {}
        self._device_cache: dict = {}
        self.parse()   # syntax errors surface at decoration, pointing at the file

    def parse(self) -> ast.Module:
        if self._tree is None:
            try:
                self._tree = ast.parse(self._source)
            except SyntaxError as exc:
                raise CompilationError(f"invalid syntax: {exc.msg}", self.source_info.filename,
                                       (exc.lineno or 1) + self.source_info.first_line - 1,
                                       (exc.offset or 1) - 1 + self.source_info.indent) from None
        return self._tree

    def bind_arguments(self, args, kwargs) -> dict:
        """Positional + keyword + defaults -> {param name: value}, for inlined calls."""
        if len(args) > len(self.param_names):
            raise TypeError(f"{self.name}() takes {len(self.param_names)} arguments, "
                            f"got {len(args)}")
        bound = dict(zip(self.param_names, args))
        for key, value in kwargs.items():
            if key not in self.param_names:
                raise TypeError(f"{self.name}() got an unexpected argument {key!r}")
            bound[key] = value
        for name in self.param_names:
            if name not in bound:
                if name not in self.defaults:
                    raise TypeError(f"{self.name}() missing argument {name!r}")
                bound[name] = constexpr(self.defaults[name])
            elif name in self.constexpr_names and not isinstance(bound[name], constexpr):
                if hasattr(bound[name], "handle"):
                    raise TypeError(f"argument {name!r} of {self.name}() is a tl.constexpr "
                                    "and needs a compile-time value")
                bound[name] = constexpr(bound[name])
        return bound

    @property
    def debug(self) -> bool:
        """Whether device asserts are compiled in: ``@aotk.jit(debug=...)``, else AOTK_DEBUG."""
        if self.debug_option is not None:
            return bool(self.debug_option)
        return os.environ.get("AOTK_DEBUG", "").lower() in ("1", "true", "yes", "on")

    def kir(self, signature, hints: dict | None = None, constants: dict | None = None,
            debug: bool | None = None):
        """The kir specialized on a ``Signature`` (or {param: type} with ``hints``), the
        constexpr values and the debug flag (memoized)."""
        debug = self.debug if debug is None else bool(debug)
        if not isinstance(signature, Signature):
            signature = Signature.from_types(signature, hints, self.runtime_names)
        constants = dict(constants or {})
        for name in self.constexpr_names:
            if name not in constants:
                if name not in self.defaults:
                    raise TypeError(f"{self.name}: missing value for constexpr {name!r}")
                constants[name] = self.defaults[name]
        unknown = set(constants) - self.constexpr_names
        if unknown:
            raise TypeError(f"{self.name}: {sorted(unknown)} are not tl.constexpr parameters")
        key = (signature.cache_key,
               tuple(sorted((k, repr(v)) for k, v in constants.items())), debug)
        if key not in self._kir_cache:
            self._kir_cache[key] = generate_kir(self, signature.types, signature.hints,
                                                constants, debug)
        return self._kir_cache[key]

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.run(grid, args, kwargs)

    def run(self, grid, args, kwargs):
        num_warps = kwargs.pop("num_warps", 4)
        num_stages = kwargs.pop("num_stages", 3)
        stream = kwargs.pop("stream", None)
        runtime_args, constants = self._split_arguments(args, kwargs)
        grid = grid(dict(constants)) if callable(grid) else grid
        grid = tuple(int(g) for g in (grid if isinstance(grid, (tuple, list)) else (grid,)))
        if not 1 <= len(grid) <= 3:
            raise ValueError(f"grid must have 1 to 3 dimensions, got {grid}")
        grid = grid + (1,) * (3 - len(grid))
        arrays = [a for a in runtime_args.values() if _is_array(a)]
        on_cpu = [isinstance(a, np.ndarray) for a in arrays]
        if arrays and all(on_cpu):
            return self._run_interpreter(grid, runtime_args, constants)
        if any(on_cpu):
            raise TypeError(f"{self.name}: cannot mix numpy arrays and CUDA arrays in one launch")
        from .runtime.launch import launch_on_device
        return launch_on_device(self, grid, runtime_args, constants, num_warps, num_stages, stream)

    def _split_arguments(self, args, kwargs):
        if len(args) > len(self.param_names):
            raise TypeError(f"{self.name}() takes {len(self.param_names)} arguments, got {len(args)}")
        bound = dict(zip(self.param_names, args))
        for key, value in kwargs.items():
            if key not in self.param_names:
                raise TypeError(f"{self.name}() got an unexpected argument {key!r}")
            if key in bound:
                raise TypeError(f"{self.name}() got multiple values for {key!r}")
            bound[key] = value
        runtime_args, constants = {}, {}
        for name in self.param_names:
            if name not in bound:
                if name not in self.defaults:
                    raise TypeError(f"{self.name}() missing argument {name!r}")
                bound[name] = self.defaults[name]
            value = bound[name]
            if name in self.constexpr_names:
                constants[name] = value.value if isinstance(value, constexpr) else value
            else:
                runtime_args[name] = value
        return runtime_args, constants

    def _run_interpreter(self, grid, runtime_args, constants):
        from . import interpreter
        param_types = {}
        for name, value in runtime_args.items():
            if isinstance(value, np.ndarray):
                if value.dtype not in _NUMPY_TO_DTYPE:
                    raise TypeError(f"{self.name}: argument {name!r} has unsupported dtype {value.dtype}")
                param_types[name] = T.PointerType(_NUMPY_TO_DTYPE[value.dtype])
            else:
                param_types[name] = scalar_type_of(value)
        function = self.kir(param_types, constants=constants)
        interpreter.run(function, grid, [runtime_args[p.name] for p in function.params])

    def __call__(self, *args, **kwargs):
        raise RuntimeError(f"{self.name} is an @aotk.jit kernel: launch it with "
                           f"{self.name}[grid](...) or call it from another kernel")

    def __repr__(self) -> str:
        return f"JITFunction({self.fn.__module__}:{self.name})"


def _is_array(value) -> bool:
    # Looked up on the type: evaluating torch's __cuda_array_interface__ property is slow.
    return isinstance(value, np.ndarray) or hasattr(type(value), "__cuda_array_interface__")


def _is_constexpr_annotation(annotation, fn) -> bool:
    if annotation is constexpr:
        return True
    if isinstance(annotation, str):   # `from __future__ import annotations`
        return annotation.split(".")[-1] == "constexpr"
    return False


def _read_source(fn):
    filename = inspect.getsourcefile(fn) or fn.__code__.co_filename
    lines, first_line = inspect.getsourcelines(fn)
    raw = "".join(lines)
    source = textwrap.dedent(raw)
    indent = len(lines[0]) - len(lines[0].lstrip())
    # Drop decorators so line 1 of the parsed tree is the `def` line.
    tree = ast.parse(source)
    def_line = tree.body[0].lineno
    kept = source.splitlines(keepends=True)[def_line - 1:]
    linecache.checkcache(filename)
    info = SourceInfo(filename, first_line + def_line - 1, [l.rstrip("\n") for l in kept], indent)
    return info, "".join(kept)


def jit(fn=None, *, debug=None, **options):
    """Decorator: ``@aotk.jit`` or ``@aotk.jit(...)``. ``debug=True`` compiles device asserts
    in (default: the AOTK_DEBUG environment variable); other options are accepted for Triton
    parity."""
    if fn is None:
        return lambda f: JITFunction(f, debug)
    return JITFunction(fn, debug)
