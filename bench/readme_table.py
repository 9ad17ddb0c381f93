"""README's performance table, regenerated from a bench/run.py result:

    python3 bench/readme_table.py bench/results/<stem>.json [--readme README.md]

Replaces what README.md holds between the ``perf-table`` markers with one row per example
kernel (the library's build for the GPU, its speed, and its time against Triton's JIT and
torch on the same inputs, > 1: aotk faster), the Python launch costs, and a line naming the
result file it came from. Needs no GPU: it only reads the JSON.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import harness  # noqa: E402

BEGIN, END = "<!-- perf-table:begin -->", "<!-- perf-table:end -->"


def table(document: dict, source: str) -> str:
    """The markdown that goes between the markers."""
    harness.validate(document)
    env = document["environment"]
    ratio = harness.ratios(document["kernels"])
    lines = [f"Measured on an {env.get('gpu')} (driver {env.get('driver')}; triton "
             f"{env.get('triton', '-')}, torch {env.get('torch', '-')}) by `bench/run.py`; "
             f"from `{source}`.", "",
             "| kernel | aotk | vs Triton | vs torch |", "|---|---|---|---|"]
    for row in document["kernels"]:
        if row["impl"] != "aotk" or "[sm_80 build" in row["kernel"]:
            continue
        entry = ratio.get(row["kernel"], {})
        cells = [f"{entry[k]:.2f}x" if k in entry else "" for k in ("vs_triton", "vs_torch")]
        lines.append(f"| {row['kernel']} | {row['value']:.1f} {row['metric']} | "
                     + " | ".join(cells) + " |")
    launch = document.get("launch") or {}
    names = {"python_aotk_jit_us": "JIT launch, 4 arguments",
             "python_aotk_jit_31_arguments_us": "JIT launch, 31 arguments",
             "python_lib_add_us": "built library from Python (`lib.add`)",
             "c_aotk_us": "built library from C (dispatch + launch)"}
    triton = {"python_aotk_jit_us": "python_triton_jit_us",
              "python_aotk_jit_31_arguments_us": "python_triton_jit_31_arguments_us"}
    rows = [(label, launch[key], launch.get(triton.get(key, ""))) for key, label in names.items()
            if key in launch]
    if rows:
        lines += ["", "| launch | aotk us per call | Triton us per call |", "|---|---|---|"]
        lines += [f"| {label} | {ours:.1f} | {'' if theirs is None else f'{theirs:.1f}'} |"
                  for label, ours, theirs in rows]
    return "\n".join(lines)


def replace_section(readme: str, body: str) -> str:
    """``readme`` with the text between the markers replaced by ``body``."""
    if readme.count(BEGIN) != 1 or readme.count(END) != 1 or \
            readme.index(BEGIN) > readme.index(END):
        raise ValueError(f"README needs one {BEGIN} line followed by one {END} line")
    head, rest = readme.split(BEGIN)
    _, tail = rest.split(END)
    return f"{head}{BEGIN}\n{body}\n{END}{tail}"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("result", type=pathlib.Path)
    parser.add_argument("--readme", type=pathlib.Path, default=ROOT / "README.md")
    options = parser.parse_args(argv)
    document = json.loads(options.result.read_text())
    try:
        source = options.result.resolve().relative_to(ROOT)
    except ValueError:
        source = options.result
    updated = replace_section(options.readme.read_text(), table(document, str(source)))
    options.readme.write_text(updated)
    print(f"updated {options.readme}")


if __name__ == "__main__":
    main()
