"""Kernel plans + compiled builds -> the generated C sources of one library.

In: the ``KernelPlan``s (dispatch order), their ``CompiledBuild``s, the manifest. Out:
``{file name: text}`` for ``<name>.h``, ``<name>_library.c`` and ``<name>_fatbins.S``,
filled from ``templates/`` by named placeholders. Output is stable: no timestamps, no
absolute paths, the manifest's order everywhere.
"""
from __future__ import annotations

import json
from pathlib import Path
from string import Template

from ..version import __version__

from ..data import resource_dir
from .expressions import to_total_c
from ..passes.tensor_maps import MAX_DIMENSION, MAX_STRIDE_BYTES

TEMPLATES = resource_dir("templates")

_SCALAR_C = {"int1": "bool", "int8": "int8_t", "int16": "int16_t", "int32": "int32_t",
             "int64": "int64_t", "uint8": "uint8_t", "uint16": "uint16_t", "uint32": "uint32_t",
             "uint64": "uint64_t", "float16": "uint16_t", "bfloat16": "uint16_t",
             "float32": "float", "float64": "double", "float8e4nv": "uint8_t",
             "float8e5": "uint8_t"}


def template(name: str) -> Template:
    return Template((TEMPLATES / name).read_text())


def c_type(type_) -> str:
    if type_.is_ptr():
        element = type_.element_ty
        # fp16/bf16 have no C99 spelling: any device pointer converts to void * without a cast.
        base = "void" if element.bits == 16 and element.is_floating() else _SCALAR_C[element.name]
        return f"{base} *"
    return _SCALAR_C[type_.name]


def c_string(text: str) -> str:
    return json.dumps(text)   # a JSON string literal is a valid C string literal for ASCII


def _parameter_list(plan) -> str:
    return ", ".join(f"{c_type(p.type)}{'' if c_type(p.type).endswith('*') else ' '}{p.name}"
                     for p in plan.parameters)


def _constant_lines(constants: dict, indent: str) -> list:
    lines = []
    for key, value in constants.items():
        if isinstance(value, bool):
            lines.append(f"{indent}const int {key} = {int(value)};")
        elif isinstance(value, int):
            lines.append(f"{indent}const int64_t {key} = {value}LL;")
        elif isinstance(value, float):
            lines.append(f"{indent}const double {key} = {value!r};")
        else:
            continue   # strings select code paths at compile time; C never sees them
        lines.append(f"{indent}(void){key};")
    return lines


def _hint_clauses(build) -> list:
    clauses = []
    for param in build.signature:
        if param.hint == 1:
            clauses.append(f"{param.name} == 1")
        elif param.hint:
            clauses.append(f"AOTK_ALIGNED({param.name}, {param.hint})" if param.type.is_ptr()
                           else f"{param.name} % {param.hint} == 0")
    return clauses


def _tensor_map_entry(entry) -> str:
    kind, content = entry
    return content if kind == "param" else f"{content}LL"


def _tensor_map_clauses(plan, maps: list) -> list:
    """What cuTensorMapEncodeTiled needs beyond the build's hints (which prove 16-byte
    alignment): dimensions from 1 to 2^32, row strides from 1 element up, under 2^40 bytes.
    Calls outside them go to the next variant, whose pointer loads take any size."""
    types = {p.name: p.type for p in plan.parameters}
    clauses = []
    for recipe in maps:
        # (entry, its largest value); a 32-bit parameter cannot exceed either.
        limits = [(entry, MAX_DIMENSION) for entry in recipe["shape"]]
        limits.append((recipe["row_stride"], MAX_STRIDE_BYTES // recipe["itemsize"] - 1))
        for (kind, name), largest in limits:
            if kind == "param":
                clauses.append(f"{name} >= 1")
                if types[name].bits > 32:
                    clauses.append(f"(uint64_t){name} <= {largest}ull")
    return list(dict.fromkeys(clauses))


def _tensor_map_lines(maps: list, variant: str, indent: str) -> list:
    """The launch's calls that encode each tensor map the build's TMA code reads."""
    lines = []
    for index, recipe in enumerate(maps):
        rows, columns = (_tensor_map_entry(e) for e in recipe["shape"])
        stride = _tensor_map_entry(recipe["row_stride"])
        box_rows, box_columns = recipe["box"]
        lines += [f"{indent}status = aotk_encode_tensor_map({variant}, &tensor_maps[{index}], "
                  f"{c_string(recipe['base'])}, {recipe['data_type']}, {recipe['base']}, "
                  f"{rows}, {columns}, (int64_t){stride} * {recipe['itemsize']}, "
                  f"{box_rows}u, {box_columns}u);",
                  f"{indent}if (status != 0)", f"{indent}    return status;"]
    return lines


def describe(plan, build) -> str:
    """The comment over a variant: what it is specialized for."""
    hints = _hint_clauses(build)
    text = f"{build.index}: {build.description}: "
    text += ("assumes " + ", ".join(hints)) if hints else "no alignment or divisibility assumed"
    text += f"; num_warps={build.variant.num_warps}"
    if build.variant.when:
        text += f"; when {build.variant.when}"
    return text


def _kernel_source(plan, first: int, library_name: str, manifest_dir: Path,
                   compiled: dict) -> str:
    conditions, grids = [], []
    map_count = 0
    floats = {p.name for p in plan.parameters if p.type.is_floating()}
    for build in plan.builds:
        maps = compiled[(plan.kernel.name, build.index)].metadata.get("tensor_maps") or []
        map_count = max(map_count, len(maps))
        clauses = _hint_clauses(build) + _tensor_map_clauses(plan, maps)
        when_divides = False
        if build.variant.when:
            when, when_divides = to_total_c(build.variant.when, floats, build.constants)
            clauses.append(f"({when})")
        body = _constant_lines(build.constants, "        ")
        condition = " && ".join(clauses) if clauses else "1"
        if when_divides:
            failure = c_string(f"{plan.kernel.name}: the `when` of {build.description} "
                               f"({build.variant.when}) divides by zero")
            body += ["        int bad = 0;", f"        int holds = {condition};",
                     "        if (bad) {", f"            *failure = {failure};",
                     "            return -2;", "        }",
                     "        if (holds)", f"            return {build.index};"]
        else:
            body.append(f"        if ({condition})")
            body.append(f"            return {build.index};")
        conditions.append(f"    /* {describe(plan, build)} */\n    {{\n" + "\n".join(body) + "\n    }")
        grid_lines = _constant_lines(build.constants, "        ")
        for axis, expression in enumerate(plan.kernel.grid):
            value, divides = to_total_c(expression, floats, build.constants)
            if not divides:
                grid_lines.append(f"        grid[{axis}] = (int64_t)({value});")
                continue
            failure = c_string(f"{plan.kernel.name}: grid[{axis}] ({expression}) divides by zero")
            grid_lines += ["        {", "            int bad = 0;",
                           f"            grid[{axis}] = (int64_t)({value});",
                           "            if (bad)",
                           f"                return aotk_fail(AOTK_STATUS_BAD_ARGUMENT, \"%s\", "
                           f"{failure});", "        }"]
        grid_lines += _tensor_map_lines(
            maps, f"&{library_name}_variants[{first + build.index}]", "        ")
        grids.append(f"    case {build.index}: {{ /* {build.description} */\n" +
                     "\n".join(grid_lines) + "\n        break;\n    }")
    scalars = [p for p in plan.parameters if not p.type.is_ptr()]
    fmt, fmt_args = [], []
    for p in scalars:
        if p.type.is_floating() and p.type.bits > 16:
            fmt.append(f"{p.name}=%g")
            fmt_args.append(f"(double){p.name}")
        else:
            fmt.append(f"{p.name}=%lld")
            fmt_args.append(f"(long long){p.name}")
    for p in plan.parameters:
        if p.type.is_ptr():
            fmt.append(f"{p.name}=%p")
            fmt_args.append(f"(const void *){p.name}")
    arguments = ", ".join(p.name for p in plan.parameters)
    parameters = _parameter_list(plan)
    return template("kernel.c.in").substitute(
        name=library_name, kernel=plan.kernel.name, function=plan.kernel.function,
        source=plan.kernel.source.resolve().relative_to(manifest_dir).as_posix(),
        count=len(plan.builds),
        names="\n".join(f"    {c_string(b.description)}," for b in plan.builds),
        parameters=parameters or "void", arguments=arguments,
        comma_parameters=(", " + parameters) if parameters else "",
        comma_parameters_first=(parameters + ", ") if parameters else "",
        comma_arguments_first=(arguments + ", ") if arguments else "",
        conditions="\n".join(conditions),
        addresses=", ".join([f"&{p.name}" for p in plan.parameters] +
                            [f"&tensor_maps[{i}]" for i in range(map_count)]) or "NULL",
        tensor_maps=(f"\n    aotk_tensor_map tensor_maps[{map_count}];   /* TMA builds: per launch */"
                     "\n    int status;") if map_count else "",
        grids="\n".join(grids), first=first,
        format=c_string("(" + ", ".join(fmt) + ")")[1:-1] if fmt else "",
        format_arguments="".join(", " + a for a in fmt_args))


def info_json(manifest, plans, compiled: dict) -> str:
    kernels = {}
    for plan in plans:
        kernels[plan.kernel.name] = {
            "function": plan.kernel.function,
            "params": [{"name": p.name, "type": p.type.short} for p in plan.parameters],
            # Parameters given as host tensor descriptors: aotk.load takes a
            # TensorDescriptor for each and passes its base, shape and strides.
            "descriptors": {name: {"block_shape": list(layout.block_shape),
                                   "padding": layout.padding,
                                   "params": layout.runtime_names(name)}
                            for name, layout in plan.descriptors},
            "grid": plan.kernel.grid,
            "variants": [b.description for b in plan.builds],
            # What each build compiled to, per target: for `aotk inspect` and for reading.
            "builds": [{"variant": b.description, "signature": str(b.signature),
                        "num_warps": b.variant.num_warps,
                        "shared": compiled[(plan.kernel.name, b.index)].metadata["shared"],
                        "targets": compiled[(plan.kernel.name, b.index)].metadata["targets"]}
                       for b in plan.builds],
        }
    return json.dumps({"library": manifest.name, "aotk": __version__, "kernels": kernels},
                      sort_keys=True, separators=(",", ":"))


def generate(manifest, plans, compiled: dict) -> dict:
    name = manifest.name
    manifest_dir = manifest.path.parent
    declarations, variants, blobs, fatbin_declarations, kernels = [], [], [], [], []
    files = {}
    symbols: dict = {}   # cache key -> the symbol of its embedded fatbin
    offset = 0
    for plan in plans:
        parameters = _parameter_list(plan)
        comma = (", " + parameters) if parameters else ""
        api = f"{name.upper()}_API"
        declarations.append(
            f"/* {plan.kernel.name}: {len(plan.builds)} variant(s), grid "
            f"({', '.join(plan.kernel.grid)}) */\n"
            f"{api} int {name}_{plan.kernel.name}(struct CUstream_st *stream{comma});\n"
            f"/* the variant index that would run, -1 if none; needs no GPU */\n"
            f"{api} int {name}_{plan.kernel.name}_select({parameters or 'void'});\n"
            f"{api} const char *{name}_{plan.kernel.name}_variant_name(int index);\n")
        for build in plan.builds:
            result = compiled[(plan.kernel.name, build.index)]
            # One embedded fatbin per specialization, however many variants share it.
            shared_key = result.key or (plan.kernel.name, build.index)
            symbol = symbols.get(shared_key)
            if symbol is None:
                symbol = symbols[shared_key] = f"{name}_fatbin_{len(symbols)}"
                files[f"{symbol}.fatbin"] = result.fatbin
                fatbin_declarations.append(
                    f"extern const unsigned char {symbol}[] __attribute__((visibility(\"hidden\")));")
                blobs.append(f"    .globl {symbol}\n    .hidden {symbol}\n    .balign 16\n"
                             f"{symbol}:\n    .incbin \"{symbol}.fatbin\"")
            variants.append(
                f"    /* {describe(plan, build)} */\n"
                f"    {{{c_string(plan.kernel.name)}, {c_string(build.description)}, "
                f"{c_string(result.metadata['name'])}, {symbol}, "
                f"{32 * build.variant.num_warps}u, {int(result.metadata['shared'])}u, "
                f"{{{{0, 0}}}}, 0}},")
        kernels.append(_kernel_source(plan, offset, name, manifest_dir, compiled))
        offset += len(plan.builds)
    common = {"name": name, "NAME": name.upper(), "version": __version__,
              "manifest": manifest.path.name}
    files[f"{name}.h"] = template("header.h.in").substitute(common, declarations="\n".join(declarations))
    files[f"{name}_library.c"] = template("library.c.in").substitute(
        common, fatbin_declarations="\n".join(fatbin_declarations), variant_count=offset,
        variants="\n".join(variants), kernels="\n".join(kernels),
        info=c_string(info_json(manifest, plans, compiled)))
    files[f"{name}_fatbins.S"] = template("fatbins.S.in").substitute(common, blobs="\n".join(blobs))
    return files
