"""``aotk.toml`` -> a validated ``Manifest``.

In: the manifest path. Out: dataclasses with every default filled in, or a
``ManifestError`` whose one-line message names the manifest file and the key at fault
(with "did you mean ...?" for unknown keys). Nothing is compiled or written here.
"""
from __future__ import annotations

import difflib
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from ..ir.pointer_layouts import LAYOUT_KEYS, LayoutError, check_declaration
from ..options import SUPPORTED_TARGETS
from ..targets import MAX_REGISTERS_PER_THREAD
from .expressions import DEVICE_NAMES, FUNCTIONS

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10
    import tomli as tomllib

DEFAULT_TARGETS = ("sm_80", "sm_90")
KNOWN_TARGETS = SUPPORTED_TARGETS
_C_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_EXPRESSION_TOKEN = re.compile(r"\s*(?:(\d+)|([A-Za-z_][A-Za-z0-9_]*)|(<=|>=|==|!=|&&|\|\||<<|>>|[-+*/%()<>!&|^~?:,]))")
# Names a kernel parameter cannot have in the generated C: C (and C++, for the header)
# keywords, and the locals of the generated functions.
RESERVED_C_NAMES = {
    "auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else",
    "enum", "extern", "float", "for", "goto", "if", "inline", "int", "long", "register",
    "restrict", "return", "short", "signed", "sizeof", "static", "struct", "switch",
    "typedef", "union", "unsigned", "void", "volatile", "while", "bool", "class", "new",
    "delete", "template", "this", "true", "false", "namespace", "operator", "private",
    "public", "protected", "virtual", "friend", "typename", "using", "explicit", "mutable",
    "stream", "grid", "params", "variant", "failure", "bad", "holds", "status",
    "tensor_maps"}
# The C functions and data each kernel adds to the library (name_kernel<suffix>), and the
# library's own (name_<suffix>).
KERNEL_SYMBOLS = {"": "launcher", "_select": "selector", "_variant_name": "variant_name()",
                  "_names": "variant names", "_pick": "dispatch function",
                  "_tuned": "tuned dispatch"}
LIBRARY_SYMBOLS = {"_last_error": "last_error()", "_info": "info()",
                   "_modules_loaded": "modules_loaded()", "_variants": "variant table"}


def _specialize(path, where: str, value) -> str:
    if value not in SPECIALIZE_VALUES:
        _fail(path, where, "expected one of " + ", ".join(f'"{v}"' for v in SPECIALIZE_VALUES)
              + f", got {value!r}")
    return value


class ManifestError(Exception):
    """One line: ``<manifest>: <key>: <what is wrong>``."""


@dataclass
class Variant:
    index: int
    constants: dict
    when: str | None
    num_warps: int
    num_stages: int
    signature: str               # as written; plan.py parses it against the function
    specialize: str = "auto"     # the kernel's unless the variant says otherwise
    maxnreg: int | None = None   # registers per thread at most (PTX .maxnreg); the kernel's
    # A variant made from an autotuned kernel's configs (plan.py): the config's index, and
    # the index of the tuned choice it stands for (None: the fallback, taken when no tuned
    # choice applies).
    config: int | None = None
    tuned_choice: int | None = None
    enable_fp_fusion: bool = True   # a * b + c may become one FMA (Triton's option); the kernel's
    num_ctas: int = 1            # 2: programs run in pairs sharing TMA tiles; the kernel's


@dataclass
class Tune:
    """``[kernel.tune]``: where ``aotk tune`` measures an autotuned kernel."""
    points: list                 # [{key name: value}]: the shapes to tune at
    arguments: dict              # pointer parameter -> element count; scalar -> value (C
    #                              expressions over the key names)
    work: str | None = None      # work per call (C expression over the key names)
    work_unit: str = "flop"      # "flop" (TFLOP/s) or "byte" (GB/s)
    # pointer parameter -> how its buffer is filled, where not with random values:
    # ("zeros",), ("ones",) or ("integers", low, high) with C expressions over the key
    fills: dict = field(default_factory=dict)


@dataclass
class Kernel:
    name: str
    source: Path
    function: str
    signature: str               # as written; plan.py parses it against the function
    grid: list
    num_warps: int
    num_stages: int
    specialize: str
    variants: list = field(default_factory=list)
    # The source file's `import triton` loads aotk ([library] redirect_triton, default true).
    redirect_triton: bool = True
    maxnreg: int | None = None
    enable_fp_fusion: bool = True
    num_ctas: int = 1
    explicit_variants: bool = True   # False: no [[kernel.variant]] (an autotuned kernel's
    #                                  configs, or the tuning file, make them)
    tune: Tune | None = None
    # The layouts its pointer arguments must have (ir/pointer_layouts.py; plan.py checks
    # the names against the parameters): true or a list of names, {pointer: [stride, ...]}.
    contiguous: bool | list = False
    strides: dict = field(default_factory=dict)


@dataclass
class Manifest:
    path: Path
    name: str
    targets: list
    out_dir: Path
    kernels: list


_LIBRARY_KEYS = {"name", "targets", "out_dir", "redirect_triton"}
_KERNEL_KEYS = {"name", "source", "function", "signature", "grid", "num_warps", "num_stages",
                "maxnreg", "enable_fp_fusion", "num_ctas",
                "specialize", "variant", "constants", "when", "tune", *LAYOUT_KEYS}
_TUNE_KEYS = {"points", "arguments", "work", "work_unit"}
_VARIANT_KEYS = {"when", "constants", "num_warps", "num_stages", "signature", "specialize",
                 "maxnreg", "enable_fp_fusion", "num_ctas"}
# "auto": the aligned/divisible build, then the generic one; "none": the generic build only;
# "aligned": the aligned/divisible build only (a variant worth running on aligned data alone).
SPECIALIZE_VALUES = ("auto", "none", "aligned")
_TOP_KEYS = {"library", "kernel"}


def _fail(path, key, message):
    raise ManifestError(f"{path}: {key}: {message}")


def check_targets(targets: list) -> list:
    """The targets, or ValueError naming the first unknown one."""
    for target in targets:
        if target not in KNOWN_TARGETS:
            raise ValueError(f"unknown target {target!r}; expected one of "
                             f"{', '.join(KNOWN_TARGETS)}")
    return list(targets)


def _check_keys(path, where, table, allowed):
    if not isinstance(table, dict):
        _fail(path, where, "expected a table")
    for key in table:
        if key not in allowed:
            close = difflib.get_close_matches(key, sorted(allowed), n=1)
            hint = f"; did you mean '{close[0]}'?" if close else \
                f" (known keys: {', '.join(sorted(allowed))})"
            _fail(path, f"{where}.{key}" if where else key, f"unknown key{hint}")


def _typed(path, key, value, kind, what):
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        _fail(path, key, f"expected {what}, got {value!r}")
    return value


def _num_warps(path, key, value):
    _typed(path, key, value, int, "an integer")
    if value < 1 or value > 32 or value & (value - 1):
        _fail(path, key, f"must be a power of two from 1 to 32, got {value}")
    return value


def _num_stages(path, key, value):
    _typed(path, key, value, int, "an integer")
    if value < 1:
        _fail(path, key, f"must be at least 1, got {value}")
    return value


def _maxnreg(path, key, value):
    if value is None:
        return None
    _typed(path, key, value, int, "an integer")
    if not 16 <= value <= MAX_REGISTERS_PER_THREAD:
        _fail(path, key, f"must be from 16 to {MAX_REGISTERS_PER_THREAD} registers per thread, "
                         f"got {value}")
    return value


def _num_ctas(path, key, value):
    _typed(path, key, value, int, "an integer")
    if value not in (1, 2):
        _fail(path, key, f"must be 1 (programs alone) or 2 (programs in pairs sharing their "
                         f"TMA tiles), got {value}")
    return value


def check_expression(path, key, text, names):
    """A C expression over ``names`` (plus ``cdiv``, the functions and the device's names
    such as ``num_sms``): tokens must be numbers, known names, operators; parentheses
    balance."""
    if not isinstance(text, str) or not text.strip():
        _fail(path, key, f"expected a C expression string, got {text!r}")
    position, depth = 0, 0
    while position < len(text):
        match = _EXPRESSION_TOKEN.match(text, position)
        if not match or match.end() == position:
            if text[position:].strip() == "":
                break
            _fail(path, key, f"cannot parse {text!r} at {text[position:].strip()[:10]!r}")
        number, name, symbol = match.groups()
        if name and name != "cdiv" and name not in FUNCTIONS and name not in names \
                and name not in DEVICE_NAMES:
            close = difflib.get_close_matches(name, sorted(set(names) | set(DEVICE_NAMES)), n=1)
            hint = f"; did you mean '{close[0]}'?" if close else ""
            _fail(path, key, f"{text!r} names '{name}', which is not a scalar parameter or "
                             f"constant of this kernel{hint}")
        depth += symbol == "("
        depth -= symbol == ")"
        if depth < 0:
            _fail(path, key, f"unbalanced parentheses in {text!r}")
        position = match.end()
    if depth:
        _fail(path, key, f"unbalanced parentheses in {text!r}")
    return text.strip()


def load_manifest(path) -> Manifest:
    path = Path(path)
    if not path.is_file():
        raise ManifestError(f"{path}: no such manifest")
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise ManifestError(f"{path}: invalid TOML: {exc}") from None
    _check_keys(path, "", data, _TOP_KEYS)
    library = data.get("library")
    if library is None:
        _fail(path, "library", "missing [library] table")
    _check_keys(path, "library", library, _LIBRARY_KEYS)
    name = _typed(path, "library.name", library.get("name"), str, "a string")
    if not _C_IDENTIFIER.match(name):
        _fail(path, "library.name", f"{name!r} must be a C identifier (it prefixes every symbol)")
    targets = library.get("targets", list(DEFAULT_TARGETS))
    if not isinstance(targets, list) or not targets:
        _fail(path, "library.targets", "expected a non-empty list such as [\"sm_80\", \"sm_90\"]")
    try:
        check_targets(targets)
    except ValueError as exc:
        _fail(path, "library.targets", str(exc))
    out_dir = path.parent / _typed(path, "library.out_dir", library.get("out_dir", "build"), str,
                                   "a string")
    redirect_triton = _typed(path, "library.redirect_triton", library.get("redirect_triton", True),
                             bool, "true or false")
    kernels_data = data.get("kernel", [])
    if not isinstance(kernels_data, list) or not kernels_data:
        _fail(path, "kernel", "expected at least one [[kernel]] table")
    kernels, seen = [], set()
    for k, table in enumerate(kernels_data):
        if not isinstance(table, dict):
            _fail(path, f"kernel[{k}]", "expected a table")
        named = isinstance(table.get("name"), str)
        where = f"kernel.{table['name']}" if named else f"kernel[{k}]"
        _check_keys(path, where, table, _KERNEL_KEYS)
        # A Triton-C kernel (.tc) may leave out its signature: its C parameters declare it.
        tritonc = str(table.get("source", "")).endswith(".tc")
        for required in ("name", "source", "function", "grid") + (() if tritonc else ("signature",)):
            if required not in table:
                _fail(path, f"{where}.{required}", "missing")
        kernel_name = _typed(path, f"{where}.name", table["name"], str, "a string")
        if not _C_IDENTIFIER.match(kernel_name):
            _fail(path, f"{where}.name", f"{kernel_name!r} must be a C identifier")
        if kernel_name in seen:
            _fail(path, f"kernel[{k}].name", f"duplicate kernel name {kernel_name!r}")
        seen.add(kernel_name)
        source = path.parent / _typed(path, f"{where}.source", table["source"], str, "a string")
        if not source.is_file():
            _fail(path, f"{where}.source", f"{source} does not exist")
        if source.suffix not in (".py", ".tc"):
            _fail(path, f"{where}.source", f"{source} is neither a Python file (.py) nor "
                  "Triton-C (.tc)")
        grid = table["grid"]
        if not isinstance(grid, list) or not 1 <= len(grid) <= 3:
            _fail(path, f"{where}.grid", "expected a list of 1 to 3 C expressions")
        specialize = _specialize(path, f"{where}.specialize", table.get("specialize", "auto"))
        kernel = Kernel(kernel_name, source,
                        _typed(path, f"{where}.function", table["function"], str, "a string"),
                        _typed(path, f"{where}.signature", table.get("signature", ""), str,
                               "a string"),
                        grid, _num_warps(path, f"{where}.num_warps", table.get("num_warps", 4)),
                        _num_stages(path, f"{where}.num_stages", table.get("num_stages", 3)),
                        specialize, redirect_triton=redirect_triton,
                        maxnreg=_maxnreg(path, f"{where}.maxnreg", table.get("maxnreg")),
                        enable_fp_fusion=_typed(path, f"{where}.enable_fp_fusion",
                                                table.get("enable_fp_fusion", True), bool,
                                                "true or false"),
                        num_ctas=_num_ctas(path, f"{where}.num_ctas", table.get("num_ctas", 1)))
        kernel.explicit_variants = "variant" in table
        kernel.contiguous, kernel.strides = _pointer_layouts(path, where, table)
        if "tune" in table:
            kernel.tune = _tune(path, f"{where}.tune", table["tune"])
        variants = table.get("variant") or [{}]
        if "tune" in table and table.get("variant"):
            # An autotuned kernel's [[kernel.variant]] tables are the builds each config gets
            # (plan.py): the kernel's own constants hold in every one.
            if "when" in table:
                _fail(path, f"{where}.when", "a kernel with [kernel.tune] and "
                      "[[kernel.variant]] tables takes `when` in its variants")
            shared = table.get("constants", {})
            if not isinstance(shared, dict):
                _fail(path, f"{where}.constants", "expected an inline table like { X = 1 }")
            variants = [{**v, "constants": {**shared, **v.get("constants", {})}}
                        if isinstance(v, dict) else v for v in table["variant"]]
        elif "constants" in table or "when" in table:
            # A kernel without [[kernel.variant]] may give its constants directly.
            variants = [{k: table[k] for k in ("constants", "when") if k in table}] + \
                (table.get("variant") or [])
        if not isinstance(variants, list):
            _fail(path, f"{where}.variant", "expected [[kernel.variant]] tables")
        for v, variant in enumerate(variants):
            vwhere = f"{where}.variant[{v}]"
            _check_keys(path, vwhere, variant, _VARIANT_KEYS)
            constants = variant.get("constants", {})
            if not isinstance(constants, dict):
                _fail(path, f"{vwhere}.constants", "expected an inline table like { BLOCK = 256 }")
            for cname, cvalue in constants.items():
                if not isinstance(cvalue, (int, float, bool, str)):
                    _fail(path, f"{vwhere}.constants.{cname}", f"unsupported value {cvalue!r}")
            kernel.variants.append(Variant(
                v, dict(constants), variant.get("when"),
                _num_warps(path, f"{vwhere}.num_warps", variant.get("num_warps", kernel.num_warps)),
                _num_stages(path, f"{vwhere}.num_stages",
                            variant.get("num_stages", kernel.num_stages)),
                _typed(path, f"{vwhere}.signature", variant.get("signature", kernel.signature),
                       str, "a string"),
                _specialize(path, f"{vwhere}.specialize",
                            variant.get("specialize", kernel.specialize)),
                _maxnreg(path, f"{vwhere}.maxnreg", variant.get("maxnreg", kernel.maxnreg)),
                enable_fp_fusion=_typed(path, f"{vwhere}.enable_fp_fusion",
                                        variant.get("enable_fp_fusion", kernel.enable_fp_fusion),
                                        bool, "true or false"),
                num_ctas=_num_ctas(path, f"{vwhere}.num_ctas",
                                   variant.get("num_ctas", kernel.num_ctas))))
            _check_not_repeated(path, where, kernel.variants)
        kernels.append(kernel)
    _check_symbols(path, name, kernels)
    return Manifest(path.resolve(), name, list(targets), out_dir, kernels)


def _pointer_layouts(path, where: str, table) -> tuple:
    """``contiguous`` and ``strides`` as written, their types checked."""
    contiguous, strides = table.get("contiguous", False), table.get("strides", {})
    try:
        check_declaration(contiguous, strides)
    except LayoutError as exc:
        _fail(path, f"{where}.{exc.key}", str(exc))
    return contiguous, strides


def _tune(path, where: str, table) -> Tune:
    """``[kernel.tune]``'s types (the names in it are checked against the kernel in plan)."""
    _check_keys(path, where, table, _TUNE_KEYS)
    points = table.get("points")
    if not isinstance(points, list) or not points or not all(
            isinstance(point, dict) and point for point in points):
        _fail(path, f"{where}.points", "expected a list of inline tables of the autotune key's "
              "values, such as [{ M = 512, N = 512, K = 512 }]")
    for i, point in enumerate(points):
        for name, value in point.items():
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                _fail(path, f"{where}.points[{i}].{name}", f"expected a positive integer, got "
                      f"{value!r}")
    arguments = table.get("arguments", {})
    if not isinstance(arguments, dict):
        _fail(path, f"{where}.arguments", "expected an inline table { parameter = "
              "\"C expression over the key\" }")
    counts, fills = {}, {}
    for name, value in arguments.items():
        if isinstance(value, dict):   # a buffer: { count = ..., fill = ... }
            _check_keys(path, f"{where}.arguments.{name}", value, {"count", "fill"})
            fills[name] = _fill(path, f"{where}.arguments.{name}.fill", value.get("fill"))
            value = value.get("count")
            if value is None:
                _fail(path, f"{where}.arguments.{name}.count", "missing: the buffer's element "
                      "count, a C expression over the key")
        if not isinstance(value, (str, int)) or isinstance(value, bool):
            _fail(path, f"{where}.arguments.{name}", f"expected a C expression string, an "
                  f"integer, or {{ count = ..., fill = ... }}, got {value!r}")
        counts[name] = str(value)
    work = table.get("work")
    if work is not None and not isinstance(work, str):
        _fail(path, f"{where}.work", f"expected a C expression string, got {work!r}")
    unit = table.get("work_unit", "flop")
    if unit not in ("flop", "byte"):
        _fail(path, f"{where}.work_unit", f'expected "flop" or "byte", got {unit!r}')
    return Tune([dict(p) for p in points], counts, work, unit, fills)


_FILLS = '"random", "zeros", "ones" or "integers(LOW, HIGH)"'


def _fill(path, key: str, text) -> tuple:
    """A tune buffer's fill: ("random",), ("zeros",), ("ones",) or ("integers", low, high),
    low and high C expressions over the key (values from low up to high, not included)."""
    if not isinstance(text, str):
        _fail(path, key, f"expected {_FILLS}, got {text!r}")
    text = text.strip()
    if text in ("random", "zeros", "ones"):
        return (text,)
    match = re.fullmatch(r"integers\((.*)\)", text)
    if match:
        bounds = _split_top_level(match.group(1))
        if len(bounds) == 2 and all(bounds):
            return ("integers", *bounds)
    _fail(path, key, f"expected {_FILLS}, got {text!r}")


def _split_top_level(text: str) -> list:
    """``text`` split at the commas outside parentheses, each part stripped."""
    parts, depth, start = [], 0, 0
    for i, char in enumerate(text):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    return parts + [text[start:].strip()]


def _check_not_repeated(path, where: str, variants: list):
    """A variant that repeats an earlier one (same constants, condition and options) would
    never run: an error naming both."""
    last = variants[-1]
    same = (sorted(last.constants.items()), last.when, last.num_warps, last.num_stages,
            last.signature, last.specialize, last.maxnreg, last.enable_fp_fusion, last.num_ctas)
    for earlier in variants[:-1]:
        if same == (sorted(earlier.constants.items()), earlier.when, earlier.num_warps,
                    earlier.num_stages, earlier.signature, earlier.specialize, earlier.maxnreg,
                    earlier.enable_fp_fusion, earlier.num_ctas):
            _fail(path, f"{where}.variant[{last.index}]", f"repeats variant[{earlier.index}] "
                  "(same constants, when and options): it would never be chosen")


def _check_symbols(path, library: str, kernels: list):
    """Every C symbol the library will define, computed now: two of them the same (kernel
    ``add_select`` beside ``add``'s selector, a kernel named ``info``...) is an error naming
    both owners, before anything is compiled."""
    owners = {f"{library}{suffix}": f"the library's {what}"
              for suffix, what in LIBRARY_SYMBOLS.items()}
    for kernel in kernels:
        for suffix, what in KERNEL_SYMBOLS.items():
            symbol = f"{library}_{kernel.name}{suffix}"
            clash = owners.get(symbol)
            if clash is None and re.fullmatch(rf"{re.escape(library)}_fatbin_\d+", symbol):
                clash = "the library's embedded fatbins"
            if clash is not None:
                _fail(path, f"kernel.{kernel.name}.name",
                      f"its C {what} {symbol} is also {clash}; rename the kernel")
            owners[symbol] = f"kernel.{kernel.name}'s {what}"
