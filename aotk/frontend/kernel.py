"""A kernel function + a Signature, constexpr values and the debug flag -> its kir.

In: the decorated Python function (read by ``frontend.source``). Out: a ``KernelFunction``
whose ``kir(...)`` generates (``frontend.codegen``) and memoizes the kir of one
specialization. Launching is not here: ``aotk.jit.JITFunction`` adds it.
"""
from __future__ import annotations

import os

from ..ir.signature import HostDescriptorLayout, Signature, runtime_parameter_names
from .codegen import generate_kir
from .source import KernelSource


class KernelFunction(KernelSource):
    def __init__(self, fn, debug=None):
        super().__init__(fn)
        # None: follow AOTK_DEBUG at each compile; True/False: fixed by the decorator.
        self.debug_option = debug
        self._kir_cache: dict = {}

    @property
    def debug(self) -> bool:
        """Whether device asserts are compiled in: ``@aotk.jit(debug=...)``, else AOTK_DEBUG."""
        if self.debug_option is not None:
            return bool(self.debug_option)
        return os.environ.get("AOTK_DEBUG", "").lower() in ("1", "true", "yes", "on")

    def kir(self, signature, hints: dict | None = None, constants: dict | None = None,
            debug: bool | None = None, num_warps: int | None = None,
            target: str | None = None):
        """The kir specialized on a ``Signature`` (a signature string, or {param: type} with
        ``hints``), the constexpr values, the debug flag and the number of warps it will run
        with, for ``tl.extra.cuda.num_warps()``, and the target, for ``tl.target_info``
        (memoized)."""
        debug = self.debug if debug is None else bool(debug)
        constants = dict(constants or {})
        for name in self.constexpr_names:
            if name not in constants:
                if name not in self.defaults:
                    raise TypeError(f"{self.name}: missing value for constexpr {name!r}")
                constants[name] = self.defaults[name]
        unknown = {n for n, v in constants.items() if n not in self.constexpr_names and (
            n not in self.param_names or not (v is None or isinstance(v, HostDescriptorLayout)))}
        if unknown:
            raise TypeError(f"{self.name}: {sorted(unknown)} are not tl.constexpr parameters "
                            "(a runtime parameter can only be given as None, or as the "
                            "HostDescriptorLayout of a host tensor descriptor)")
        if isinstance(signature, str):   # "*fp32:16, i32", as aotk.compile takes it
            signature = Signature.parse(
                signature, runtime_parameter_names(self.runtime_names, constants), self.name)
        elif not isinstance(signature, Signature):
            names = runtime_parameter_names(self.runtime_names, constants)
            signature = Signature.from_types(signature, hints, names)
        key = (signature.cache_key,
               tuple(sorted((k, repr(v)) for k, v in constants.items())), debug, num_warps,
               target)
        if key not in self._kir_cache:
            self._kir_cache[key] = generate_kir(self, signature.types, signature.hints,
                                                constants, debug, num_warps, target)
        return self._kir_cache[key]
