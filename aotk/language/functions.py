"""The ``tl.*`` builtins not in a family module of their own (``memory``, ``reduce``, ``scan``,
``atomics``). Each one only unpacks its arguments and calls ``aotk.semantic``."""
from __future__ import annotations

import builtins

from .. import semantic
# The table itself from its module: `semantic` may be half-imported here (aotk.semantic
# imports aotk.language, which imports this file, when a program imports aotk.semantic or
# aotk.jit before aotk.language).
from ..semantic.math import ALL_MATH_FUNCTIONS
from .core import builtin, constexpr, named_builtin, tensor, tensor_member, unwrap


@builtin
def program_id(axis):
    return semantic.program_id(axis)


@builtin
def num_programs(axis):
    return semantic.num_programs(axis)


@builtin
def arange(start, end):
    return semantic.arange(start, end)


@builtin
def where(condition, x, y):
    return semantic.where(condition, x, y)


@builtin
def cast(input, dtype, fp_downcast_rounding=None, bitcast=False):
    return semantic.cast(input, unwrap(dtype), bitcast=bool(unwrap(bitcast)),
                         fp_downcast_rounding=unwrap(fp_downcast_rounding))


@builtin
def full(shape, value, dtype):
    return semantic.full(shape, unwrap(value), dtype)


@builtin
def zeros(shape, dtype):
    return semantic.full(shape, 0, dtype)


@builtin
def zeros_like(input):
    return semantic.full(input.type.shape, 0, input.dtype) if input.type.shape else \
        semantic.constant(0, input.dtype)


@builtin
def broadcast_to(input, *shape):
    if len(shape) == 1 and isinstance(unwrap(shape[0]), (list, tuple)):
        shape = unwrap(shape[0])
    return semantic.broadcast_to(input, shape)


@builtin
def broadcast(input, other):
    shape = semantic.broadcast_shapes(input.type.shape, other.type.shape)
    return semantic.broadcast_to_shape(input, shape), semantic.broadcast_to_shape(other, shape)


@builtin
def expand_dims(input, axis):
    return semantic.expand_dims(input, unwrap(axis))


@builtin
def cdiv(x, div):
    if not isinstance(x, tensor) and not isinstance(div, tensor):
        return constexpr((unwrap(x) + unwrap(div) - 1) // unwrap(div))
    return (x + div - 1) // div


@builtin
def minimum(x, y, propagate_nan=None):
    return semantic.minimum(x, y, propagate_nan)


@builtin
def maximum(x, y, propagate_nan=None):
    return semantic.maximum(x, y, propagate_nan)


@builtin
def clamp(x, min, max, propagate_nan=None):
    return semantic.clamp(x, min, max, propagate_nan)


def _math(opcode):
    def fn(x):
        return semantic.unary_math(opcode, x)
    return named_builtin(fn, opcode, f"Elementwise {opcode}.")


exp = _math("exp")
exp2 = _math("exp2")
log = _math("log")
log2 = _math("log2")
sqrt = _math("sqrt")
rsqrt = _math("rsqrt")
sin = _math("sin")
cos = _math("cos")
abs = _math("abs")
floor = _math("floor")
ceil = _math("ceil")


def _math_function(name: str, arity: int):
    if arity == 1:
        def fn(x):
            return semantic.math_function(name, x)
    elif arity == 2:
        def fn(x, y):
            return semantic.math_function(name, x, y)
    else:   # libdevice's functions of 3 and 4 operands (fma_rz, norm3d, ...)
        def fn(*operands):
            return semantic.math_function(name, *operands)
    return named_builtin(fn, name, f"Elementwise {name} (libdevice's), of {arity} "
                                   f"operand{'s' * (arity > 1)}.")


# One builtin per row of aotk.semantic's ALL_MATH_FUNCTIONS: tl.math and tl.extra.libdevice
# take theirs from here, and tl the ones Triton has at its top level.
MATH_BUILTINS = {name: _math_function(name, row.arity)
                 for name, row in ALL_MATH_FUNCTIONS.items()}
erf, umulhi = MATH_BUILTINS["erf"], MATH_BUILTINS["umulhi"]


@builtin
def sqrt_rn(x):
    """The square root rounded to nearest (Triton's precise_sqrt: sqrt.rn, denormals kept;
    tl.extra.libdevice.sqrt_rn flushes fp32 ones, as in Triton)."""
    return semantic.math_function("sqrt_rn", x, ieee=True)


@builtin
def div_rn(x, y):
    """x / y rounded to nearest (Triton's precise_divf: div.rn, denormals kept;
    tl.extra.libdevice.div_rn flushes fp32 ones, as in Triton)."""
    return semantic.math_function("div_rn", x, y, ieee=True)


@builtin
def add(x, y, sanitize_overflow=True):
    """x + y (Triton's functional form; aotk's integers always wrap)."""
    return semantic.add(x, y)


@builtin
def sub(x, y, sanitize_overflow=True):
    return semantic.sub(x, y)


@builtin
def mul(x, y, sanitize_overflow=True):
    return semantic.mul(x, y)


@builtin
def fdiv(x, y, ieee_rounding=False):
    """x / y of floats: rounded to nearest with ``ieee_rounding``, else as fast as the
    hardware divides (fp32: within 2 ulp)."""
    return semantic.fdiv(x, y, bool(unwrap(ieee_rounding)))


@builtin
def fma(x, y, z):
    return semantic.fma(x, y, z)


@builtin
def sigmoid(x):
    return semantic.sigmoid(x)


@builtin
def multiple_of(input, values):
    return semantic.hint(input, "multiple_of", values)


@builtin
def max_contiguous(input, values):
    return semantic.hint(input, "max_contiguous", values)


@builtin
def max_constancy(input, values):
    return semantic.hint(input, "max_constancy", values)


@builtin
def static_assert(cond, msg=""):
    if not unwrap(cond):
        raise AssertionError(f"static_assert failed: {unwrap(msg)}" if unwrap(msg)
                             else "static_assert failed")


@builtin
def static_print(*values):
    print(*[unwrap(v) for v in values])


class static_range:
    """``for i in tl.static_range(...)``: unrolled at compile time (constexpr bounds)."""

    def __init__(self, arg1, arg2=None, step=None):
        start, end = (0, arg1) if arg2 is None else (arg1, arg2)
        self.range = builtins.range(int(unwrap(start)), int(unwrap(end)),
                                    1 if step is None else int(unwrap(step)))


class range:
    """``for i in tl.range(...)`` (and plain ``range``): a loop with runtime bounds.

    ``num_stages`` asks loads feeding a ``tl.dot`` to be software-pipelined;
    ``warp_specialize`` asks for a producer warp issuing the loop's TMA copies (sm_90,
    ``passes.warp_specialize``); the other tuning knobs are accepted for source
    compatibility with Triton."""

    def __init__(self, arg1, arg2=None, step=None, num_stages=None, loop_unroll_factor=None,
                 disallow_acc_multi_buffer=False, flatten=False, warp_specialize=False,
                 disable_licm=False):
        self.start, self.end = (constexpr(0), arg1) if arg2 is None else (arg1, arg2)
        self.step = constexpr(1) if step is None else step
        self.num_stages = unwrap(num_stages)
        self.loop_unroll_factor = unwrap(loop_unroll_factor)
        self.warp_specialize = bool(unwrap(warp_specialize))


@builtin
def permute(input, *dims):
    return semantic.permute(input, *dims)


@builtin
def trans(input, *dims):
    return semantic.trans(input, *dims)


@builtin
def reshape(input, *shape, can_reorder=False):
    return semantic.reshape(input, *shape, can_reorder=unwrap(can_reorder))


@builtin
def view(input, *shape):
    """Deprecated in Triton (may reorder); here the same as ``reshape``."""
    return semantic.reshape(input, *shape, can_reorder=True)


@builtin
def ravel(x, can_reorder=False):
    return semantic.ravel(x)


@builtin
def join(a, b):
    return semantic.join(a, b)


@builtin
def split(a):
    return semantic.split(a)


@builtin
def interleave(a, b):
    return semantic.interleave(a, b)


@builtin
def cat(input, other, can_reorder=False):
    return semantic.cat(input, other, can_reorder)


@builtin
def sort(x, dim=None, descending=False):
    """``x`` sorted along its last axis, whose size must be a power of two."""
    return semantic.sort(x, dim, descending)


@builtin
def flip(x, dim=None):
    """``x`` reversed along ``dim`` (default: the last axis; a power-of-two size)."""
    return semantic.flip(x, dim)


# -- random numbers (Triton's Philox streams; see semantic/random.py) -----------------------

def _random_builtin(name):
    def forward(*args, **kwargs):
        return getattr(semantic, name)(*args, **kwargs)
    return named_builtin(forward, name, f"Triton's tl.{name} (aotk.semantic.random.{name}).")


RANDOM_BUILTINS = ("philox", "philox_impl", "randint", "randint4x", "rand", "rand4x", "randn",
                   "randn4x", "uint_to_uniform_float", "pair_uniform_to_normal")
(philox, philox_impl, randint, randint4x, rand, rand4x, randn, randn4x, uint_to_uniform_float,
 pair_uniform_to_normal) = (_random_builtin(name) for name in RANDOM_BUILTINS)


@builtin
def item(input):
    """The one element of a one-element block, as a scalar."""
    return semantic.item(input)


@builtin
def dot(input, other, acc=None, input_precision=None, allow_tf32=None,
        max_num_imprecise_acc=None, out_dtype=None):
    from ..ir.types import float32
    return semantic.dot(input, other, acc, input_precision, allow_tf32,
                        float32 if out_dtype is None else out_dtype)


@builtin
def dot_scaled(lhs, lhs_scale, lhs_format, rhs, rhs_scale, rhs_format, acc=None,
               fast_math=False, lhs_k_pack=True, rhs_k_pack=True, out_dtype=None):
    from ..ir.types import float32
    return semantic.dot_scaled(lhs, lhs_scale, lhs_format, rhs, rhs_scale, rhs_format, acc,
                               fast_math, lhs_k_pack, rhs_k_pack,
                               float32 if out_dtype is None else out_dtype)


# -- debugging ------------------------------------------------------------------------


@builtin
def debug_barrier():
    semantic.debug_barrier()


@builtin
def device_print(prefix, *args, hex=False):
    semantic.device_print(prefix, args, hex)


@builtin
def device_assert(cond, msg="", mask=None):
    semantic.device_assert(cond, msg, unwrap(mask))


@builtin
def softmax(x, dim=None, keep_dims=False, ieee_rounding=False):
    """exp(x - max) / sum(exp(x - max)) along ``dim`` (default 0), as Triton composes it."""
    return semantic.softmax(x, dim, keep_dims, ieee_rounding)


@builtin
def swizzle2d(i, j, size_i, size_j, size_g):
    """Row-major (i, j) of a size_i x size_j grid -> column-major within groups of size_g rows."""
    return semantic.swizzle2d(i, j, size_i, size_j, size_g)


@builtin
def topk(x, k, dim=None, descending=True):
    """The ``k`` (a power of two) largest elements of the last axis, largest first."""
    return semantic.topk(x, k, dim, descending)


@builtin
def gather(src, index, axis):
    """``src``'s elements named by ``index`` along ``axis`` (a block of the index's shape)."""
    return semantic.gather(src, index, unwrap(axis))


@builtin
def histogram(input, num_bins, mask=None):
    """int32 counts of the values 0 .. num_bins - 1 in the 1-d ``input`` (where ``mask``)."""
    return semantic.histogram(input, unwrap(num_bins), unwrap(mask))


@builtin
def inline_asm_elementwise(asm, constraints, args, dtype, is_pure, pack):
    """Runs the PTX ``asm`` over the elements of ``args`` (broadcast to one shape), ``pack``
    at a time; one result per ``dtype`` (a tuple of results for a tuple of dtypes)."""
    return semantic.inline_asm_elementwise(asm, constraints, args, dtype, is_pure, pack)


@builtin
def map_elementwise(scalar_fn, *args, pack=1):
    """``scalar_fn`` (an @aotk.jit function of scalars, which may branch) applied to each
    element of ``args`` (broadcast to one shape), ``pack`` elements per call."""
    return semantic.map_elementwise(scalar_fn, args, pack)


@builtin
def bitonic_merge(x, dim=None, descending=False):
    """The last stage of a bitonic sort along the last axis (a bitonic row comes out
    sorted)."""
    return semantic.bitonic_merge(x, dim, descending)


@builtin
def assume(cond):
    """A promise that ``cond`` holds, for the optimizer. aotk checks that it is a condition
    and does not use it: its own analyses take hints from tl.multiple_of & co."""
    if isinstance(cond, tensor) and not (cond.dtype.is_bool() or cond.dtype.is_int()):
        raise TypeError(f"tl.assume takes a condition, got a {cond.dtype} value")


# Triton's tensor methods: x.sum(1), x.cast(tl.int32), x.broadcast_to(...), ptr.store(v), ...
for _member in (abs, broadcast_to, cast, cdiv, ceil, cos, exp, exp2, expand_dims, flip, floor,
                item, log, log2, sort, softmax, topk, gather, histogram, permute, ravel,
                reshape, rsqrt, sigmoid, sin, split, sqrt, trans, view, erf, sqrt_rn):
    tensor_member(_member)
