"""Stream-K matmul (examples/kernels/matmul_streamk.py) against cuBLAS (torch.matmul), the
tutorial kernel (examples/kernels/matmul.py, one program per tile) and the descriptor (TMA)
matmul (examples/kernels/matmul_descriptor.py), fp16 in, fp16 out, at sizes whose last wave
is partial on an H100/H200 (132 SMs), sizes that fill two waves exactly, and 4096^3.

    PYTHONPATH=. python3 bench/streamk.py [--out DIR] [--sizes 3000x3000x3000,...]

The aotk kernels run from one library built as a user ships them: 16-byte rows (`:8`
signatures: sizes and row strides divisible by 8, so 3000 qualifies) and, for stream-K,
`grid = min(num_sms, tiles)` read by the library at each call. Stream-K at 128x256x64 and
128x128x64 (8 warps, 3 stages), the others at 128x256x64. Triton's JIT of the same stream-K
source runs beside it (same launch; Triton specializes on divisibility by 16 only, so at
3000 it gets no 16-byte vectors). Every output is checked against torch.matmul before it is
timed. The workspace and counters are allocated once per size and reused by every launch
(the kernel leaves the counters zero). Time: bench/timing.time_interleaved (CUDA events, median of
back-to-back launches). Writes streamk.json and streamk.md.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from bench.harness import write_report  # noqa: E402

from timing import KERNELS, matmul_operands, time_interleaved, triton_port  # noqa: E402

SIZES = [(3000, 3000, 3000), (3072, 3000, 3000), (3072, 3072, 3072), (4096, 4096, 4096),
         (5120, 1000, 3000), (3072, 2816, 3000)]
STREAMK = {"streamk_128x256": (128, 256, 64, 8, 3), "streamk_128x128": (128, 128, 64, 8, 3)}
ROWS8 = "*fp16:16, *fp16:16, *fp16:16"
SIGNATURES = {   # 16-byte rows: every size and row stride divisible by 8
    "matmul_streamk_kernel": ROWS8 + ", *fp32:16, *i32:16" + ", i32:8" * 4 +
                             ", i32:1, i32:8, i32:1, i32:8, i32:1",
    "matmul_kernel": ROWS8 + ", i32:8" * 4 + ", i32:1, i32:8, i32:1, i32:8, i32:1",
    "matmul_descriptor_kernel": ROWS8 + ", i32:8" * 6,
}
TILES = "cdiv(M, BLOCK_SIZE_M) * cdiv(N, BLOCK_SIZE_N)"


def _kernel_table(name, source, function, grid, constants, warps, stages) -> str:
    constants = ", ".join(f"{key} = {value!r}".replace("'", '"') for key, value in constants.items())
    return "\n".join(["[[kernel]]", f'name = "{name}"', f'source = "{KERNELS / source}"',
                      f'function = "{function}"', f'signature = "{SIGNATURES[function]}"',
                      f'grid = ["{grid}"]', 'specialize = "none"', "", "[[kernel.variant]]",
                      f"constants = {{ {constants} }}", f"num_warps = {warps}",
                      f"num_stages = {stages}", ""])


def build_library(work: pathlib.Path):
    """The library of every aotk kernel timed here."""
    import aotk
    tile = {"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 8}
    tables = ["[library]", 'name = "streamk"', 'targets = ["sm_90"]', "",
              _kernel_table("tutorial", "matmul.py", "matmul_kernel", TILES,
                            {**tile, "ACTIVATION": ""}, 8, 3),
              _kernel_table("descriptor", "matmul_descriptor.py", "matmul_descriptor_kernel",
                            TILES, tile, 8, 3)]
    for name, (block_m, block_n, block_k, warps, stages) in STREAMK.items():
        tables.append(_kernel_table(
            name, "matmul_streamk.py", "matmul_streamk_kernel", f"min(num_sms, {TILES})",
            {"BLOCK_SIZE_M": block_m, "BLOCK_SIZE_N": block_n, "BLOCK_SIZE_K": block_k,
             "GROUP_SIZE_M": 8, "FIXUP_ROWS": 64}, warps, stages))
    (work / "aotk.toml").write_text("\n".join(tables))
    return aotk.load(aotk.build(work / "aotk.toml", out_dir=work / "out").library)


def run(sizes) -> dict:
    import tempfile
    import torch
    import triton
    programs = torch.cuda.get_device_properties(0).multi_processor_count
    library = build_library(pathlib.Path(tempfile.mkdtemp(prefix="aotk-streamk-")))
    module = triton_port(KERNELS / "matmul_streamk.py", use_triton=False)
    streamk_triton = triton_port(KERNELS / "matmul_streamk.py")
    rows = []
    for m, n, k in sizes:
        a, b, expected = matmul_operands(m, n, k)
        row = {"M": m, "N": n, "K": k, "programs": programs,
               "tiles_128x256": -(-m // 128) * -(-n // 256)}
        launchers = {"cublas": lambda: torch.matmul(a, b)}
        outputs = {}
        workspace = torch.empty(module.workspace_elements(programs, 128, 256), device="cuda",
                                dtype=torch.float32)

        def output():
            return torch.empty((m, n), device="cuda", dtype=torch.float16)
        c = outputs["tutorial"] = output()
        launchers["tutorial"] = lambda c=c: library.tutorial(a, b, c, m, n, k, k, 1, n, 1, n, 1)
        c = outputs["descriptor"] = output()
        launchers["descriptor"] = lambda c=c: library.descriptor(a, b, c, m, n, k, k, n, n)
        for name, (block_m, block_n, block_k, warps, stages) in STREAMK.items():
            counters = torch.zeros(module.counter_count(m, n, programs, block_m, block_n),
                                   device="cuda", dtype=torch.int32)
            c = output()
            outputs[name] = (c, counters)
            launchers[name] = lambda c=c, counters=counters, name=name: getattr(library, name)(
                a, b, c, workspace, counters, m, n, k, k, 1, n, 1, n, 1)
            counters = torch.zeros_like(counters)
            c = output()
            outputs[name + "_triton"] = (c, counters)
            launchers[name + "_triton"] = lambda c=c, counters=counters, config=(
                block_m, block_n, block_k, warps, stages): \
                streamk_triton.matmul_streamk_kernel[(programs,)](
                    a, b, c, workspace, counters, m, n, k, k, 1, n, 1, n, 1,
                    BLOCK_SIZE_M=config[0], BLOCK_SIZE_N=config[1], BLOCK_SIZE_K=config[2],
                    GROUP_SIZE_M=8, FIXUP_ROWS=64, num_warps=config[3], num_stages=config[4])
        for name, launch in list(launchers.items()):
            if name == "cublas":
                continue
            try:
                for _ in range(2):   # the second launch reuses the counters the first reset
                    launch()
                torch.cuda.synchronize()
                got = outputs[name]
                c, counters = got if isinstance(got, tuple) else (got, None)
                torch.testing.assert_close(c, expected, atol=0.5, rtol=0.05)
                if counters is not None:
                    assert torch.count_nonzero(counters).item() == 0, "counters left nonzero"
            except Exception as error:   # a failed variant is reported, not timed
                row[f"{name}_error"] = f"{type(error).__name__}: {error}"[:300]
                del launchers[name]
        for name, ms in time_interleaved(launchers).items():
            row[f"{name}_ms"] = ms
        for name in launchers:
            row[f"{name}_vs_cublas"] = row["cublas_ms"] / row[f"{name}_ms"]
        print(json.dumps(row), flush=True)
        rows.append(row)
    return {"gpu": torch.cuda.get_device_name(), "triton": triton.__version__,
            "torch": torch.__version__, "rows": rows}


def markdown(document) -> str:
    names = ["tutorial", "descriptor", "streamk_128x256", "streamk_128x128",
             "streamk_128x256_triton", "streamk_128x128_triton"]
    lines = [f"# Stream-K matmul on {document['gpu']} (fraction of cuBLAS; higher is better)",
             "", "| M x N x K | tiles 128x256 | cuBLAS ms | " + " | ".join(names) + " |",
             "|---|---|---|" + "---|" * len(names)]
    for row in document["rows"]:
        cells = [f"{row[name + '_vs_cublas']:.2f}x" if name + "_vs_cublas" in row
                 else "failed" for name in names]
        lines.append(f"| {row['M']}x{row['N']}x{row['K']} | {row['tiles_128x256']} | "
                     f"{row['cublas_ms']:.3f} | " + " | ".join(cells) + " |")
    errors = [f"- {row['M']}x{row['N']}x{row['K']} {key[:-6]}: {value}"
              for row in document["rows"] for key, value in row.items() if key.endswith("_error")]
    return "\n".join(lines + ([""] + errors if errors else [])) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "bench" / "results"))
    parser.add_argument("--sizes", default=None,
                        help="comma-separated MxNxK (default: " +
                             ",".join("x".join(map(str, s)) for s in SIZES) + ")")
    args = parser.parse_args(argv)
    sizes = SIZES if args.sizes is None else \
        [tuple(int(x) for x in size.split("x")) for size in args.sizes.split(",")]
    document = run(sizes)
    write_report(args.out, "streamk", document, markdown(document))


if __name__ == "__main__":
    main()
