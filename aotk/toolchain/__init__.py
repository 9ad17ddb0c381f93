"""NVIDIA's tools, found in a visible, overridable order: ptxas, fatbinary, libdevice.

Each lookup tries the ``AOTK_<TOOL>`` variable, the ``nvidia-cuda-nvcc`` wheel, ``PATH``,
then ``/usr/local/cuda`` (see ``locate``); ``aotk doctor`` shows what was picked.
"""
from .errors import ToolchainError
from .libdevice import find_libdevice
from .ptxas import ToolInfo, assemble, find_ptxas, ptxas_version, reset_caches

__all__ = ["ToolchainError", "ToolInfo", "assemble", "find_libdevice", "find_ptxas",
           "ptxas_version", "reset_caches"]
