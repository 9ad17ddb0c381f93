"""``tl.target_info``: what the kernel is compiled for, as compile-time values (Triton's).

In: the target of the compile (``sm_80``, ``sm_90``...), known while the kernel body is
generated; none on the interpreter, as Triton's interpreter has no target either. Out:
``current_target()`` (a ``GPUTarget``, or None), ``is_cuda()``, ``cuda_capability_geq``,
and the AMD questions (always False: aotk builds for NVIDIA GPUs).
"""
from __future__ import annotations

from typing import NamedTuple

from .. import semantic
from .core import constexpr_function


class GPUTarget(NamedTuple):
    """Triton's description of a target: the backend, the compute capability as an int
    (90 for sm_90) and the warp size."""
    backend: str
    arch: int
    warp_size: int


@constexpr_function
def current_target():
    target = semantic.compile_target()
    return None if target is None else GPUTarget("cuda", int(target[3:]), 32)


@constexpr_function
def is_cuda():
    return current_target() is not None


@constexpr_function
def cuda_capability_geq(major, minor=0):
    """Whether the target's compute capability is at least (major, minor)."""
    target = current_target()
    return target is not None and target.arch >= major * 10 + minor


@constexpr_function
def is_hip():
    return False


@constexpr_function
def is_hip_cdna3():
    return False


@constexpr_function
def is_hip_cdna4():
    return False


@constexpr_function
def is_hip_gfx1250():
    return False


__all__ = ["GPUTarget", "current_target", "is_cuda", "cuda_capability_geq", "is_hip",
           "is_hip_cdna3", "is_hip_cdna4", "is_hip_gfx1250"]
