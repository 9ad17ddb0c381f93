"""``@aotk.autotune``, ``@aotk.heuristics`` and ``aotk.Config`` with Triton's signatures.

In: an ``@aotk.jit`` kernel (or another of these wrappers) and the configurations or
heuristics. Out: a launchable wrapper, ``kernel[grid](...)``, that stacks with the others
in any order as in Triton, and whose ``.fn`` chain leads to the JITFunction (what
``aotk build`` compiles, with the constants a manifest variant gives).

What a launch does, as in Triton: heuristics are evaluated at every call, on the call's
arguments, and passed as constexprs. An autotuned launch on the GPU computes its tuning key
(the values of the ``key`` arguments and the dtypes of all arguments); the first launch
with a new key measures every configuration the ``prune_configs_by`` hooks keep (with
``do_bench``, honouring ``reset_to_zero`` / ``restore_value`` and the hooks, so that the
measuring leaves the arguments as it found them), keeps the fastest in memory and on disk
(``aotk.launch.autotuning``: keyed by GPU, kernel source and key, so a new process measures
nothing again) and launches it. A configuration that does not compile or launch is timed
as infinite. On the CPU interpreter nothing is measured: a configuration already in
``cache`` for the key runs, else the first one the hooks keep, as ``aotk build`` without a
tuning file would choose.
``AOTK_PRINT_AUTOTUNING=1`` prints each tuning (Triton's TRITON_PRINT_AUTOTUNING).
"""
from __future__ import annotations

import math
import os
import sys
import time
from functools import cached_property


class Config:
    """One configuration: constexpr values (``kwargs``) and launch options."""

    def __init__(self, kwargs, num_warps=4, num_stages=3, num_ctas=1, maxnreg=None,
                 pre_hook=None):
        self.kwargs = dict(kwargs)
        self.num_warps = num_warps
        self.num_stages = num_stages
        self.num_ctas = num_ctas
        self.maxnreg = maxnreg
        self.pre_hook = pre_hook

    def launch_options(self) -> dict:
        """The launch options (num_warps, num_stages; maxnreg and num_ctas where set)."""
        options = {"num_warps": self.num_warps, "num_stages": self.num_stages}
        if self.maxnreg is not None:
            options["maxnreg"] = self.maxnreg
        if self.num_ctas != 1:
            options["num_ctas"] = self.num_ctas
        return options

    def all_kwargs(self) -> dict:
        """The constexprs and the launch options this configuration passes to a launch."""
        return {**self.kwargs, **self.launch_options()}

    def __str__(self) -> str:
        """Triton's text for a configuration (what a user logs of ``best_config``)."""
        return ", ".join([f"{k}: {v}" for k, v in self.kwargs.items()]
                         + [f"num_warps: {self.num_warps}", f"num_ctas: {self.num_ctas}",
                            f"num_stages: {self.num_stages}", f"maxnreg: {self.maxnreg}"])

    def __repr__(self) -> str:
        values = ", ".join(f"{k}: {v}" for k, v in self.kwargs.items())
        return (f"Config({values}, num_warps: {self.num_warps}, "
                f"num_stages: {self.num_stages})")


class _Wrapper:
    """A kernel wrapped by autotune or heuristics: launchable, and naming its JITFunction.

    Launched as Triton's are, so that a kernel library's own subclass (one that overrides
    ``run`` to look up its saved configurations first) works on aotk's: ``kernel[grid](...)``
    calls ``run(*args, grid=grid, warmup=False, **kwargs)``, which calls the wrapped
    kernel's ``run`` the same way."""

    def __init__(self, fn, arg_names=None):
        self.fn = fn
        self.__name__ = getattr(fn, "__name__", type(fn).__name__)
        if arg_names is not None and list(arg_names) != self.arg_names:
            raise TypeError(f"{self.__name__}: arg_names {list(arg_names)} are not the "
                            f"kernel's parameters {self.arg_names}")

    @property
    def jit_function(self):
        """The @aotk.jit kernel at the bottom of the wrappers."""
        inner = self.fn
        while isinstance(inner, _Wrapper):
            inner = inner.fn
        return inner

    @property
    def base_fn(self):
        """The Python function the kernel was written as (Triton's name)."""
        return self.jit_function.fn

    @cached_property
    def arg_names(self) -> list:
        """The kernel's parameter names (every launch binds its arguments to them: looked
        up once, not through the wrappers each time)."""
        return self.jit_function.param_names

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.run(*args, grid=grid, warmup=False, **kwargs)

    def warmup(self, *args, grid, **kwargs):
        """Compiles what a launch with these arguments would run, launching nothing."""
        return self.run(*args, grid=grid, warmup=True, **kwargs)

    def _named(self, args, kwargs) -> dict:
        named = dict(zip(self.arg_names, args))
        named.update(kwargs)
        return named

    def _launch(self, grid, args, kwargs, warmup=False):
        return self.fn.run(*args, grid=grid, warmup=warmup, **kwargs)


class Heuristics(_Wrapper):
    def __init__(self, fn, arg_names, values: dict):
        super().__init__(fn, arg_names)
        self.values = dict(values)

    def run(self, *args, grid, warmup=False, **kwargs):
        # Each rule sees the arguments and the values the rules before it set (as in
        # Triton), from one dict built once a launch rather than once a rule.
        named = self._named(args, kwargs)
        for name, rule in self.values.items():
            kwargs[name] = named[name] = rule(named)
        return self._launch(grid, args, kwargs, warmup)


class AutotuneError(RuntimeError):
    """No configuration of an autotuned kernel can run (each one's error is named)."""


class Autotuner(_Wrapper):
    """Triton's Autotuner, constructor included (a library may subclass it).
    ``use_cuda_graph`` is accepted; aotk measures with CUDA events (``aotk.testing.do_bench``)
    either way."""

    def __init__(self, fn, arg_names, configs, key, reset_to_zero=None, restore_value=None,
                 pre_hook=None, post_hook=None, prune_configs_by=None, warmup=None, rep=None,
                 use_cuda_graph=False, do_bench=None, cache_results=False):
        super().__init__(fn, arg_names)
        self.configs = list(configs) or [Config({})]
        self.keys = list(key)
        self.key = self.keys
        prune_configs_by = prune_configs_by or {}
        self.prune_configs_by = prune_configs_by
        self.early_config_prune = prune_configs_by.get("early_config_prune")
        self.perf_model = prune_configs_by.get("perf_model")
        self.configs_top_k = prune_configs_by.get("top_k", 1.0)
        self.reset_to_zero = list(reset_to_zero or [])
        self.restore_value = list(restore_value or [])
        self.restore_copies = {}
        # As in Triton: hooks given here replace the ones reset_to_zero / restore_value make.
        self.user_defined_pre_hook = pre_hook is not None
        self.user_defined_post_hook = post_hook is not None
        self.pre_hook = pre_hook or (self._reset_and_save if self.reset_to_zero
                                     or self.restore_value else None)
        self.post_hook = post_hook or (self._restore if self.restore_value else None)
        self.num_warmups, self.num_reps = warmup, rep   # Triton's names for them
        self.use_cuda_graph = use_cuda_graph
        self.user_do_bench = do_bench
        self.cache_results = cache_results   # Triton's switch; aotk always keeps results
        self.cache = {}               # tuning key -> the winning Config
        self.configs_timings = None   # Config -> [median, p20, p80] ms, of the last tuning
        self.bench_time = None        # seconds the last tuning took
        self.best_config = None       # the configuration last launched
        self.nargs = None

    # -- Triton's hooks for reset_to_zero / restore_value ---------------------------------
    def _reset_and_save(self, nargs, reset_only=False):
        # An argument left None (an optional pointer a constexpr flag turns off) is skipped.
        for name in self.reset_to_zero:
            if nargs[name] is not None:
                nargs[name].zero_()
        if not reset_only:
            self.restore_copies = {name: nargs[name].clone() for name in self.restore_value
                                   if nargs[name] is not None}

    def _restore(self, nargs, exception):
        for name, saved in self.restore_copies.items():
            nargs[name].copy_(saved)
        self.restore_copies = {}

    # -- choosing -------------------------------------------------------------------------
    def tuning_key(self, named_args: dict) -> tuple:
        """The values of the ``key`` arguments, then the dtype of every argument that has one
        (as Triton's key)."""
        key = [named_args[name] for name in self.keys if name in named_args]
        key += [str(value.dtype) for value in named_args.values() if hasattr(value, "dtype")]
        return tuple(key)

    def prune_configs(self, named_args: dict, kwargs: dict | None = None) -> list:
        """The configurations ``early_config_prune`` keeps, then the ``top_k`` best by
        ``perf_model``."""
        kwargs = kwargs or {}
        configs = self.configs
        if self.early_config_prune is not None:
            configs = list(self.early_config_prune(self.configs, named_args, **kwargs))
            if not configs:
                raise AutotuneError(f"{self.__name__}: early_config_prune kept no configuration "
                                    "(it must return at least one)")
        if self.perf_model is not None:
            top_k = self.configs_top_k
            if isinstance(top_k, float) and top_k <= 1.0:
                top_k = int(len(self.configs) * top_k)
            elif not isinstance(top_k, int):
                raise TypeError(f"{self.__name__}: prune_configs_by['top_k'] must be an int or "
                                f"a fraction <= 1.0, got {top_k!r}")
            if len(configs) > top_k:
                estimate = {c: self.perf_model(**named_args, **kwargs, **c.all_kwargs())
                            for c in configs}
                configs = sorted(configs, key=estimate.get)[:top_k]
        return configs

    def chosen_config(self, named_args: dict) -> Config:
        """The configuration a launch that measures nothing uses (the interpreter, one
        configuration): the first one the pruning hooks keep."""
        return self.prune_configs(named_args)[0]

    def run(self, *args, grid, warmup=False, **kwargs):
        named = self._named(args, kwargs)
        self.nargs = named
        if len(self.configs) == 1:
            config = self.configs[0]
        else:
            # A configuration already kept for this key (measured, or put there by a
            # subclass that saves them, as kernel libraries do) is used on the interpreter
            # too; otherwise the GPU measures and the interpreter takes the first one.
            key = self.tuning_key(named)
            config = self.cache.get(key)
            if config is None and self._on_gpu(named):
                config = self.cache[key] = self._tune(key, grid, args, kwargs, named)
            elif config is None:
                config = self.chosen_config(named)
        self._check_conflicts(config, kwargs)
        if config.pre_hook is not None:
            config.pre_hook(self._named(args, {**kwargs, **config.all_kwargs()}))
        self.best_config = config
        try:
            return self._launch(grid, args, {**kwargs, **config.all_kwargs()}, warmup)
        finally:
            self.nargs = None

    def warmup(self, *args, grid, **kwargs):
        """Compiles every configuration the pruning hooks keep, launching nothing (Triton's
        ``Autotuner.warmup``)."""
        self.nargs = self._named(args, kwargs)
        try:
            return [self.fn.warmup(*args, grid=grid, **kwargs, **config.all_kwargs())
                    for config in self.prune_configs(self.nargs, kwargs)]
        finally:
            self.nargs = None

    def _check_conflicts(self, config, kwargs):
        for name in config.kwargs:
            if name in kwargs:
                raise TypeError(f"{self.__name__}: {name!r} is both given at the launch and "
                                "set by the autotuning configs")

    @staticmethod
    def _on_gpu(named_args) -> bool:
        """Whether the launch runs on the GPU: its arrays, those behind tensor descriptors
        included (a kernel may take nothing else, as liger's fused MLP does), are."""
        from .launch.arguments import is_array, runs_on_interpreter
        from .tools.tensor_descriptor import TensorDescriptor
        arrays = [value.base if isinstance(value, TensorDescriptor) else value
                  for value in named_args.values()]
        arrays = [value for value in arrays if is_array(value)]
        return bool(arrays) and not runs_on_interpreter(arrays)

    # -- measuring ------------------------------------------------------------------------
    def _tune(self, key, grid, args, kwargs, named) -> Config:
        from .launch import autotuning
        from .launch.device import current_device
        configs = self.prune_configs(named, kwargs)
        if len(configs) == 1:
            return configs[0]
        device, kernel = current_device(), self.jit_function
        started = time.perf_counter()
        kept = autotuning.load(kernel, configs, key, device)
        if kept is not None:
            best, timings = kept
            self.configs_timings = {configs[i]: t for i, t in timings.items()}
        else:
            timings, errors = {}, {}
            for i, config in enumerate(configs):
                timings[i], errors[i] = self.bench_config(grid, args, kwargs, config)
            best = min(timings, key=lambda i: timings[i])
            if math.isinf(timings[best][0]):
                raise AutotuneError(f"{self.__name__}: no configuration could run; " + "; ".join(
                    f"{configs[i]}: {error}" for i, error in errors.items()))
            self.configs_timings = {configs[i]: t for i, t in timings.items()}
            autotuning.store(kernel, configs, key, device, best, timings)
            if self.pre_hook is not None:   # as Triton: reset what the measuring changed
                self.pre_hook({**named, **kwargs, **configs[best].all_kwargs()}, reset_only=True)
        self.bench_time = time.perf_counter() - started
        if os.environ.get("AOTK_PRINT_AUTOTUNING") == "1":
            print(f"aotk autotuning of {self.__name__}, key {key}: "
                  f"{'kept from disk' if kept is not None else 'measured'} in "
                  f"{self.bench_time:.2f} s; best config {configs[best]}", file=sys.stderr)
        return configs[best]

    def bench_config(self, grid, args, kwargs, config, run=None) -> tuple:
        """([median, 20th, 80th percentile] ms, None) of the kernel launched with ``config``
        (the hooks around each launch); infinite times and the error where it does not
        compile or launch. ``run``, if given, launches in place of the JIT launch (aotk tune
        runs the library's own build of the config)."""
        from .errors import AotkError, CompilationError
        from .toolchain.errors import ToolchainError
        self._check_conflicts(config, kwargs)
        current = {**kwargs, **config.all_kwargs()}
        full = {**self._named(args, kwargs), **current}

        def launch():
            if config.pre_hook is not None:
                config.pre_hook(full)
            if self.pre_hook is not None:
                self.pre_hook(full)
            try:
                if run is None:
                    self._launch(grid, args, dict(current))
                else:
                    run()
            except Exception as exc:
                if self.post_hook is not None:
                    self.post_hook(full, exc)
                raise
            if self.post_hook is not None:
                self.post_hook(full, None)
        try:
            times = self._do_bench(launch)
        except (CompilationError, ToolchainError, AotkError) as exc:
            return [math.inf] * 3, str(exc).splitlines()[0]
        return (list(times) if isinstance(times, (list, tuple)) else [float(times)] * 3), None

    def _do_bench(self, fn):
        if self.user_do_bench is not None:
            return self.user_do_bench(fn, quantiles=(0.5, 0.2, 0.8))
        from .testing import do_bench
        # The kernel's GPU time: the host side of a launch is the same for every config,
        # and where it is slower than the kernel it would be all the events measure.
        return do_bench(fn, warmup=self.num_warmups or 25, rep=self.num_reps or 100,
                        quantiles=(0.5, 0.2, 0.8), hide_launch_time=True)


def autotune(configs, key, prune_configs_by=None, reset_to_zero=None, restore_value=None,
             pre_hook=None, post_hook=None, warmup=None, rep=None, do_bench=None,
             cache_results=False):
    """Triton's ``@triton.autotune`` (see the module text for what a launch does today)."""
    def decorate(fn):
        return Autotuner(fn, None, configs, key, reset_to_zero, restore_value,
                         pre_hook=pre_hook, post_hook=post_hook,
                         prune_configs_by=prune_configs_by, warmup=warmup, rep=rep,
                         do_bench=do_bench, cache_results=cache_results)
    return decorate


def heuristics(values):
    """Triton's ``@triton.heuristics({name: fn(named_args) -> value})``."""
    def decorate(fn):
        return Heuristics(fn, None, values)
    return decorate
