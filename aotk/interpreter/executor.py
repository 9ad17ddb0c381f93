"""kir -> numpy execution, one program (CTA) at a time.

In: a kir ``Function``, a 3-d grid, the arguments in parameter order (numpy arrays for
pointers, Python numbers for scalars). Out: the arrays, updated in place. Every value is a
numpy array of exactly its kir shape and dtype; integer arithmetic wraps; bfloat16 is held
as float32 rounded to bfloat16 after every op. Rules live in the ``RULES`` table.
"""
from __future__ import annotations

import itertools

import numpy as np

from .address_space import AddressSpace

_NUMPY = {"int1": np.bool_, "int8": np.int8, "int16": np.int16, "int32": np.int32,
          "int64": np.int64, "uint8": np.uint8, "uint16": np.uint16, "uint32": np.uint32,
          "uint64": np.uint64, "float16": np.float16, "bfloat16": np.float32,
          "float32": np.float32, "float64": np.float64}


def numpy_dtype(element):
    return np.uint64 if element.is_ptr() else _NUMPY[element.name]


def round_bf16(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, np.float32)
    bits = x.view(np.uint32).astype(np.uint64)
    rounded = (((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16).astype(np.uint32)
    return np.where(np.isnan(x), x, rounded.view(np.float32))


def _finish(value, element):
    """Casts to the exact result dtype; rounds bfloat16 results."""
    value = np.asarray(value).astype(numpy_dtype(element), copy=False)
    return round_bf16(value) if element.is_bf16() else value


class Program:
    def __init__(self, function, address_space, grid, pid):
        self.function, self.address_space = function, address_space
        self.grid, self.pid = grid, pid


def _math_operand(x, element):
    return x.astype(np.float64 if element.is_fp64() else np.float32)


def _unary_math(fn):
    def rule(ctx, op, x):
        return fn(_math_operand(x, op.result.element))
    return rule


def _c_divide(ctx, op, a, b):
    zero = b == 0
    safe = np.where(zero, 1, b)
    quotient = a // safe
    if op.result.element.is_int_signed():
        # numpy floors; C truncates: step back toward zero when signs differ and it is inexact.
        inexact = (a - quotient * safe) != 0
        quotient = np.where(inexact & ((a < 0) != (safe < 0)), quotient + 1, quotient).astype(a.dtype)
    result = quotient if op.opcode == "idiv" else a - quotient * safe
    return np.where(zero, 0, result)


def _shift(ctx, op, a, b):
    element = op.result.element
    amount = b.astype(np.uint64)
    too_far = amount >= element.bits
    clamped = np.where(too_far, 0, amount).astype(a.dtype)
    if op.opcode == "shl":
        return np.where(too_far, 0, np.left_shift(a, clamped))
    if element.is_int_signed():
        return np.right_shift(a, np.where(too_far, element.bits - 1, amount).astype(a.dtype))
    return np.where(too_far, 0, np.right_shift(a, clamped))


def _compare(ctx, op, a, b):
    return {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
            "gt": np.greater, "ge": np.greater_equal}[op.attrs["predicate"]](a, b)


def _cast(ctx, op, x):
    source, target = op.operands[0].element, op.result.element
    if op.attrs.get("bitcast"):
        if source.is_ptr() or target.is_ptr():
            return x
        if source.is_bf16():
            x = (np.asarray(x, np.float32).view(np.uint32) >> 16).astype(np.uint16)
        if target.is_bf16():
            return (x.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
        return x.view(numpy_dtype(target)) if x.ndim else x.reshape(1).view(numpy_dtype(target))[0]
    if target.is_bool():
        return x != 0
    if source.is_floating() and target.is_int():
        return np.trunc(x).astype(np.int64 if target.bits < 64 or target.is_int_signed()
                                  else np.uint64)
    return x


def _fma(ctx, op, a, b, c):
    element = op.result.element
    wide = np.float64 if element.bits <= 32 else np.longdouble
    return a.astype(wide) * b.astype(wide) + c.astype(wide)


def _load(ctx, op, pointer, mask=None, other=None):
    element = op.result.element
    memory_dtype = np.uint8 if element.is_bool() else (
        np.uint16 if element.is_bf16() else numpy_dtype(element))
    active = np.broadcast_to(mask if mask is not None else True, pointer.shape)
    loaded = np.zeros(pointer.shape, memory_dtype)
    loaded[active] = ctx.address_space.load(pointer[active], memory_dtype)
    if element.is_bf16():
        loaded = (loaded.astype(np.uint32) << 16).view(np.float32)
    result = loaded.astype(numpy_dtype(element))
    if other is not None:
        result = np.where(active, result, other)
    elif not active.all():
        result = np.where(active, result, np.zeros((), numpy_dtype(element)))
    return result


def _store(ctx, op, pointer, value, mask=None):
    element = op.operands[0].element.element_ty
    active = np.broadcast_to(mask if mask is not None else True, pointer.shape)
    value = np.broadcast_to(value, pointer.shape)[active]
    if element.is_bool():
        value = value.astype(np.uint8)
    elif element.is_bf16():
        value = (round_bf16(value).view(np.uint32) >> 16).astype(np.uint16)
    ctx.address_space.store(pointer[active], value.astype(value.dtype, copy=False))


def _addptr(ctx, op, pointer, offset):
    size = np.uint64(op.result.element.element_ty.itemsize)
    return pointer + offset.astype(np.int64).astype(np.uint64) * size


def _reduce(ctx, op, x):
    axis, combine = op.attrs["axis"], op.attrs["combine"]
    if combine == "add":
        return np.add.reduce(x, axis=axis, dtype=x.dtype)
    if combine == "xor":
        return np.bitwise_xor.reduce(x, axis=axis)
    if x.dtype.kind == "f":   # NaN-ignoring, as tl.maximum / tl.minimum
        return (np.fmax if combine == "max" else np.fmin).reduce(x, axis=axis)
    return (np.max if combine == "max" else np.min)(x, axis=axis)


def _argreduce(ctx, op, x):
    # argmax/argmin return the first (smallest) index among ties, as tie_break_left asks.
    if x.dtype.kind == "f":
        filler = -np.inf if op.attrs["combine"] == "max" else np.inf
        x = np.where(np.isnan(x), filler, x)
    pick = np.argmax if op.attrs["combine"] == "max" else np.argmin
    return pick(x, axis=op.attrs["axis"]).astype(np.int32)


def _scan(ctx, op, x):
    """Inclusive scan, one element after another along the axis (from its end if reverse)."""
    axis = op.attrs["axis"]
    accumulate = (np.add if op.attrs["combine"] == "add" else np.multiply).accumulate
    if op.attrs["reverse"]:
        return np.flip(accumulate(np.flip(x, axis), axis=axis, dtype=x.dtype), axis)
    return accumulate(x, axis=axis, dtype=x.dtype)


def _tf32(x):
    """fp32 as a tensor core reads it for tf32: the low 13 mantissa bits ignored."""
    bits = np.asarray(x, np.float32).view(np.uint32) & np.uint32(0xFFFFE000)
    return bits.view(np.float32)


def _dot(ctx, op, a, b, acc):
    precision = op.attrs.get("precision")
    if precision == "tf32":
        a, b = _tf32(a), _tf32(b)
    elif precision == "tf32x3":
        # big + small parts, the small*small product dropped, as the GPU computes it
        a_big, b_big = _tf32(a), _tf32(b)
        a_small, b_small = _tf32(a - a_big), _tf32(b - b_big)
        wide = np.float64
        product = (np.matmul(a_big.astype(wide), b_big.astype(wide)) +
                   np.matmul(a_big.astype(wide), b_small.astype(wide)) +
                   np.matmul(a_small.astype(wide), b_big.astype(wide)))
        return acc.astype(wide) + product
    wide = np.int64 if op.result.element.is_int() else np.float64
    return acc.astype(wide) + np.matmul(a.astype(wide), b.astype(wide))


RULES = {
    "program_id": lambda ctx, op: np.int32(ctx.pid[op.attrs["axis"]]),
    "num_programs": lambda ctx, op: np.int32(ctx.grid[op.attrs["axis"]]),
    "constant": lambda ctx, op: np.full(op.result.type.shape, op.attrs["value"],
                                        numpy_dtype(op.result.element)),
    "arange": lambda ctx, op: np.arange(op.attrs["start"], op.attrs["end"], dtype=np.int32),
    "splat": lambda ctx, op, x: np.broadcast_to(x, op.result.type.shape).copy(),
    "broadcast": lambda ctx, op, x: np.broadcast_to(x, op.result.type.shape).copy(),
    "expand_dims": lambda ctx, op, x: np.expand_dims(x, op.attrs["axis"]),
    "add": lambda ctx, op, a, b: a + b,
    "sub": lambda ctx, op, a, b: a - b,
    "mul": lambda ctx, op, a, b: a * b,
    "fdiv": lambda ctx, op, a, b: a / b,
    "idiv": _c_divide, "irem": _c_divide,
    "frem": lambda ctx, op, a, b: np.fmod(_math_operand(a, op.result.element),
                                          _math_operand(b, op.result.element)),
    "and": lambda ctx, op, a, b: a & b,
    "or": lambda ctx, op, a, b: a | b,
    "xor": lambda ctx, op, a, b: a ^ b,
    "shl": _shift, "shr": _shift,
    "min": lambda ctx, op, a, b: np.fmin(a, b) if op.result.element.is_floating() else np.minimum(a, b),
    "max": lambda ctx, op, a, b: np.fmax(a, b) if op.result.element.is_floating() else np.maximum(a, b),
    "cmp": _compare,
    "neg": lambda ctx, op, x: np.negative(x) if not x.dtype == np.bool_ else x,
    "not": lambda ctx, op, x: np.invert(x),
    "abs": lambda ctx, op, x: np.abs(x),
    "exp": _unary_math(np.exp), "exp2": _unary_math(np.exp2), "log": _unary_math(np.log),
    "log2": _unary_math(np.log2), "sqrt": _unary_math(np.sqrt),
    "rsqrt": _unary_math(lambda x: 1 / np.sqrt(x)), "sin": _unary_math(np.sin),
    "cos": _unary_math(np.cos), "floor": _unary_math(np.floor), "ceil": _unary_math(np.ceil),
    "fma": _fma,
    "select": lambda ctx, op, c, a, b: np.where(c, a, b),
    "cast": _cast,
    "addptr": _addptr,
    "hint": lambda ctx, op, x: x,
    "load": _load,
    "store": _store,
    "reduce": _reduce,
    "dot": _dot,
    "scan": _scan,
    "permute": lambda ctx, op, x: np.transpose(x, op.attrs["order"]).copy(),
    "reshape": lambda ctx, op, x: x.reshape(op.result.type.shape),
    "join": lambda ctx, op, a, b: np.stack([a, b], axis=-1),
    "split": lambda ctx, op, x: x[..., op.attrs["index"]].copy(),
    "argreduce": _argreduce,
}

# Side-effect and descriptor ops live in their own modules, which build on the helpers above.
from .atomics import RULES as _ATOMIC_RULES  # noqa: E402
from .debug import RULES as _DEBUG_RULES  # noqa: E402
from .descriptors import RULES as _DESCRIPTOR_RULES  # noqa: E402

RULES.update(_ATOMIC_RULES)
RULES.update(_DEBUG_RULES)
RULES.update(_DESCRIPTOR_RULES)
from .combine import REGION_RULES  # noqa: E402  (reduce / scan with a combine region)


def _run_region(ctx, region, env: dict, args) -> list:
    """Binds the block arguments, runs the body, returns the terminator's operands."""
    for arg, value in zip(region.args, args):
        env[arg] = value
    execute_block(ctx, region.body[:-1], env)
    return [env[v] for v in region.terminator.operands]


def _control_flow(ctx, op, env: dict) -> list:
    operands = [env[v] for v in op.operands]
    if op.opcode == "for":
        start, end, step = (int(x) for x in operands[:3])
        induction_type = numpy_dtype(op.operands[0].element)
        carried = operands[3:]
        for index in range(start, end, step):
            carried = _run_region(ctx, op.regions[0], env, [induction_type(index)] + carried)
        return carried
    if op.opcode == "if":
        return _run_region(ctx, op.regions[0 if bool(operands[0]) else 1], env, [])
    carried = operands   # while
    while True:
        condition, *forwarded = _run_region(ctx, op.regions[0], env, carried)
        if not bool(condition):
            return forwarded
        carried = _run_region(ctx, op.regions[1], env, forwarded)


def execute_block(ctx, ops, env: dict):
    for op in ops:
        if op.regions:
            run = REGION_RULES.get(op.opcode, _control_flow)
            for result, value in zip(op.results, run(ctx, op, env)):
                env[result] = value
            continue
        rule = RULES.get(op.opcode)
        if rule is None:
            raise NotImplementedError(f"interpreter: no rule for op {op.opcode}")
        result = rule(ctx, op, *[env[v] for v in op.operands])
        if op.result is not None:
            env[op.result] = _finish(result, op.result.element)


def run(function, grid, args) -> None:
    arrays = [a for a in args if isinstance(a, np.ndarray)]
    address_space = AddressSpace(function.name, arrays)
    base_env = {}
    for param, arg in zip(function.params, args):
        element = param.value.element
        if element.is_ptr():
            base_env[param.value] = np.uint64(arg.ctypes.data)
        else:
            base_env[param.value] = _finish(np.asarray(arg), element)
    grid = tuple(grid) + (1,) * (3 - len(grid))
    with np.errstate(all="ignore"):
        for z, y, x in itertools.product(range(grid[2]), range(grid[1]), range(grid[0])):
            ctx = Program(function, address_space, grid, (x, y, z))
            execute_block(ctx, function.body, dict(base_env))
