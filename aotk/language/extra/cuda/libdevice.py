"""``tl.extra.cuda.libdevice``: the same functions as ``tl.extra.libdevice``."""
from ...missing import module_getattr
from ..libdevice import *  # noqa: F401,F403
from ..libdevice import __all__  # noqa: F401

__getattr__ = module_getattr("aotk.language.extra.libdevice", "tl.extra.cuda.libdevice")
