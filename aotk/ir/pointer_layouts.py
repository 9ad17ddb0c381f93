"""Declared pointer layouts: a kernel entry's ``contiguous`` / ``strides`` <-> ``PointerLayout``s.

A pointer parameter carries no shape or strides, so a kernel that indexes a 2D tensor as
``row * row_stride + col`` quietly reads the wrong elements of a tensor laid out otherwise.
A manifest may declare what it assumes, per ``[[kernel]]``:

    contiguous = ["x_ptr", "out_ptr"]            # or true: every pointer parameter
    strides = { in_ptr = ["in_row_stride", 1] }  # per dimension: a parameter or a number

In: those two values and the kernel's parameters (``SignatureParameter``s), or the
``pointer_layouts`` entry of a built library's ``<name>_info()`` JSON. Out: one ``PointerLayout``
per declared pointer, in parameter order, with its JSON form and the text the header and
the call-time errors print. ``contiguous``: the tensor is dense row-major, as torch's
``is_contiguous()``; ``strides``: the tensor has one dimension per entry, and its stride
there (in elements) is the value passed for the named integer parameter in the same call,
or the number. Dimensions of size 1, and empty tensors, are never wrong (no element's
address depends on them). This module is the only parser and printer of the declaration; a
bad one raises ``LayoutError`` whose ``key`` names the entry (``strides.in_ptr[0]``), for
the caller to prefix with the manifest and kernel.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass

# The manifest keys of a [[kernel]] table this module reads.
LAYOUT_KEYS = ("contiguous", "strides")


class LayoutError(ValueError):
    """A declaration that is malformed or does not fit the kernel's parameters."""

    def __init__(self, key: str, message: str):
        super().__init__(message)
        self.key = key


@dataclass(frozen=True)
class PointerLayout:
    """What the tensor passed for pointer parameter ``name`` must look like."""
    name: str
    # None: dense row-major, of any shape. Else one entry per dimension: the name of an
    # integer parameter giving that stride, or the stride itself (in elements).
    strides: tuple | None = None

    def to_json(self) -> dict:
        return {"contiguous": True} if self.strides is None else {"strides": list(self.strides)}

    @classmethod
    def from_json(cls, name: str, entry: dict) -> "PointerLayout":
        strides = entry.get("strides")
        return cls(name, None if strides is None else tuple(strides))

    def __str__(self) -> str:
        """As the header prints it: ``contiguous (dense row-major)`` or ``strides
        (in_row_stride, 1)``."""
        if self.strides is None:
            return "contiguous (dense row-major)"
        return f"strides {_tuple_text(self.strides)}"

    def expected_strides(self, shape: tuple, values: dict) -> tuple:
        """The strides a tensor of ``shape`` must have, in elements, given the call's
        parameter ``values`` (a parameter's value where the declaration names one)."""
        if self.strides is None:
            return dense_strides(shape)
        return tuple(values[entry] if isinstance(entry, str) else entry
                     for entry in self.strides)

    def expected_text(self, values: dict) -> str:
        """The declared strides with the call's values: ``(in_row_stride=1000, 1)``."""
        return _tuple_text([f"{entry}={values[entry]}" if isinstance(entry, str) else entry
                            for entry in self.strides])


def dense_strides(shape: tuple) -> tuple:
    """Row-major strides, in elements, of a dense tensor of ``shape``."""
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return tuple(reversed(strides))


def strides_match(shape: tuple, strides: tuple, expected: tuple) -> bool:
    """Whether ``strides`` address the elements of ``shape`` as ``expected`` does: a
    dimension of size 1 is never used to step, and an empty tensor has no element."""
    if 0 in shape:
        return True
    return all(size == 1 or stride == want
               for size, stride, want in zip(shape, strides, expected))


def _tuple_text(entries) -> str:
    entries = [str(entry) for entry in entries]
    return f"({entries[0]},)" if len(entries) == 1 else f"({', '.join(entries)})"


def check_declaration(contiguous, strides) -> None:
    """LayoutError where the values' types are wrong, before any kernel is read."""
    if not isinstance(contiguous, (bool, list)) or isinstance(contiguous, list) and not all(
            isinstance(name, str) for name in contiguous):
        raise LayoutError("contiguous", "expected true or a list of pointer parameter names "
                          f"such as [\"x_ptr\", \"out_ptr\"], got {contiguous!r}")
    if not isinstance(strides, dict):
        raise LayoutError("strides", "expected an inline table such as { in_ptr = "
                          f"[\"in_row_stride\", 1] }}, got {strides!r}")
    for name, entries in strides.items():
        if not isinstance(entries, list) or not entries:
            raise LayoutError(f"strides.{name}", "expected a list with one entry per dimension "
                              f"(an integer parameter's name or a number), got {entries!r}")
        for d, entry in enumerate(entries):
            if isinstance(entry, bool) or not isinstance(entry, (str, int)) or \
                    isinstance(entry, int) and entry < 0:
                raise LayoutError(f"strides.{name}[{d}]", "expected the name of an integer "
                                  f"parameter or a stride of 0 or more, got {entry!r}")


def parse_layouts(contiguous, strides, parameters, descriptors=()) -> tuple:
    """The ``PointerLayout``s that ``contiguous`` and ``strides`` declare for a kernel of
    ``parameters`` (its ``SignatureParameter``s; ``descriptors``: its (name,
    HostDescriptorLayout) pairs, whose parts take their layout from the descriptor), in
    parameter order; else LayoutError."""
    check_declaration(contiguous, strides)
    types = {p.name: p.type for p in parameters}
    descriptor_of = {part: name for name, layout in descriptors
                     for part in layout.runtime_names(name)}
    pointers = [p.name for p in parameters if p.type.is_ptr() and p.name not in descriptor_of]

    def check_pointer(key: str, name: str):
        if name in descriptor_of:
            raise LayoutError(key, f"'{name}' is part of the tensor descriptor "
                              f"'{descriptor_of[name]}', whose shape and strides the call "
                              "passes; declare nothing for it")
        if name not in types:
            raise LayoutError(key, f"'{name}' is not a parameter of the kernel"
                              f"{_hint(name, pointers)}")
        if not types[name].is_ptr():
            raise LayoutError(key, f"'{name}' is a parameter of type {types[name].short}, "
                              f"not a pointer{_hint(name, pointers)}")

    dense = set()
    if contiguous is True:
        dense = {name for name in pointers if name not in strides}
    elif contiguous:
        for i, name in enumerate(contiguous):
            check_pointer(f"contiguous[{i}]", name)
            if name in strides:
                raise LayoutError(f"contiguous[{i}]", f"'{name}' also has `strides`; keep one "
                                  "of the two")
        dense = set(contiguous)
    integers = [p.name for p in parameters if p.type.is_int() and not p.type.is_bool()
                and p.name not in descriptor_of]
    for name, entries in strides.items():
        check_pointer(f"strides.{name}", name)
        for d, entry in enumerate(entries):
            if isinstance(entry, str) and entry not in integers:
                what = f"a parameter of type {types[entry].short}" if entry in types else \
                    "not a parameter of the kernel"
                raise LayoutError(f"strides.{name}[{d}]", f"'{entry}' is {what}; a stride "
                                  f"is an integer parameter or a number{_hint(entry, integers)}")
    return tuple(PointerLayout(name, None if name in dense else tuple(strides[name]))
                 for name in types if name in dense or name in strides)


def _hint(name: str, candidates: list) -> str:
    close = difflib.get_close_matches(name, candidates, n=1)
    return f"; did you mean '{close[0]}'?" if close else \
        f" (they are: {', '.join(candidates)})" if candidates else ""


def layouts_from_json(entries: dict, parameter_names) -> tuple:
    """A built library's ``pointer_layouts`` info entry -> its ``PointerLayout``s, in
    parameter order (libraries built before layouts were declared have none)."""
    return tuple(PointerLayout.from_json(name, entries[name])
                 for name in parameter_names if name in entries)
