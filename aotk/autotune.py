"""``@aotk.autotune``, ``@aotk.heuristics`` and ``aotk.Config`` with Triton's signatures.

In: an ``@aotk.jit`` kernel (or another of these wrappers) and the configurations or
heuristics. Out: a launchable wrapper, ``kernel[grid](...)``, that stacks with the others
in any order as in Triton, and whose ``.fn`` chain leads to the JITFunction (what
``aotk build`` compiles, with the constants a manifest variant gives).

What a launch does today: heuristics are evaluated at every call, on the call's arguments,
and passed as constexprs; an autotuned kernel runs its first configuration that the
``prune_configs_by`` hook keeps, everywhere (the CPU interpreter, as Triton's interpreter
does, and the GPU). Measuring the configurations on the GPU and keeping the winner is not
built yet (issue "Autotune"); nothing here pretends otherwise.
"""
from __future__ import annotations


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

    def all_kwargs(self) -> dict:
        """The constexprs and the launch options this configuration passes to a launch."""
        return {**self.kwargs, "num_warps": self.num_warps, "num_stages": self.num_stages}

    def __repr__(self) -> str:
        values = ", ".join(f"{k}: {v}" for k, v in self.kwargs.items())
        return (f"Config({values}, num_warps: {self.num_warps}, "
                f"num_stages: {self.num_stages})")


class _Wrapper:
    """A kernel wrapped by autotune or heuristics: launchable, and naming its JITFunction."""

    def __init__(self, fn):
        self.fn = fn
        self.__name__ = getattr(fn, "__name__", type(fn).__name__)

    @property
    def jit_function(self):
        """The @aotk.jit kernel at the bottom of the wrappers."""
        inner = self.fn
        while isinstance(inner, _Wrapper):
            inner = inner.fn
        return inner

    @property
    def arg_names(self) -> list:
        return self.jit_function.param_names

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.run(grid, args, kwargs)

    def _named(self, args, kwargs) -> dict:
        named = dict(zip(self.arg_names, args))
        named.update(kwargs)
        return named

    def _launch(self, grid, args, kwargs):
        return self.fn.run(grid, args, kwargs)


class Heuristics(_Wrapper):
    def __init__(self, fn, values: dict):
        super().__init__(fn)
        self.values = dict(values)

    def run(self, grid, args, kwargs):
        kwargs = dict(kwargs)
        for name, rule in self.values.items():
            kwargs[name] = rule(self._named(args, kwargs))
        return self._launch(grid, args, kwargs)


class Autotuner(_Wrapper):
    def __init__(self, fn, configs, key, prune_configs_by=None, reset_to_zero=None,
                 restore_value=None, pre_hook=None, post_hook=None, warmup=None, rep=None,
                 do_bench=None, cache_results=False):
        super().__init__(fn)
        self.configs = list(configs) or [Config({})]
        self.key = list(key)
        self.prune_configs_by = prune_configs_by or {}
        self.reset_to_zero = reset_to_zero
        self.restore_value = restore_value
        self.pre_hook = pre_hook
        self.post_hook = post_hook
        self.best_config = None

    def chosen_config(self, named_args: dict) -> Config:
        """The configuration a launch uses: the first one the pruning hooks keep."""
        configs = self.configs
        early = self.prune_configs_by.get("early_config_prune")
        if early is not None:
            configs = list(early(configs, named_args)) or configs
        return configs[0]

    def run(self, grid, args, kwargs):
        config = self.chosen_config(self._named(args, kwargs))
        for name in config.kwargs:
            if name in kwargs:
                raise TypeError(f"{self.__name__}: {name!r} is both given at the launch and "
                                "set by the autotuning configs")
        if config.pre_hook is not None:
            config.pre_hook(self._named(args, {**kwargs, **config.kwargs}))
        self.best_config = config   # Triton's attribute: the configuration last launched
        return self._launch(grid, args, {**kwargs, **config.all_kwargs()})


def autotune(configs, key, prune_configs_by=None, reset_to_zero=None, restore_value=None,
             pre_hook=None, post_hook=None, warmup=None, rep=None, do_bench=None,
             cache_results=False):
    """Triton's ``@triton.autotune`` (see the module text for what a launch does today)."""
    def decorate(fn):
        return Autotuner(fn, configs, key, prune_configs_by, reset_to_zero, restore_value,
                         pre_hook, post_hook, warmup, rep, do_bench, cache_results)
    return decorate


def heuristics(values):
    """Triton's ``@triton.heuristics({name: fn(named_args) -> value})``."""
    def decorate(fn):
        return Heuristics(fn, values)
    return decorate
