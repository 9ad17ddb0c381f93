"""``tl.extra.cuda``: libdevice under the name Triton also gives it, the hardware
registers Triton reads here (``globaltimer``, ``smid``), the launch's ``num_warps`` /
``num_threads`` as compile-time values, and the grid dependency controls of Hopper's
programmatic dependent launch (``gdc_wait``, ``gdc_launch_dependents``), and Triton's
float8e4b15 conversions by name (``convert_custom_float8_sm80`` / ``_sm70``)."""
from .... import semantic
from ....ir.types import int32
from ....targets import has_grid_dependency_control
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


def _grid_dependency_control(instruction: str, name: str):
    # PTX has griddepcontrol from sm_90 on: for an older target the call is a compile error
    # naming it, not a ptxas failure on the asm below.
    target = semantic.compile_target()
    if target is not None and not has_grid_dependency_control(target):
        raise NotImplementedError(
            f"tl.extra.cuda.{name}() needs sm_90 or later (griddepcontrol), and this kernel "
            f"is compiled for {target}: call it under `if tl.target_info.cuda_capability_geq"
            f"(9, 0):`, or leave {target} out of the targets")
    # As Triton emits it: an impure one-register asm statement, so that it is neither
    # removed nor moved; the register is a dummy.
    semantic.inline_asm_elementwise(f"griddepcontrol.{instruction}; // dummy $0", "=r", [],
                                    int32, False, 1)


@builtin
def gdc_wait():
    """Waits until the grids this launch depends on have finished (or signalled with
    gdc_launch_dependents) and their memory is visible; a no-op for a launch without a
    programmatic dependency. sm_90 and later."""
    _grid_dependency_control("wait", "gdc_wait")


@builtin
def gdc_launch_dependents():
    """Lets the launches that depend on this grid start before it finishes. sm_90 and
    later."""
    _grid_dependency_control("launch_dependents", "gdc_launch_dependents")


@builtin
def convert_custom_float8_sm80(arg, dst_ty, fp_downcast_rounding=None):
    """float16 / float32 to float8e4b15, or float8e4b15 to float16 / float32, as
    ``arg.to(dst_ty)``. ``fp_downcast_rounding`` is accepted and, as in Triton, changes
    nothing: the format has one rounding (``aotk.ir.float8``)."""
    return semantic.convert_custom_float8(arg, dst_ty)


@builtin
def convert_custom_float8_sm70(arg, dst_ty, fp_downcast_rounding=None):
    """As ``convert_custom_float8_sm80`` (Triton's sm70 form clamps without ``min.f16x2``;
    the bits are the same)."""
    return semantic.convert_custom_float8(arg, dst_ty)


__getattr__ = module_getattr("aotk.language.extra.cuda", "tl.extra.cuda")

__all__ = ["libdevice", "globaltimer", "smid", "num_warps", "num_threads", "gdc_wait",
           "gdc_launch_dependents"]
