"""``tl.extra.cuda``: libdevice under the name Triton also gives it, and the hardware
registers Triton reads here (``globaltimer``, ``smid``) and the launch's ``num_warps`` /
``num_threads`` as compile-time values. Triton's other CUDA names are not
provided yet, each one clear error."""
from .... import semantic
from ...core import builtin, constexpr
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


@builtin
def num_warps():
    """The number of warps the kernel runs with (a compile-time value)."""
    return constexpr(semantic.launch_num_warps())


@builtin
def num_threads():
    """The number of threads of a program: 32 per warp (a compile-time value)."""
    return constexpr(32 * semantic.launch_num_warps())


__getattr__ = module_getattr("aotk.language.extra.cuda", "tl.extra.cuda")

__all__ = ["libdevice", "globaltimer", "smid", "num_warps", "num_threads"]
