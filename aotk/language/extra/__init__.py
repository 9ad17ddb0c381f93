"""``tl.extra``: libdevice (``tl.extra.libdevice``, also ``tl.extra.cuda.libdevice``)."""
from . import cuda, libdevice

__all__ = ["cuda", "libdevice"]
