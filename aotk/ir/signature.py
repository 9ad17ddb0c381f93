"""Kernel signatures: ``"*fp32:16, i32"`` or ``{param: "*fp32:16"}`` <-> a ``Signature``.

In: signature text (one entry per runtime parameter, in the kernel's order) or a mapping
keyed by parameter name, plus the kernel's runtime parameter names. Out: a frozen
``Signature`` holding each parameter's type (spelled as ``ir.types.parse_type`` reads it)
and hint: ":1", an integer equal to 1; ":D", a pointer aligned to D bytes or an integer
divisible by D. ``str(signature)`` prints the canonical text. This module is the only
parser and printer of that syntax; a malformed signature raises ``SignatureError``, whose
one-line message callers prefix with where the signature came from.

A parameter that receives a host-built tensor descriptor is written as Triton spells its
type, ``tensordesc<fp16[64, 64]>`` (``tensordesc<fp16[64, 64], nan>`` for NaN padding):
it stands for the runtime parameters ``NAME_base`` (``*fp16``), ``NAME_shape<d>`` and
``NAME_stride<d>`` (``i32``; the last stride is 1), and the kernel is specialized on its
``HostDescriptorLayout`` (``Signature.descriptors``).
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import NamedTuple

from .types import HINTS_TEXT, SIGNATURE_HINTS, PointerType, int32, parse_type

_HINT_SPELLINGS = {str(hint): hint for hint in SIGNATURE_HINTS}
# What Triton's JIT proves of an aligned pointer or a divisible integer.
SPECIALIZED_HINT = 16


class SignatureError(ValueError):
    """A signature that does not fit its kernel, or uses an unknown type or hint."""


@dataclass(frozen=True)
class HostDescriptorLayout:
    """What a kernel is specialized on for a parameter that receives a host-built tensor
    descriptor (``aotk.tools.tensor_descriptor``): the block shape and the padding. Given as
    that parameter's constant; its base, shape and strides are runtime parameters
    ``NAME_base``, ``NAME_shape<d>`` and ``NAME_stride<d>`` (all but the last, which is 1)."""
    block_shape: tuple
    padding: str = "zero"

    @property
    def rank(self) -> int:
        return len(self.block_shape)

    def runtime_names(self, name: str) -> list:
        return ([f"{name}_base"] + [f"{name}_shape{d}" for d in range(self.rank)]
                + [f"{name}_stride{d}" for d in range(self.rank - 1)])

    def type_text(self, element) -> str:
        """Triton's spelling of the descriptor type, as signatures write it."""
        padding = ", nan" if self.padding == "nan" else ""
        return f"tensordesc<{element.short}[{', '.join(map(str, self.block_shape))}]{padding}>"


def runtime_parameter_names(runtime_names, constants: dict) -> list:
    """A kernel's runtime parameters for one specialization: those given as None in
    ``constants`` left out, host descriptors expanded."""
    names = []
    for name in runtime_names:
        value = constants.get(name, ...)
        if isinstance(value, HostDescriptorLayout):
            names += value.runtime_names(name)
        elif value is ...:
            names.append(name)
    clashes = sorted({n for n in names if names.count(n) > 1})
    if clashes:
        raise SignatureError(f"the parameter(s) {', '.join(clashes)} of a tensor descriptor's "
                             "base, shape or strides clash with a parameter of that name; "
                             "rename it")
    return names


class SignatureParameter(NamedTuple):
    name: str
    type: object          # DType | PointerType
    hint: int | None

    def __str__(self) -> str:
        return self.type.short + (f":{self.hint}" if self.hint else "")


def check_hint(parameter: SignatureParameter):
    """SignatureError unless ``parameter``'s hint is one its type can carry."""
    name, type_, hint = parameter
    if hint is None:
        return
    if hint not in SIGNATURE_HINTS:
        raise SignatureError(f"hint :{hint} on {name} is not supported ({HINTS_TEXT})")
    if hint == 1 and not type_.is_int():
        raise SignatureError(f"hint :1 needs an integer parameter, {name} is {type_}")
    if type_.is_floating():
        raise SignatureError(f"float parameter {name} cannot carry a hint")


@dataclass(frozen=True)
class Signature:
    """The types and hints of a kernel's runtime parameters, in the kernel's order."""
    parameters: tuple     # SignatureParameter per runtime parameter
    # (name, HostDescriptorLayout) per parameter written as tensordesc<...>: its parts are
    # in ``parameters`` as NAME_base, NAME_shape<d>, NAME_stride<d>
    descriptors: tuple = ()

    def __post_init__(self):
        for parameter in self.parameters:
            check_hint(parameter)

    def __hash__(self) -> int:
        return self._hash

    @cached_property
    def _hash(self) -> int:
        # Computed once: the JIT launch looks its compiled kernels up by signature.
        return hash((self.parameters, self.descriptors))

    def __reduce__(self):
        # Pickled (for the build's worker processes) without the cached values: a str
        # hash is not the same in another process.
        return (Signature, (self.parameters, self.descriptors))

    @classmethod
    def parse(cls, signature, names, kernel: str = "the kernel") -> "Signature":
        """``"*fp32:16, i32"``, ``{param: "*fp32:16"}`` or a ``Signature`` for the runtime
        parameters ``names`` of ``kernel`` -> a Signature, else SignatureError."""
        names = tuple(names)
        if isinstance(signature, Signature):
            if signature.names != names:
                raise SignatureError(f"signature is for ({', '.join(signature.names)}) but "
                                     f"{kernel} has runtime parameters ({', '.join(names)})")
            return signature
        if isinstance(signature, Mapping):
            unknown = set(signature) - set(names)
            if unknown:
                raise SignatureError(f"signature names {sorted(unknown)} which are not runtime "
                                     f"parameters of {kernel} ({', '.join(names)})")
            missing = [n for n in names if n not in signature]
            if missing:
                raise SignatureError(f"signature lacks a type for {', '.join(missing)}")
            entries = [(n, str(signature[n])) for n in names]
        elif isinstance(signature, str):
            parts = split_entries(signature)
            if len(parts) != len(names):
                raise SignatureError(f"signature has {len(parts)} entries but {kernel} has "
                                     f"{len(names)} runtime parameters ({', '.join(names)})")
            entries = list(zip(names, parts))
        else:
            raise SignatureError(f'expected a signature like "*fp32:16, i32" or '
                                 f'{{param: "*fp32:16"}}, got {signature!r}')
        parameters, descriptors = [], []
        for name, text in entries:
            if text.strip().startswith("tensordesc"):
                layout, parts = _parse_descriptor(name, text)
                descriptors.append((name, layout))
                parameters += parts
            else:
                parameters.append(_parse_entry(name, text))
        return cls(tuple(parameters), tuple(descriptors))

    @classmethod
    def from_types(cls, types: Mapping, hints: Mapping | None = None,
                   names=None) -> "Signature":
        """{param: type} and {param: hint} (the form ``generate_kir`` reads), in the order
        of ``names`` (default: the order of ``types``)."""
        hints = hints or {}
        return cls(tuple(SignatureParameter(n, types[n], hints.get(n))
                         for n in (types if names is None else names)))

    def __str__(self) -> str:
        return ", ".join(str(p) for p in self.parameters)

    def __iter__(self):
        return iter(self.parameters)

    def __len__(self) -> int:
        return len(self.parameters)

    def __getitem__(self, name: str) -> SignatureParameter:
        for parameter in self.parameters:
            if parameter.name == name:
                return parameter
        raise KeyError(name)

    @cached_property
    def names(self) -> tuple:
        return tuple(p.name for p in self.parameters)

    @cached_property
    def types(self) -> dict:
        """{param: DType | PointerType}."""
        return {p.name: p.type for p in self.parameters}

    @cached_property
    def hints(self) -> dict:
        """{param: hint}, for the hinted parameters only."""
        return {p.name: p.hint for p in self.parameters if p.hint is not None}

    @cached_property
    def cache_key(self) -> str:
        """The same text for equal signatures, in every process: names, types and hints."""
        return ", ".join(f"{p.name}={p}" for p in self.parameters)

    def specialized(self) -> "Signature":
        """What a build for aligned data assumes: every pointer and every (non-bool)
        integer that has no hint gets ":16", except a host descriptor's extents in its
        leading dimensions (a batch count of 3): nothing in the code gains from them (only
        the innermost extent decides vector widths under masks, and TMA needs the base and
        strides aligned, not the shape), and assuming them would keep such calls off it."""
        leading = {f"{name}_shape{d}" for name, layout in self.descriptors
                   for d in range(layout.rank - 1)}
        return Signature(tuple(
            p._replace(hint=SPECIALIZED_HINT)
            if p.hint is None and takes_divisibility(p.type) and p.name not in leading else p
            for p in self.parameters),
            self.descriptors)


def takes_divisibility(type_) -> bool:
    """Whether ``type_`` can carry a ":D" hint worth proving: pointers (alignment) and
    integers other than bool (divisibility)."""
    return type_.is_ptr() or (type_.is_int() and not type_.is_bool())


def split_entries(text: str) -> list:
    """The entries of signature text, split at the commas outside ``<...>`` and ``[...]``."""
    entries, depth, current = [], 0, []
    for ch in text:
        if ch in "<[":
            depth += 1
        elif ch in ">]":
            depth -= 1
        if ch == "," and depth == 0:
            entries.append("".join(current))
            current = []
        else:
            current.append(ch)
    entries.append("".join(current))
    return [e.strip() for e in entries if e.strip()]


_DESCRIPTOR = re.compile(r"tensordesc<\s*(\w+)\s*\[([^\]]*)\]\s*(?:,\s*(\w+)\s*)?>")


def _parse_descriptor(name: str, text: str) -> tuple:
    """(HostDescriptorLayout, its runtime SignatureParameters) of a tensordesc<...> entry."""
    match = _DESCRIPTOR.fullmatch(text.strip())
    if match is None:
        raise SignatureError(f"{name}: {text.strip()!r} is not a descriptor type; write it as "
                             "tensordesc<fp16[64, 64]> (or tensordesc<fp16[64, 64], nan>)")
    type_text, block_text, padding = match.groups()
    try:
        element = parse_type(type_text)
    except ValueError as exc:
        raise SignatureError(f"{name}: {exc}") from None
    if element.is_ptr():
        raise SignatureError(f"{name}: a descriptor's element type is a scalar type, "
                             f"got {type_text}")
    try:
        block_shape = tuple(int(b) for b in block_text.split(","))
    except ValueError:
        raise SignatureError(f"{name}: the block shape [{block_text}] must be integers") from None
    if padding not in (None, "zero", "nan"):
        raise SignatureError(f"{name}: padding must be zero or nan, got {padding}")
    layout = HostDescriptorLayout(block_shape, padding or "zero")
    names = layout.runtime_names(name)
    parts = [SignatureParameter(names[0], PointerType(element), None)]
    parts += [SignatureParameter(n, int32, None) for n in names[1:]]
    return layout, parts


def _parse_entry(name: str, text: str) -> SignatureParameter:
    type_text, _, hint_text = text.strip().partition(":")
    try:
        type_ = parse_type(type_text)
    except ValueError as exc:
        raise SignatureError(str(exc)) from None
    hint = None
    hint_text = hint_text.strip()
    if hint_text:
        if hint_text not in _HINT_SPELLINGS:
            raise SignatureError(f"hint :{hint_text} on {name} is not supported ({HINTS_TEXT})")
        hint = _HINT_SPELLINGS[hint_text]
    return SignatureParameter(name, type_, hint)
