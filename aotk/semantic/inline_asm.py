"""Typing rules of ``tl.inline_asm_elementwise``, with Triton 3.6's semantics.

In: the assembly text, its constraints, the arguments (broadcast to one shape, without
promotion, as Triton does), one dtype or a tuple of them, ``is_pure`` and ``pack``. Out:
one ``inline_asm`` op with a result per dtype, all of the arguments' shape (a tuple of
tensors when ``dtype`` was a tuple). Each run of the assembly takes ``pack`` elements of
every argument; arguments narrower than 32 bits come packed into 32-bit registers
(``min(32 // bits, pack)`` elements each), and so do the results. The constraints must
name exactly the registers that packing gives: checked here, so that a mismatch is an
error at the kernel's line rather than a failure inside LLVM.
"""
from __future__ import annotations

from ..ir.types import BlockType
from ..language.core import tensor, unwrap
from .building import current_builder
from .promotion import broadcast_shapes, to_tensor
from .views import broadcast_to_shape


def _bits(dtype) -> int:
    return 64 if dtype.is_ptr() else max(8, dtype.bits)


def operand_registers(dtype, pack: int) -> int:
    """How many asm operands one argument of ``dtype`` takes per run of ``pack`` elements."""
    bits = _bits(dtype)
    per_register = min(32 // bits, pack) if bits < 32 else 1
    return pack // per_register


def result_registers(dtype, pack: int) -> int:
    """How many asm outputs one result of ``dtype`` takes per run of ``pack`` elements."""
    per_register = min(max(32 // _bits(dtype), 1), pack)
    return pack // per_register


def split_constraints(constraints: str) -> tuple:
    """(outputs, inputs, clobbers): the constraint codes without spaces, outputs with their
    '=', clobbers with their '~'."""
    codes = [c.strip() for c in constraints.split(",") if c.strip()]
    outputs = tuple(c for c in codes if c.startswith("="))
    clobbers = tuple(c for c in codes if c.startswith("~"))
    inputs = tuple(c for c in codes if c not in outputs and c not in clobbers)
    return outputs, inputs, clobbers


def inline_asm_elementwise(asm, constraints, args, dtype, is_pure, pack):
    """The results of running ``asm`` over the elements of ``args``."""
    asm, constraints = unwrap(asm), unwrap(constraints)
    pack, is_pure = unwrap(pack), bool(unwrap(is_pure))
    if not isinstance(asm, str) or not isinstance(constraints, str):
        raise TypeError("tl.inline_asm_elementwise takes the assembly and its constraints as "
                        "strings")
    if not isinstance(pack, int) or isinstance(pack, bool) or pack < 1 or pack & (pack - 1):
        raise ValueError(f"pack must be a power of two >= 1, got {pack!r}")
    dtype = unwrap(dtype)
    several = isinstance(dtype, (tuple, list))
    dtypes = tuple(unwrap(d) for d in dtype) if several else (dtype,)
    if not dtypes:
        raise ValueError("tl.inline_asm_elementwise needs at least one result dtype (return "
                         "a dummy value if the assembly has no output)")
    args = [to_tensor(a) for a in (unwrap(args) or [])]
    shape = ()
    for a in args:
        shape = broadcast_shapes(shape, a.type.shape)
    args = [broadcast_to_shape(a, shape) for a in args]
    outputs, inputs, clobbers = split_constraints(constraints)
    wanted_outputs = sum(result_registers(d, pack) for d in dtypes)
    wanted_inputs = sum(operand_registers(a.dtype, pack) for a in args)
    if (len(outputs), len(inputs)) != (wanted_outputs, wanted_inputs):
        raise ValueError(
            f"the constraints {constraints!r} name {len(outputs)} outputs and {len(inputs)} "
            f"inputs, but {len(dtypes)} result(s) and {len(args)} argument(s) with pack={pack} "
            f"take {wanted_outputs} outputs and {wanted_inputs} inputs (elements narrower than "
            "32 bits are packed into 32-bit registers)")
    op = current_builder().create_region_op(
        "inline_asm", [a.handle for a in args], [], [BlockType(d, shape) for d in dtypes],
        asm=asm, outputs=outputs, inputs=inputs, clobbers=clobbers, pure=is_pure, pack=pack)
    results = tuple(tensor(v) for v in op.results)
    return results if several else results[0]


__all__ = ["inline_asm_elementwise"]
