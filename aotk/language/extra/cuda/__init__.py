"""``tl.extra.cuda``: libdevice under the name Triton also gives it; the CUDA intrinsics
Triton has here (smid, globaltimer, ...) are not provided yet, each one clear error."""
from ...missing import module_getattr
from . import libdevice

__getattr__ = module_getattr("aotk.language.extra.cuda", "tl.extra.cuda")

__all__ = ["libdevice"]
