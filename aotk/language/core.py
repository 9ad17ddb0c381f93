"""The value types a kernel manipulates: ``constexpr`` (a compile-time Python value),
``tensor`` (a typed kir value, scalar or block) and ``tensor_descriptor`` (a compile-time
tile view of global memory whose parts are tensors).

Operators on tensors forward to ``aotk.semantic``, which owns every typing rule; nothing here
decides a result type. This module imports nothing from ``aotk.semantic``: the rules install
themselves here (``install_semantic``).
"""
from __future__ import annotations

import enum
import operator

from ..ir.types import BlockType, DType, PointerType


class constexpr:
    """A value known at compile time. Arithmetic between constexprs follows Python exactly."""

    def __init__(self, value):
        self.value = value.value if isinstance(value, constexpr) else value

    def __repr__(self) -> str:
        return f"constexpr[{self.value!r}]"

    def __index__(self):
        return operator.index(self.value)

    def __bool__(self):
        return bool(self.value)

    def __int__(self):
        return int(self.value)

    def __float__(self):
        return float(self.value)

    def __hash__(self):
        return hash(self.value)

    def __call__(self, *args, **kwargs):
        return self.value(*args, **kwargs)

    @property
    def type(self):
        """``constexpr_type(value)``, as Triton types its constexprs."""
        return constexpr_type(self.value)

    def __getattr__(self, name):
        if name == "value":   # not yet set: during unpickling or copying
            raise AttributeError(name)
        return getattr(self.value, name)


# Triton's name for a constexpr 0 (kernel libraries use it as a parameter's default).
CONSTEXPR_0 = constexpr(0)


class constexpr_type:
    """The type of a constexpr: two are equal when their values are (Triton's)."""

    def __init__(self, value):
        self.value = value.value if isinstance(value, constexpr) else value

    def __eq__(self, other):
        other = other.value if isinstance(other, constexpr) else other
        return isinstance(other, constexpr_type) and self.value == other.value

    def __hash__(self):
        return hash(self.value)

    def __repr__(self) -> str:
        return f"constexpr_type[{self.value!r}]"


def _constexpr_binary(op):
    def forward(self, other):
        if isinstance(other, tensor):
            return NotImplemented
        return constexpr(op(self.value, unwrap(other)))

    def reflected(self, other):
        if isinstance(other, tensor):
            return NotImplemented
        return constexpr(op(unwrap(other), self.value))
    return forward, reflected


for _name, _op in [("add", operator.add), ("sub", operator.sub), ("mul", operator.mul),
                   ("truediv", operator.truediv), ("floordiv", operator.floordiv),
                   ("mod", operator.mod), ("pow", operator.pow), ("and", operator.and_),
                   ("or", operator.or_), ("xor", operator.xor), ("lshift", operator.lshift),
                   ("rshift", operator.rshift)]:
    _fwd, _rev = _constexpr_binary(_op)
    setattr(constexpr, f"__{_name}__", _fwd)
    setattr(constexpr, f"__r{_name}__", _rev)

for _name, _op in [("eq", operator.eq), ("ne", operator.ne), ("lt", operator.lt),
                   ("le", operator.le), ("gt", operator.gt), ("ge", operator.ge)]:
    setattr(constexpr, f"__{_name}__", _constexpr_binary(_op)[0])

constexpr.__neg__ = lambda self: constexpr(-self.value)
constexpr.__pos__ = lambda self: constexpr(+self.value)
constexpr.__invert__ = lambda self: constexpr(~self.value)
constexpr.__abs__ = lambda self: constexpr(abs(self.value))


def unwrap(x):
    """The Python value of a constexpr; anything else as given."""
    return x.value if isinstance(x, constexpr) else x


# Every module of aotk.semantic imports the classes of this one, so this module cannot import
# aotk.semantic back, not even inside a function, without an import cycle. The rules come in
# the other way, as Triton hands its semantic object to each call: importing aotk.semantic
# installs it here, and operators look it up when they run. aotk.language imports it (through
# the tl builtins), so the rules are in place before any kernel is generated.
_installed_semantic = None


def install_semantic(semantic) -> None:
    """Makes ``semantic`` (the ``aotk.semantic`` package) the rules tensor operators use."""
    global _installed_semantic
    _installed_semantic = semantic


def _semantic():
    if _installed_semantic is None:
        raise RuntimeError("tensor operators need the typing rules of aotk.semantic, which "
                           "install themselves when it is imported; import aotk.language "
                           "(or aotk.semantic) first")
    return _installed_semantic


class tensor:
    """A kir value seen from the kernel: ``x.dtype``, ``x.shape``, operators, ``x.to()``."""

    def __init__(self, handle):
        self.handle = handle
        self.type: BlockType = handle.type

    @property
    def dtype(self):
        return self.type.element

    @property
    def shape(self):
        return tuple(constexpr(s) for s in self.type.shape)

    @property
    def numel(self):
        return constexpr(self.type.numel)

    def __repr__(self) -> str:
        return f"tensor<{self.type}>"

    def __bool__(self):
        raise TypeError("a tensor has no Python truth value at compile time; "
                        "use a constexpr for static conditions or tl.where for data")

    def to(self, dtype, fp_downcast_rounding=None, bitcast=False):
        """``tl.cast(self, dtype, ...)``, Triton's parameter order."""
        return _semantic().cast(self, unwrap(dtype), bitcast=bool(unwrap(bitcast)),
                                fp_downcast_rounding=unwrap(fp_downcast_rounding))

    @property
    def T(self):
        return _semantic().trans(self)

    # The other methods (x.sum(1), x.reshape(...), ptr.atomic_add(v), ...) are the tl
    # builtins that ``tensor_member`` attaches, as Triton's @_tensor_member_fn does.

    def __getitem__(self, index):
        return _semantic().subscript(self, index)

    # Operators: each one is a rule in aotk.semantic.
    def __add__(self, o): return _semantic().add(self, o)
    def __radd__(self, o): return _semantic().add(o, self)
    def __sub__(self, o): return _semantic().sub(self, o)
    def __rsub__(self, o): return _semantic().sub(o, self)
    def __mul__(self, o): return _semantic().mul(self, o)
    def __rmul__(self, o): return _semantic().mul(o, self)
    def __truediv__(self, o): return _semantic().truediv(self, o)
    def __rtruediv__(self, o): return _semantic().truediv(o, self)
    def __floordiv__(self, o): return _semantic().floordiv(self, o)
    def __rfloordiv__(self, o): return _semantic().floordiv(o, self)
    def __mod__(self, o): return _semantic().mod(self, o)
    def __rmod__(self, o): return _semantic().mod(o, self)
    def __and__(self, o): return _semantic().bitwise("and", self, o)
    def __rand__(self, o): return _semantic().bitwise("and", o, self)
    def __or__(self, o): return _semantic().bitwise("or", self, o)
    def __ror__(self, o): return _semantic().bitwise("or", o, self)
    def __xor__(self, o): return _semantic().bitwise("xor", self, o)
    def __rxor__(self, o): return _semantic().bitwise("xor", o, self)
    def __lshift__(self, o): return _semantic().bitwise("shl", self, o)
    def __rlshift__(self, o): return _semantic().bitwise("shl", o, self)
    def __rshift__(self, o): return _semantic().bitwise("shr", self, o)
    def __rrshift__(self, o): return _semantic().bitwise("shr", o, self)
    def __eq__(self, o): return _semantic().compare("eq", self, o)
    def __ne__(self, o): return _semantic().compare("ne", self, o)
    def __lt__(self, o): return _semantic().compare("lt", self, o)
    def __le__(self, o): return _semantic().compare("le", self, o)
    def __gt__(self, o): return _semantic().compare("gt", self, o)
    def __ge__(self, o): return _semantic().compare("ge", self, o)
    def __neg__(self): return _semantic().neg(self)
    def __pos__(self): return self
    def __invert__(self): return _semantic().invert(self)
    def __abs__(self): return _semantic().unary_math("abs", self)

    __hash__ = object.__hash__


class tensor_descriptor:
    """``tl.make_tensor_descriptor(...)``: a tile view of a tensor in global memory.

    A compile-time object, not a kir value: it holds the base pointer (a scalar tensor), the
    shape and strides (tuples of integer scalar tensors) and the block shape (ints). Each
    ``load`` / ``store`` emits one ``descriptor_load`` / ``descriptor_store`` op carrying
    all of them as operands, so passes and the interpreter never see a descriptor value."""

    def __init__(self, base: tensor, shape: tuple, strides: tuple, block_shape: tuple):
        self.base = base
        self.shape = tuple(shape)
        self.strides = tuple(strides)
        self._block_shape = tuple(block_shape)

    @property
    def dtype(self):
        return self.base.dtype.element_ty

    @property
    def block_shape(self):
        return tuple(constexpr(s) for s in self._block_shape)

    @property
    def block_type(self) -> BlockType:
        return BlockType(self.dtype, self._block_shape)

    def __repr__(self) -> str:
        return f"tensor_descriptor<{self.block_type}>"

    def load(self, offsets):
        """The block at ``offsets`` (one per dimension); elements outside the shape read 0."""
        return _semantic().descriptor_load(self, offsets)

    def store(self, offsets, value):
        """Writes ``value`` (a block of the block shape) at ``offsets``; elements outside the
        shape are dropped."""
        _semantic().descriptor_store(self, offsets, value)


class aggregate:
    """A compile-time structure whose runtime parts are tensors (a block pointer): it can be
    re-bound in a runtime loop or branch, where only its tensor parts cross the region
    boundary and the rest stays compile-time.

    ``leaves()`` lists the parts (tensors, or anything a loop may carry); ``with_leaves``
    builds the same structure on new parts; ``structure_key()`` is what must stay equal
    across paths (the compile-time parts)."""

    def leaves(self) -> list:
        raise NotImplementedError

    def with_leaves(self, leaves: list):
        raise NotImplementedError

    def structure_key(self):
        raise NotImplementedError


class block_pointer(aggregate):
    """``tl.make_block_ptr(...)``: a pointer to a block of a tensor in global memory that
    knows the tensor's shape, so loads and stores can check its bounds.

    Its parts: the base (a scalar pointer tensor), the shape and strides (int64 scalar
    tensors), the offsets (int32 scalar tensors, what ``tl.advance`` moves) and, at compile
    time, the block shape and order. Loads and stores through it are composed of pointer
    arithmetic and masks (``aotk.semantic.block_pointers``)."""

    def __init__(self, base: tensor, shape: tuple, strides: tuple, offsets: tuple,
                 block_shape: tuple, order: tuple):
        self.base = base
        self.shape = tuple(shape)
        self.strides = tuple(strides)
        self.offsets = tuple(offsets)
        self.block_shape = tuple(block_shape)
        self.order = tuple(order)

    @property
    def dtype(self):
        """The pointer type of one element (``p.dtype.element_ty`` is the element type)."""
        return self.base.dtype

    @property
    def type(self):
        return PointerType(BlockType(self.base.dtype.element_ty, self.block_shape))

    def __repr__(self) -> str:
        return f"block_pointer<{BlockType(self.base.dtype.element_ty, self.block_shape)}>"

    def leaves(self) -> list:
        return [self.base, *self.shape, *self.strides, *self.offsets]

    def with_leaves(self, leaves: list):
        rank = len(self.block_shape)
        base, rest = leaves[0], list(leaves[1:])
        return block_pointer(base, rest[:rank], rest[rank:2 * rank], rest[2 * rank:],
                             self.block_shape, self.order)

    def structure_key(self):
        return ("block_pointer", self.block_shape, self.order)

    def advance(self, offsets):
        """``tl.advance(self, offsets)``."""
        return _semantic().advance(self, offsets)


class const:
    """Triton's annotation for a pointer to constant data. aotk accepts it in annotations
    and does not check it: a store through such a pointer is not rejected."""


class condition:
    """``while tl.condition(c, disable_licm=True):``: a while loop's condition with a hint
    for the compiler (Triton's). aotk hoists no loop-invariant code out of while loops, so
    the hint holds already; the loop runs on ``c``."""

    def __init__(self, arg1, disable_licm=False):
        self.condition = arg1
        self.disable_licm = disable_licm


class PropagateNan(enum.Enum):
    """``tl.minimum`` / ``maximum`` / ``clamp``'s ``propagate_nan``: NONE (the default)
    returns the other operand where one is NaN, ALL returns NaN (Triton's values)."""
    NONE = 0x0000
    ALL = 0xFFFF


def constexpr_function(fn):
    """Marks a plain Python function that kernels may call on compile-time values (Triton's
    @triton.constexpr_function): it runs while the kernel compiles, on the constexprs'
    values, and its result is a constexpr. Outside kernels it is the function itself."""
    fn.__aotk_constexpr_function__ = True
    return fn


def is_constexpr_function(fn) -> bool:
    return getattr(fn, "__aotk_constexpr_function__", False)


def tensor_member(fn):
    """Makes the tl builtin ``fn`` also a method of ``tensor``: ``x.fn(...)`` is
    ``fn(x, ...)`` (Triton's @_tensor_member_fn)."""
    setattr(tensor, fn.__name__, fn)
    return fn


def builtin(fn):
    """Marks a ``tl`` function: callable only while a kernel is being compiled."""
    fn.__aotk_builtin__ = True
    return fn


def named_builtin(fn, name: str, doc: str):
    """``builtin`` for a function a factory made (one per opcode, kind or libdevice
    name): it takes ``name`` (as ``tl``'s attribute and in error messages) and ``doc``."""
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return builtin(fn)


def is_builtin(fn) -> bool:
    return getattr(fn, "__aotk_builtin__", False)


__all__ = ["constexpr", "constexpr_type", "condition", "const", "tensor", "tensor_descriptor", "aggregate", "block_pointer", "builtin", "named_builtin", "is_builtin", "tensor_member",
           "PropagateNan", "constexpr_function", "is_constexpr_function",
           "unwrap", "install_semantic", "DType", "PointerType", "BlockType"]
