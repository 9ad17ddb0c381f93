"""``@aotk.jit``: a kernel function plus its launchers.

``kernel[grid](*args, **constexprs)`` runs the kir interpreter when the arrays are numpy
arrays (or torch CPU tensors, with ``AOTK_INTERPRET=1`` as Triton's ``TRITON_INTERPRET``),
and compiles + launches on the GPU (``aotk.launch.device``) when they expose
``__cuda_array_interface__``. Compiled kernels are specialized like Triton's JIT: pointers
16-byte aligned, integers divisible by 16 or equal to 1, except for the parameters named in
``do_not_specialize`` (no hint) and ``do_not_specialize_on_alignment`` (no ":16").
"""
from __future__ import annotations

from functools import cached_property

import numpy as np

from .errors import suggestion
from .frontend.kernel import KernelFunction
from .language.core import constexpr
from .launch.arguments import host_bytes, interpreter_types, is_array, launch_place
from .launch.device import launch_on_device
from .launch.recording import observe
from .options import CompileOptions
from .tools.tensor_descriptor import TensorDescriptor

# Triton's @jit keywords that change nothing here: aotk inlines every call (noinline),
# and has no profiler hooks (repr, launch_metadata) or cache tag (version).
_IGNORED_OPTIONS = ("noinline", "repr", "launch_metadata", "version")
_OPTIONS = ("debug", "do_not_specialize", "do_not_specialize_on_alignment") + _IGNORED_OPTIONS


_MISSING = object()   # an argument the launch did not pass
# Launch options a call may pass beside the kernel's arguments (and ``stream``).
_LAUNCH_OPTIONS = frozenset(("num_warps", "num_stages", "maxnreg", "num_ctas",
                             "enable_fp_fusion"))


class JITFunction(KernelFunction):
    """An ``@aotk.jit`` kernel: launched with ``kernel[grid](...)``, inlined when called
    from another kernel."""

    def __init__(self, fn, debug=None, do_not_specialize=(), do_not_specialize_on_alignment=()):
        super().__init__(fn, debug)
        self.do_not_specialize = self._parameter_names("do_not_specialize", do_not_specialize)
        self.do_not_specialize_on_alignment = self._parameter_names(
            "do_not_specialize_on_alignment", do_not_specialize_on_alignment)

    def _parameter_names(self, option: str, entries) -> frozenset:
        """Triton's spelling: parameter names or indices into all parameters (or one)."""
        if isinstance(entries, (str, int)):
            entries = (entries,)
        names = set()
        for entry in entries:
            if isinstance(entry, int) and not isinstance(entry, bool):
                if not 0 <= entry < len(self.param_names):
                    raise ValueError(f"{option} index {entry} is out of range: {self.name} "
                                     f"has {len(self.param_names)} parameters")
                entry = self.param_names[entry]
            elif entry not in self.param_names:
                raise ValueError(f"{option} names {entry!r}, which is not a parameter of "
                                 f"{self.name} ({', '.join(self.param_names)})")
            names.add(entry)
        return frozenset(names)

    @cached_property
    def _param_set(self) -> frozenset:
        """The parameter names as a set: O(1) membership on the launch's hot path."""
        return frozenset(self.param_names)

    @cached_property
    def _binder(self):
        """A function generated for this kernel's parameters that binds a launch's
        arguments as Python binds a call's (in C: positions, keywords, defaults) and returns
        (runtime arguments, constexpr values) as ``_split_arguments`` would, or None where
        an argument needs its rules (a TensorDescriptor); a TypeError where the call
        does not bind, which ``_split_arguments`` then words. None for parameter names that
        cannot be the generated function's own."""
        names = self.param_names
        if not all(n.isidentifier() and not n.startswith("_aotk_") for n in names) or \
                len(set(names)) != len(names):
            return None
        runtime = [n for n in names if n not in self.constexpr_names]
        constexprs = [n for n in names if n in self.constexpr_names]
        with_default = [n in self.defaults for n in names]
        if any(with_default[i] and not with_default[i + 1] for i in range(len(names) - 1)):
            return None   # a default before a parameter without one: no Python signature
        def constant(n):
            return f"{n}.value if isinstance({n}, _aotk_cx) else {n}"
        descriptor = " or ".join(f"type({n}) is _aotk_td" for n in runtime) or "False"
        # A None argument is a compile-time None (``_split_arguments``): those launches
        # (fla passes cu_seqlens=None to every kernel) bind in parameter order, one by one.
        none = " or ".join(f"{n} is None" for n in runtime) or "False"
        one_by_one = "".join(
            f"        _aotk_x[{n!r}] = {constant(n)}\n" if n in self.constexpr_names else
            f"        if {n} is None:\n            _aotk_x[{n!r}] = None\n"
            f"        else:\n            _aotk_r[{n!r}] = {n}\n" for n in names)
        source = (f"def _aotk_bind({', '.join(names)}):\n"
                  f"    if {descriptor}:\n        return None\n"
                  f"    if {none}:\n        _aotk_r, _aotk_x = {{}}, {{}}\n{one_by_one}"
                  f"        return _aotk_r, _aotk_x\n"
                  f"    return {{{', '.join(f'{n!r}: {n}' for n in runtime)}}}, "
                  f"{{{', '.join(f'{n!r}: {constant(n)}' for n in constexprs)}}}\n")
        scope = {"_aotk_td": TensorDescriptor, "_aotk_cx": constexpr}
        exec(compile(source, f"<aotk binder of {self.name}>", "exec"), scope)
        binder = scope["_aotk_bind"]
        binder.__defaults__ = tuple(self.defaults[n] for n in names if n in self.defaults) or None
        return binder

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self._run(grid, args, kwargs)

    def run(self, *args, grid, warmup=False, **kwargs):
        """Triton's ``JITFunction.run``: ``kernel[grid](...)`` as a call, and what a wrapper
        (``aotk.autotune``, a library's own Autotuner subclass) launches through. With
        ``warmup``, the launch's specialization is compiled and nothing runs."""
        return self._run(grid, args, kwargs, warmup)

    def warmup(self, *args, grid, **kwargs):
        """Compiles what ``kernel[grid](*args, **kwargs)`` would run, and launches nothing."""
        return self._run(grid, args, kwargs, True)

    def _run(self, grid, args, kwargs, warmup=False):
        # A launch option is also bound to a kernel parameter of the same name, as in
        # Triton (kernels declare ``num_warps: tl.constexpr`` and are launched with
        # ``num_warps=num_warps``).
        num_warps, num_stages, maxnreg, num_ctas, fp_fusion = 4, 3, None, 1, True
        if not _LAUNCH_OPTIONS.isdisjoint(kwargs):
            take = kwargs.get if "num_warps" in self._param_set else kwargs.pop
            num_warps = take("num_warps", 4)
            take = kwargs.get if "num_stages" in self._param_set else kwargs.pop
            num_stages = take("num_stages", 3)
            take = kwargs.get if "maxnreg" in self._param_set else kwargs.pop
            maxnreg = take("maxnreg", None)
            take = kwargs.get if "num_ctas" in self._param_set else kwargs.pop
            num_ctas = take("num_ctas", 1)
            take = kwargs.get if "enable_fp_fusion" in self._param_set else kwargs.pop
            fp_fusion = take("enable_fp_fusion", True)
            if maxnreg is not None or num_ctas != 1 or fp_fusion is not True:
                # checks them, or raises
                CompileOptions(maxnreg=maxnreg, num_ctas=num_ctas, enable_fp_fusion=fp_fusion)
        stream = kwargs.pop("stream", None) if "stream" in kwargs else None
        bound, binder = None, self._binder
        if binder is not None:
            try:
                bound = binder(*args, **kwargs)
            except TypeError:   # worded by _split_arguments, which raises it again
                bound = None
        runtime_args, constants = bound or self._split_arguments(args, kwargs)
        # As in Triton, a grid function sees every argument of the launch by name.
        grid = grid({**runtime_args, **constants}) if callable(grid) else grid
        grid = tuple(map(int, grid if isinstance(grid, (tuple, list)) else (grid,)))
        if not 1 <= len(grid) <= 3:
            raise ValueError(f"grid must have 1 to 3 dimensions, got {grid}")
        grid = grid + (1,) * (3 - len(grid))
        if not warmup:
            observe(self, grid, runtime_args, constants, num_warps, num_stages)
        place = launch_place(runtime_args.values())
        if place == "interpreter":
            if warmup:   # what the interpreter would run, generated (errors surface here)
                self.kir(interpreter_types(self, runtime_args), constants=constants,
                         num_warps=num_warps)
                return None
            return self._run_interpreter(grid, runtime_args, constants, num_warps)
        if place == "mixed":
            raise TypeError(f"{self.name}: cannot mix numpy arrays and CUDA arrays in one launch")
        return launch_on_device(self, grid, runtime_args, constants, num_warps, num_stages, stream,
                                maxnreg, fp_fusion, compile_only=warmup, num_ctas=num_ctas)

    def _split_arguments(self, args, kwargs):
        param_names, param_set = self.param_names, self._param_set
        if len(args) > len(param_names):
            raise TypeError(f"{self.name}() takes {len(param_names)} arguments, got {len(args)}")
        bound = dict(zip(param_names, args))
        for key in kwargs:
            if key not in param_set:
                raise TypeError(f"{self.name}() got an unexpected argument {key!r}")
            if key in bound:
                raise TypeError(f"{self.name}() got multiple values for {key!r}")
        bound.update(kwargs)
        constexpr_names, defaults = self.constexpr_names, self.defaults
        runtime_args, constants = {}, {}
        for name in param_names:
            value = bound.get(name, _MISSING)
            if value is _MISSING:
                if name not in defaults:
                    raise TypeError(f"{self.name}() missing argument {name!r}")
                value = defaults[name]
            if name in constexpr_names:
                constants[name] = value.value if isinstance(value, constexpr) else value
            elif type(value) is int or type(value) is float:   # the common case, first
                runtime_args[name] = value
            elif value is None:
                # As in Triton: a None argument is a compile-time None in this
                # specialization (``if ptr is not None:`` folds) and is not passed.
                constants[name] = None
            elif isinstance(value, TensorDescriptor):
                # Specialized on its block shape and padding; base, shape and strides are
                # passed as runtime arguments of their own.
                constants[name] = value.layout()
                runtime_args.update(value.runtime_arguments(name))
            else:
                runtime_args[name] = value
        return runtime_args, constants

    def _run_interpreter(self, grid, runtime_args, constants, num_warps):
        from . import interpreter
        function = self.kir(interpreter_types(self, runtime_args), constants=constants,
                            num_warps=num_warps)
        values = {name: host_bytes(value) if is_array(value) and not isinstance(value, np.ndarray)
                  else value for name, value in runtime_args.items()}
        interpreter.run(function, grid, [values[p.name] for p in function.params])

    def __call__(self, *args, **kwargs):
        raise RuntimeError(f"{self.name} is an @aotk.jit kernel: launch it with "
                           f"{self.name}[grid](...) or call it from another kernel")

    def __repr__(self) -> str:
        return f"JITFunction({self.fn.__module__}:{self.name})"


def jit(fn=None, *, debug=None, **options):
    """Decorator: ``@aotk.jit`` or ``@aotk.jit(...)``. ``debug=True`` compiles device asserts
    in (default: the AOTK_DEBUG environment variable). Triton's other keywords are taken:
    ``do_not_specialize`` and ``do_not_specialize_on_alignment`` (parameter names or
    indices) as Triton does at a GPU launch; ``noinline``, ``repr``, ``launch_metadata`` and
    ``version`` change nothing. Any other keyword is a TypeError."""
    for key in options:
        if key not in _OPTIONS:
            raise TypeError(f"aotk.jit() got an unexpected keyword argument {key!r}"
                            f"{suggestion(key, _OPTIONS)}")
    specialization = {key: options[key] for key in
                      ("do_not_specialize", "do_not_specialize_on_alignment") if key in options}

    def decorate(function):
        return JITFunction(function, debug, **specialization)
    return decorate if fn is None else decorate(fn)
