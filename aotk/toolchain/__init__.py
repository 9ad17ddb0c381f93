"""NVIDIA's tools, found in a visible, overridable order: ptxas, fatbinary, libdevice."""
from .errors import ToolchainError

__all__ = ["ToolchainError"]
