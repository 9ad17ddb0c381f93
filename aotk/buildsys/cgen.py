"""Kernel plans + compiled builds -> the generated C sources of one library.

In: the ``KernelPlan``s (dispatch order), their ``CompiledBuild``s, the manifest. Out:
``{file name: text}`` for ``<name>.h``, ``<name>_dispatch.h`` (what the C files share),
``<name>_library.c`` (the variant table, the first kernels), ``<name>_kernels_<n>.c`` (the
other kernels, when there are more than ``C_FILE_VARIANTS`` variants) and
``<name>_fatbins.S``, filled from ``templates/`` by named placeholders. Output is stable: no timestamps, no
absolute paths, the manifest's order everywhere.
"""
from __future__ import annotations

import os

import json
from pathlib import Path
from string import Template

from ..version import __version__

from ..data import resource_dir
from .expressions import device_names_used, to_total_c
from ..passes.tensor_maps import MAX_DIMENSION, MAX_STRIDE_BYTES

TEMPLATES = resource_dir("templates")

_SCALAR_C = {"int1": "bool", "int8": "int8_t", "int16": "int16_t", "int32": "int32_t",
             "int64": "int64_t", "uint8": "uint8_t", "uint16": "uint16_t", "uint32": "uint32_t",
             "uint64": "uint64_t", "float16": "uint16_t", "bfloat16": "uint16_t",
             "float32": "float", "float64": "double", "float8e4nv": "uint8_t",
             "float8e5": "uint8_t", "float8e4b15": "uint8_t"}


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
    alignment): dimensions from 1 to 2^32, strides from 1 element up, under 2^40 bytes.
    Calls outside them go to the next variant, whose pointer loads take any size."""
    types = {p.name: p.type for p in plan.parameters}
    clauses = []
    for recipe in maps:
        # (entry, its largest value); a 32-bit parameter cannot exceed either.
        limits = [(entry, MAX_DIMENSION) for entry in recipe["shape"]]
        limits += [(entry, MAX_STRIDE_BYTES // recipe["itemsize"] - 1)
                   for entry in recipe["strides"]]
        for (kind, name), largest in limits:
            if kind == "param":
                clauses.append(f"{name} >= 1")
                if types[name].bits > 32:
                    clauses.append(f"(uint64_t){name} <= {largest}ull")
    return list(dict.fromkeys(clauses))


def _tensor_map_lines(maps: list, variant: str, indent: str) -> list:
    """The launch's calls that encode each tensor map the build's TMA code reads: the
    dimensions outermost first, the strides (in bytes) of all but the last dimension."""
    lines = []
    for index, recipe in enumerate(maps):
        shape = ", ".join(_tensor_map_entry(e) for e in recipe["shape"])
        strides = ", ".join(f"(int64_t){_tensor_map_entry(e)} * {recipe['itemsize']}"
                            for e in recipe["strides"])
        rank = len(recipe["shape"])
        box_rows, box_columns = recipe["box"]
        lines += [f"{indent}{{",
                  f"{indent}    const int64_t shape[{rank}] = {{{shape}}};",
                  f"{indent}    const int64_t strides[{rank - 1}] = {{{strides}}};",
                  f"{indent}    status = aotk_encode_tensor_map({variant}, &tensor_maps[{index}], "
                  f"{c_string(recipe['base'])}, {recipe['data_type']}, {recipe['base']}, "
                  f"{rank}, shape, strides, {box_rows}u, {box_columns}u);",
                  f"{indent}}}", f"{indent}if (status != 0)", f"{indent}    return status;"]
    return lines


def describe(plan, build) -> str:
    """The comment over a variant: what it is specialized for."""
    hints = _hint_clauses(build)
    text = f"{build.index}: {build.description}: "
    text += ("assumes " + ", ".join(hints)) if hints else "no alignment or divisibility assumed"
    text += f"; num_warps={build.variant.num_warps}"
    if build.variant.num_ctas != 1:
        text += (f"; num_ctas={build.variant.num_ctas} (programs in pairs where the grid's x "
                 "is even)")
    if build.variant.tuned_choice is not None:
        text += f"; tuned choice {build.variant.tuned_choice}"
    if build.variant.when:
        text += f"; when {build.variant.when}"
    return text


def _tuned_source(plan, library_name: str, targets: list) -> str:
    """The function choosing among an autotuned kernel's tuned variants: the choice of the
    tuned point nearest to the call, on the arch the call runs on. Nearness is the sum over
    the key of |log2(value / point)|, computed as the product of max(value, point) /
    min(value, point), so that no libm is needed."""
    tuned = plan.tuned
    key = tuned.key
    function = f"{library_name}_{plan.kernel.name}_tuned"
    parameters = ", ".join(f"int64_t {name}" for name in key)
    lines = [f"/* aotk tune's choices for {plan.kernel.name} ({tuned.tuning_file}): the config "
             f"measured fastest at the",
             f" * tuned point nearest to the call ({', '.join(key)}; nearness: the product of "
             "max(value, point) /",
             " * min(value, point)); -1, the fallback, on an arch that was not tuned or for a "
             "value below 1. */",
             f"static int {function}({parameters})", "{"]
    single = len(targets) == 1
    for arch, points in tuned.points.items():
        rows = ", ".join("{" + ", ".join(str(v) for v in values) + "}" for values, _ in points)
        choices = ", ".join(str(choice) for _, choice in points)
        lines += [f"    /* {arch}: " + "; ".join(
            ", ".join(f"{k}={v}" for k, v in zip(key, values))
            + f" -> config {tuned.configs[choice][0]}"
            for values, choice in points) + " */",
                  f"    static const double {arch}_points[{len(points)}][{len(key)}] = "
                  f"{{{rows}}};",
                  f"    static const int {arch}_choices[{len(points)}] = {{{choices}}};"]
    lines += ["    const double *points;", "    const int *choices;", "    int count;"]
    if single:   # the library has one target: its tuning applies, no device is asked
        (arch, points), = tuned.points.items()
        lines += [f"    points = &{arch}_points[0][0];", f"    choices = {arch}_choices;",
                  f"    count = {len(points)};"]
    else:
        lines += ["    switch (aotk_device_arch()) {"]
        for arch, points in tuned.points.items():
            lines += [f"    case {arch[3:]}:", f"        points = &{arch}_points[0][0];",
                      f"        choices = {arch}_choices;", f"        count = {len(points)};",
                      "        break;"]
        lines += ["    default:", "        return -1;", "    }"]
    lines += [f"    if ({' || '.join(f'{name} < 1' for name in key)})", "        return -1;",
              f"    const double values[{len(key)}] = {{"
              + ", ".join(f"(double){name}" for name in key) + "};",
              "    int best = -1;", "    double nearest = 0.0;",
              "    for (int i = 0; i < count; i++) {", "        double distance = 1.0;",
              f"        for (int d = 0; d < {len(key)}; d++) {{",
              f"            double value = values[d], point = points[i * {len(key)} + d];",
              "            distance *= value > point ? value / point : point / value;",
              "        }", "        if (best < 0 || distance < nearest) {",
              "            best = choices[i];", "            nearest = distance;", "        }",
              "    }", "    return best;", "}", ""]
    return "\n".join(lines) + "\n"


def _failure_reason(expression: str, parameter_names: set, build) -> str:
    """Why the generated C may find ``expression`` cannot be computed."""
    if device_names_used(expression, parameter_names, build.constants):
        return "divides by zero, or the device's SM count could not be read"
    return "divides by zero"


def _kernel_source(plan, first: int, library_name: str, manifest_dir: Path,
                   compiled: dict, targets: list) -> str:
    conditions, grids = [], []
    if plan.tuned is not None:
        conditions.append(f"    int tuned = {library_name}_{plan.kernel.name}_tuned("
                          + ", ".join(plan.tuned.key) + ");")
    map_count = 0
    floats = {p.name for p in plan.parameters if p.type.is_floating()}
    parameter_names = {p.name for p in plan.parameters}
    for build in plan.builds:
        maps = compiled[(plan.kernel.name, build.index)].metadata.get("tensor_maps") or []
        map_count = max(map_count, len(maps))
        clauses = _hint_clauses(build) + _tensor_map_clauses(plan, maps)
        if build.variant.tuned_choice is not None:
            clauses.append(f"tuned == {build.variant.tuned_choice}")
        when_divides = False
        if build.variant.when:
            when, when_divides = to_total_c(build.variant.when, floats, build.constants,
                                            parameters=parameter_names)
            clauses.append(f"({when})")
        body = _constant_lines(build.constants, "        ")
        condition = " && ".join(clauses) if clauses else "1"
        if when_divides:
            failure = c_string(f"{plan.kernel.name}: the `when` of {build.description} "
                               f"({build.variant.when}) "
                               f"{_failure_reason(build.variant.when, parameter_names, build)}")
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
            value, divides = to_total_c(expression, floats, build.constants,
                                        parameters=parameter_names)
            if not divides:
                grid_lines.append(f"        grid[{axis}] = (int64_t)({value});")
                continue
            failure = c_string(f"{plan.kernel.name}: grid[{axis}] ({expression}) "
                               f"{_failure_reason(expression, parameter_names, build)}")
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
        # relative to the manifest, as it names it (a source may sit outside its folder)
        source=Path(os.path.relpath(plan.kernel.source.resolve(), manifest_dir)).as_posix(),
        count=len(plan.builds),
        names="\n".join(f"    {c_string(b.description)}," for b in plan.builds),
        parameters=parameters or "void", arguments=arguments,
        comma_parameters=(", " + parameters) if parameters else "",
        comma_parameters_first=(parameters + ", ") if parameters else "",
        comma_arguments_first=(arguments + ", ") if arguments else "",
        conditions="\n".join(conditions),
        tuned=_tuned_source(plan, library_name, targets) if plan.tuned is not None else "",
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
            # The layouts the manifest declares for pointer arguments: aotk.load checks them.
            "pointer_layouts": {layout.name: layout.to_json()
                                for layout in plan.pointer_layouts},
            "grid": plan.kernel.grid,
            "variants": [b.description for b in plan.builds],
            # What each build compiled to, per target: for `aotk inspect` and for reading.
            "builds": [{"variant": b.description, "signature": str(b.signature),
                        "num_warps": b.variant.num_warps,
                        "shared": compiled[(plan.kernel.name, b.index)].metadata["shared"],
                        "targets": compiled[(plan.kernel.name, b.index)].metadata["targets"],
                        # an autotuned kernel's variant: where aotk tune measured it fastest
                        **({"tuned": plan.tuned.measured(b.variant.tuned_choice)}
                           if plan.tuned is not None and b.variant.tuned_choice is not None
                           else {})}
                       for b in plan.builds],
        }
    return json.dumps({"library": manifest.name, "aotk": __version__, "kernels": kernels},
                      sort_keys=True, separators=(",", ":"))


def _launch_by_arch(metadata: dict):
    """The C initializer of a variant's {arch, dynamic shared bytes, threads, cluster}
    entries and closing {0, ...} (runtime/aotk_runtime.h), or None where every cubin
    launches the same (or a cache entry from before per-target sizes were kept)."""
    targets = metadata.get("targets", {})
    threads = metadata.get("threads", 32 * metadata.get("num_warps", 4))
    launches = {int(t[3:]): (facts.get("shared"), facts.get("threads", threads),
                             facts.get("cluster", 1)) for t, facts in targets.items()}
    if not launches or any(shared is None for shared, _, _ in launches.values()) or \
            len(set(launches.values())) == 1:
        return None
    # A GPU whose binary version is not listed compiles the PTX, the oldest target's: its
    # threads and cluster, and the most shared memory any cubin needs (never less than its
    # code uses, at worst more than it has: a launch error, not a wrong result).
    oldest = launches[min(launches)]
    most = max(shared for shared, _, _ in launches.values())
    entries = [(arch, *launches[arch]) for arch in sorted(launches)] + [(0, most, *oldest[1:])]
    return ", ".join(", ".join(f"{value}u" for value in entry) for entry in entries)


def _layout_comment(plan) -> str:
    """The lines the header adds to a kernel's comment for its declared pointer layouts
    (the C entry cannot check them: a pointer carries no strides)."""
    if not plan.pointer_layouts:
        return ""
    lines = [f"\n *   {layout.name}: {layout}" for layout in plan.pointer_layouts]
    return ("\n * pointer layouts (strides in elements; aotk.load checks them, a C caller must "
            "keep them):" + "".join(lines))


# The library's C is cut into files of about this many variants, so that a library of
# thousands compiles in parallel; a cut between kernels only, made the same way whatever the
# job count, so that the library's bytes do not depend on it.
C_FILE_VARIANTS = 128


def kernels_file(library_name: str, number: int) -> str:
    return f"{library_name}_kernels_{number}.c"


def _chunks(kernels: list) -> list:
    """[(kernel, variant count, C)] -> runs of consecutive kernels of about
    ``C_FILE_VARIANTS`` variants each (one run at least; a kernel is never cut)."""
    chunks, current, count = [], [], 0
    for kernel in kernels:
        if current and count + kernel[1] > C_FILE_VARIANTS:
            chunks.append(current)
            current, count = [], 0
        current.append(kernel)
        count += kernel[1]
    return chunks + [current]


def generate(manifest, plans, compiled: dict) -> dict:
    name = manifest.name
    manifest_dir = manifest.path.parent
    declarations, variants, blobs, fatbin_declarations, kernels = [], [], [], [], []
    launch_tables = []   # per-GPU launch sizes of the variants whose cubins differ
    files = {}
    symbols: dict = {}   # cache key -> the symbol of its embedded fatbin
    offset = 0
    for plan in plans:
        parameters = _parameter_list(plan)
        comma = (", " + parameters) if parameters else ""
        api = f"{name.upper()}_API"
        declarations.append(
            f"/* {plan.kernel.name}: {len(plan.builds)} variant(s), grid "
            f"({', '.join(plan.kernel.grid)}){_layout_comment(plan)} */\n"
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
            table = _launch_by_arch(result.metadata)
            table_symbol = "NULL"
            if table is not None:
                table_symbol = f"{name}_launch_{len(launch_tables)}"
                launch_tables.append(f"static const unsigned {table_symbol}[] = {{{table}}};")
            variants.append(
                f"    /* {describe(plan, build)} */\n"
                f"    {{{c_string(plan.kernel.name)}, {c_string(build.description)}, "
                f"{c_string(result.metadata['name'])}, {symbol}, "
                f"{result.metadata.get('threads', 32 * build.variant.num_warps)}u, "
                f"{result.metadata.get('cluster', 1)}u, {int(result.metadata['shared'])}u, "
                f"{table_symbol}, {{{{0, 0}}}}, 0}},")
        kernels.append((plan.kernel.name, len(plan.builds),
                        _kernel_source(plan, offset, name, manifest_dir, compiled,
                                       manifest.targets)))
        offset += len(plan.builds)
    common = {"name": name, "NAME": name.upper(), "version": __version__,
              "manifest": manifest.path.name, "variant_count": offset}
    files[f"{name}.h"] = template("header.h.in").substitute(common, declarations="\n".join(declarations))
    files[f"{name}_dispatch.h"] = template("dispatch.h.in").substitute(common)
    chunks = _chunks(kernels)
    files[f"{name}_library.c"] = template("library.c.in").substitute(
        common, fatbin_declarations="\n".join(fatbin_declarations + launch_tables),
        variants="\n".join(variants), kernels="\n".join(text for _, _, text in chunks[0]),
        info=c_string(info_json(manifest, plans, compiled)))
    for number, chunk in enumerate(chunks[1:], 1):
        files[kernels_file(name, number)] = template("kernels.c.in").substitute(
            common, kernel_names=", ".join(kernel for kernel, _, _ in chunk),
            chunk=C_FILE_VARIANTS, kernels="\n".join(text for _, _, text in chunk))
    files[f"{name}_fatbins.S"] = template("fatbins.S.in").substitute(common, blobs="\n".join(blobs))
    return files
