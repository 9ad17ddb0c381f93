"""``triton.runtime.jit``: aotk's kernel decorator and kernel class under Triton's names."""
from ..jit import JITFunction, jit

__all__ = ["JITFunction", "jit"]
