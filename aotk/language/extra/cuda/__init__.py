"""``tl.extra.cuda``: libdevice under the name Triton also gives it, and the hardware
registers Triton reads here (``globaltimer``, ``smid``). Triton's other CUDA names are not
provided yet, each one clear error."""
from .... import semantic
from ...core import builtin
from ...missing import module_getattr
from . import libdevice


@builtin
def globaltimer():
    """The GPU's global nanosecond timer (int64), read afresh at this point."""
    return semantic.read_register("globaltimer")


@builtin
def smid():
    """The id of the multiprocessor running this program (int32)."""
    return semantic.read_register("smid")


__getattr__ = module_getattr("aotk.language.extra.cuda", "tl.extra.cuda")

__all__ = ["libdevice", "globaltimer", "smid"]
