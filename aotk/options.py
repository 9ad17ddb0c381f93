"""Compile options: keyword arguments -> a validated, frozen ``CompileOptions``.

In: ``num_warps``, ``num_stages``, ``target``, ``debug``, ``tma``, ``maxnreg``,
``num_ctas`` as keywords. Out: a
``CompileOptions`` whose values are checked on construction (ValueError naming the option),
or a TypeError naming an unknown keyword; ``cache_key()`` is the part of the JIT compile
cache's key that the options make (the kir listing makes the rest).
"""
from __future__ import annotations

from dataclasses import dataclass, fields

from .errors import suggestion
from .targets import MAX_REGISTERS_PER_THREAD

# Turing, Ampere, Ada, Hopper, and Blackwell (sm_100 data center, sm_120 consumer): what
# the bundled ptxas 13 assembles and the code generator handles (wgmma on sm_90 only;
# Blackwell runs its dots as mma.sync; what Turing lacks is in ``aotk.targets``).
SUPPORTED_TARGETS = ("sm_75", "sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_120")


@dataclass(frozen=True)
class CompileOptions:
    num_warps: int = 4
    num_stages: int = 3         # > 1: dot loops copy num_stages - 1 trips ahead
    target: str = "sm_90"
    debug: bool | None = None   # device asserts; None: the kernel's own setting
    tma: bool = True            # False: tensor-descriptor loads stay pointer loads
    maxnreg: int | None = None  # the most registers a thread may use (PTX .maxnreg)
    # 2: programs 2i and 2i + 1 along x run as a cluster of two CTAs on sm_90, whose
    # producer warps share the TMA tiles both load (``passes.multicast``); 1 elsewhere.
    num_ctas: int = 1
    # a * b + c may become one FMA (Triton's default); False keeps every rounding step.
    enable_fp_fusion: bool = True

    def __post_init__(self):
        if self.target not in SUPPORTED_TARGETS:
            raise ValueError(f"unsupported target {self.target!r}; expected one of "
                             f"{', '.join(SUPPORTED_TARGETS)}")
        warps = self.num_warps
        if not _is_int(warps) or warps < 1 or warps & (warps - 1) or warps > 32:
            raise ValueError(f"num_warps must be a power of two from 1 to 32, got {warps}")
        if not _is_int(self.num_stages) or self.num_stages < 1:
            raise ValueError(f"num_stages must be an integer >= 1, got {self.num_stages}")
        if self.maxnreg is not None and (not _is_int(self.maxnreg) or
                                         not 16 <= self.maxnreg <= MAX_REGISTERS_PER_THREAD):
            raise ValueError(f"maxnreg must be an integer from 16 to "
                             f"{MAX_REGISTERS_PER_THREAD} (registers per thread), got "
                             f"{self.maxnreg}")
        if not isinstance(self.enable_fp_fusion, bool):
            raise ValueError(f"enable_fp_fusion must be True or False, got "
                             f"{self.enable_fp_fusion!r}")
        if self.num_ctas not in (1, 2):
            raise ValueError(f"num_ctas={self.num_ctas!r}: aotk runs programs alone (1) or "
                             "in pairs sharing their TMA tiles (2); use 1 or 2")

    @classmethod
    def from_keywords(cls, **keywords) -> "CompileOptions":
        """Like the constructor, with a "did you mean" for a misspelled option."""
        known = [f.name for f in fields(cls)]
        for key in keywords:
            if key not in known:
                raise TypeError(f"unknown compile option {key!r}{suggestion(key, known)}")
        return cls(**keywords)

    def cache_key(self) -> dict:
        """What tells two compiles of the same kir apart. ``debug`` is left out: it is in
        the kir already (its device asserts)."""
        key = {"num_warps": self.num_warps, "num_stages": self.num_stages,
               "target": self.target}
        if not self.tma:
            key["tma"] = False
        if self.maxnreg is not None:
            key["maxnreg"] = self.maxnreg
        if not self.enable_fp_fusion:
            key["enable_fp_fusion"] = False
        if self.num_ctas != 1:
            key["num_ctas"] = self.num_ctas
        return key


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)

