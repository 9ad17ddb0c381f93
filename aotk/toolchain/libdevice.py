"""libdevice.10.bc (NVIDIA's math library as LLVM bitcode), linked for tl.exp and friends.

Order: ``AOTK_LIBDEVICE``, the pip wheels (``nvidia/cu13/nvvm/libdevice``), next to the
chosen ptxas (``<bin>/../nvvm/libdevice``), ``/usr/local/cuda/nvvm/libdevice``.
"""
from __future__ import annotations

import functools
import os

from .errors import ToolchainError
from .locate import find_tool, wheel_directories

_NAME = "libdevice.10.bc"


@functools.lru_cache(maxsize=None)
def find_libdevice() -> str:
    explicit = os.environ.get("AOTK_LIBDEVICE")
    if explicit:
        if not os.path.isfile(explicit):
            raise ToolchainError(f"AOTK_LIBDEVICE={explicit} does not exist")
        return explicit
    candidates = [os.path.join(d, "nvvm", "libdevice", _NAME) for d in wheel_directories()]
    try:
        bin_dir = os.path.dirname(os.path.realpath(find_tool("ptxas").path))
        candidates.append(os.path.join(bin_dir, "..", "nvvm", "libdevice", _NAME))
    except ToolchainError:
        pass
    candidates.append(os.path.join("/usr/local/cuda/nvvm/libdevice", _NAME))
    for candidate in candidates:
        if os.path.isfile(candidate):
            return os.path.normpath(candidate)
    raise ToolchainError(f"{_NAME} not found: `pip install nvidia-cuda-nvcc` (it brings "
                         "nvidia-nvvm), or set AOTK_LIBDEVICE=/path/to/libdevice.10.bc")
