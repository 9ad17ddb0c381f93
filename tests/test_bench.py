"""The benchmark harness's own logic on a recorded H200 run, and a smoke run of its
build-time part (the part that needs no GPU)."""
import json
import os
import subprocess
import sys
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:   # Python 3.10
    import tomli as tomllib

import pytest
from tests.conftest import tree_pythonpath

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
import harness  # noqa: E402

SAMPLE = json.loads((ROOT / "tests" / "data" / "bench_sample.json").read_text())


def test_ratios_are_other_time_over_aotk_time():
    ratios = harness.ratios(SAMPLE["kernels"])
    assert ratios["add"]["vs_triton"] == pytest.approx(0.745 / 0.746)
    assert ratios["add"]["vs_torch"] == pytest.approx(0.741 / 0.746)
    assert ratios["copy"] == {"vs_triton": pytest.approx(0.508 / 0.517)}


def test_kernel_row_computes_bandwidth():
    row = harness.kernel_row("add", "aotk", 0.5, "GB/s", 12 * 2**28)
    assert row["value"] == pytest.approx(12 * 2**28 / 0.5e-3 / 1e9)
    with pytest.raises(ValueError):
        harness.kernel_row("add", "cuda", 0.5, "GB/s", 1)
    with pytest.raises(ValueError):
        harness.kernel_row("add", "aotk", 0.0, "GB/s", 1)


def test_markdown_table():
    text = harness.markdown(SAMPLE)
    assert "GPU: NVIDIA H200; driver: 580.159.04" in text
    add = [l for l in text.splitlines() if l.startswith("| add |")][0]
    cells = [c.strip() for c in add.strip("|").split("|")]
    assert cells == ["add", "0.746", "0.745", "0.741", "GB/s", "4316.2", "0.999x", "0.993x"]
    copy = [l for l in text.splitlines() if l.startswith("| copy |")][0]
    assert copy.rstrip().endswith("| 0.983x |  |")
    assert "| C dispatch / raw cuLaunchKernel | 1.006x |" in text
    assert "| builds | 8 |" in text


def test_validate_rejects_broken_documents():
    broken = dict(SAMPLE)
    del broken["launch"]
    with pytest.raises(ValueError, match="launch"):
        harness.validate(broken)
    bad_row = dict(SAMPLE, kernels=[{"kernel": "add", "impl": "aotk"}])
    with pytest.raises(ValueError, match="kernel row"):
        harness.validate(bad_row)


def test_result_file_name_carries_date_gpu_driver_versions():
    assert harness.result_stem(SAMPLE) == "2026-11-22_nvidia-h200_drv580.159.04_aotk0.1.0_triton3.6.0"


@pytest.mark.slow
def test_build_time_part_runs_without_a_gpu(tmp_path):
    result = subprocess.run([sys.executable, str(ROOT / "bench" / "run.py"), "--build-only",
                             "--out", str(tmp_path)], capture_output=True, text=True,
                            env={**os.environ, "PYTHONPATH": tree_pythonpath()})
    assert result.returncode == 0, result.stderr
    (document_path,) = tmp_path.glob("*.json")
    document = json.loads(document_path.read_text())
    harness.validate(document)
    manifest = tomllib.loads((ROOT / "aotk.toml").read_text())
    # Every variant expands into an aligned and a generic build, unless its specialize (or
    # its kernel's) is "none" or "aligned".
    assert document["build"]["builds"] == sum(
        1 if v.get("specialize", k.get("specialize", "auto")) != "auto" else 2
        for k in manifest["kernel"] for v in k["variant"])
    assert document["build"]["noop_s"] < document["build"]["cold_one_job_s"]
    assert any("kernel timings" in s for s in document["skipped"])
    assert (tmp_path / (document_path.stem + ".md")).exists()
    assert result.stdout.rstrip().endswith("launch overhead (--build-only)")


@pytest.mark.parametrize("targets", ["sm_90", "sm_90,sm_80"])
def test_compile_speed_compares_both_compilers_without_a_gpu(tmp_path, targets):
    pytest.importorskip("triton")
    # One compile a kernel and side: the harness is under test, not the medians (a third
    # of the three runs' time in the CPU suite).
    result = subprocess.run([sys.executable, str(ROOT / "bench" / "compile_speed.py"),
                             "--out", str(tmp_path), "--target", targets, "--runs", "1"],
                            capture_output=True, text=True,
                            env={**os.environ, "PYTHONPATH": tree_pythonpath()}, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    document = json.loads((tmp_path / "compile_speed.json").read_text())
    assert document["runs"] == 1
    # Several targets are compiled oldest first, as a library build does.
    assert document["target"] == ",".join(sorted(targets.split(",")))
    assert [r["kernel"] for r in document["rows"]][:2] == ["add_kernel", "softmax_kernel"]
    for row in document["rows"]:
        assert 0 < row["aotk_ptxas_s"] < row["aotk_s"]
        assert 0 < row["triton_ptxas_s"] < row["triton_s"]   # its ptxas subprocesses
    text = (tmp_path / "compile_speed.md").read_text()
    assert "| add_kernel | BLOCK=1024, 4 warps |" in text and "median of 1 per kernel" in text


def test_the_readme_table_is_regenerated_between_its_markers():
    """bench/readme_table.py: one row per example kernel built for the GPU, the ratios as
    harness.ratios gives them, the source named; the text around the markers kept."""
    import readme_table
    body = readme_table.table(SAMPLE, "bench/results/sample.json")
    ratio = harness.ratios(SAMPLE["kernels"])
    kernel = next(r["kernel"] for r in SAMPLE["kernels"] if r["impl"] == "aotk")
    row = next(line for line in body.splitlines() if line.startswith(f"| {kernel} |"))
    if "vs_triton" in ratio[kernel]:
        assert f"{ratio[kernel]['vs_triton']:.2f}x" in row
    assert "[sm_80 build" not in body and "bench/results/sample.json" in body
    readme = f"intro\n{readme_table.BEGIN}\nold\n{readme_table.END}\noutro\n"
    updated = readme_table.replace_section(readme, body)
    assert updated.startswith("intro\n") and updated.endswith("\noutro\n")
    assert "old" not in updated and body in updated
    with pytest.raises(ValueError, match="perf-table:begin"):
        readme_table.replace_section("no markers", body)


def test_fla_bench_table_times_only_what_matches_triton():
    """bench/linear_attention.py's table (the run needs a GPU): a row timed, one whose
    outputs differ from Triton's (not timed), one that failed; the means over timed rows."""
    sys.path.insert(0, str(ROOT))
    from bench import linear_attention as fla_bench
    torch = pytest.importorskip("torch")
    assert fla_bench._difference(torch.tensor([1.0, -2.0]), torch.tensor([1.0, -2.1])) == \
        pytest.approx(0.1 / 2.1)
    document = {"gpu": "GPU", "triton": "3.6.0", "fla_core": "0.6.0", "size": {"T": 2048},
                "dtype": "bfloat16", "rows": [
                    {"case": "hgrn chunk_hgrn", "difference_to_triton": 1e-3,
                     "difference_to_reference": 2e-3, "triton_difference_to_reference": 2e-3,
                     "aotk_ms": 0.5, "triton_ms": 0.6, "aotk_kernel_us": 400.0,
                     "triton_kernel_us": 480.0},
                    {"case": "gla chunk_gla", "difference_to_triton": 0.5,
                     "difference_to_reference": 0.5, "triton_difference_to_reference": 1e-3},
                    {"case": "kda chunk_kda", "error": "RuntimeError: no"}]}
    text = fla_bench.markdown(document)
    assert "| hgrn chunk_hgrn | 1.0e-03 | 2.0e-03 (2.0e-03) | 0.500 | 0.600 | 1.200 |" in text
    assert "| gla chunk_gla | 5.0e-01 | 5.0e-01 (1.0e-03) | not timed: outputs differ |" in text
    assert "| kda chunk_kda | RuntimeError: no |" in text
    assert "1 of 3 cases timed; geometric mean ratio (Triton / aotk): whole op 1.200, " \
           "kernels 1.200." in text


def test_liger_merge_takes_logs_of_runs_cut_short_beside_a_json(tmp_path):
    """bench/liger.py --merge: the rows a cut run printed (its log) with another run's
    liger.json, the later row of a case winning; logs alone name no GPU: a clear error."""
    row = lambda case, us: {"case": case, "kernels": ["k"], "matches_triton": "yes",   # noqa: E731
                            "matches_torch": "yes", "aotk_ms": 1.0, "triton_ms": 1.0,
                            "aotk_kernel_us": us, "triton_kernel_us": 10.0}
    first = tmp_path / "liger.json"
    first.write_text(json.dumps({"gpu": "NVIDIA H200", "triton": "3.6.0", "torch": "2.11",
                                 "liger_kernel": "0.8.5",
                                 "rows": [row("a", 20.0), row("b", 10.0)]}))
    log = tmp_path / "cut.log"
    log.write_text("compiling...\n" + json.dumps(row("a", 5.0)) + "\n")
    merged = subprocess.run([sys.executable, str(ROOT / "bench" / "liger.py"), "--merge",
                             str(first), str(log), "--out", str(tmp_path / "out")],
                            capture_output=True, text=True, timeout=120)
    assert merged.returncode == 0, merged.stderr[-2000:]
    document = json.loads((tmp_path / "out" / "liger.json").read_text())
    assert document["gpu"] == "NVIDIA H200"
    assert {r["case"]: r["aotk_kernel_us"] for r in document["rows"]} == {"a": 5.0, "b": 10.0}
    alone = subprocess.run([sys.executable, str(ROOT / "bench" / "liger.py"), "--merge",
                            str(log), "--out", str(tmp_path / "out2")],
                           capture_output=True, text=True, timeout=120)
    assert alone.returncode != 0 and "give at least one run's liger.json" in alone.stderr
    assert not (tmp_path / "out2").exists()


def test_liger_parts_deal_the_cases_round_robin():
    """bench/liger.py --part K/N: N parts that together hold every case once."""
    import liger as liger_bench   # bench/liger.py (bench/ is on the path: top of this file)
    names = [f"case{i}" for i in range(11)]
    parts = [liger_bench.part_of(names, f"{k}/4") for k in range(1, 5)]
    assert parts[0] == {"case0", "case4", "case8"} and parts[3] == {"case3", "case7"}
    assert set().union(*parts) == set(names) and sum(map(len, parts)) == len(names)
    for bad in ("0/4", "5/4", "2", "a/b"):
        with pytest.raises(SystemExit, match="--part"):
            liger_bench.part_of(names, bad)


def test_recorded_launches_come_back_as_the_variants_they_were(tmp_path, monkeypatch):
    """bench/launches.py writes what a run launched; bench/registers.py --launches compiles
    exactly those variants (kernel, signature with its hints, constexprs of every type,
    launch options) with aotk and Triton. Recorded here on the interpreter at the test
    sizes (on a GPU: the benchmark's sizes)."""
    pytest.importorskip("liger_kernel")
    pytest.importorskip("triton")
    monkeypatch.setenv("AOTK_INTERPRET", "1")
    import launches as launches_bench   # bench/launches.py
    import registers
    import aotk
    from tests.compat import liger
    # rms_norm's backward takes a dtype constexpr; the SwiGLU MLP's forward tensor descriptors.
    document = launches_bench.record("liger", {"rms_norm", "mlp"}, device="cpu")
    path = tmp_path / "launches.json"
    path.write_text(json.dumps(document))
    found, library = registers.recorded(path)
    assert library == "liger" and len(found) == len(document["launches"]) >= 3
    ops = liger.load_ops(redirect=True)
    cases = {case.name: case for case in liger.cases()}
    with aotk.record_launches() as direct:
        for name in ("rms_norm", "mlp"):
            cases[name].run(ops, cases[name].make_inputs("cpu", False))
    assert {launch.specialization() for _, launch in found} == \
        {launch.specialization() for launch in direct}
    constants = [value for _, launch in found for value in launch.constants.values()]
    assert {"DType", "HostDescriptorLayout"} <= {type(value).__name__ for value in constants}
    rows = registers.measure(["sm_90"], "liger", found)
    assert len(rows) == len(found)
    for row in rows:
        assert "registers" in row["aotk"] and "registers" in row["triton"], row
    # A file naming a kernel the installed library lacks: one clear error, naming both.
    document["launches"][0]["kernel"] = "rms_norm._no_such_kernel"
    path.write_text(json.dumps(document))
    with pytest.raises(SystemExit, match="_no_such_kernel.*not in the installed liger"):
        registers.recorded(path)


def test_implementations_take_turns_each_first_as_often():
    """bench.timing.turns: every round times each implementation once, and the first of a
    round rotates, so a drifting clock favors none of them."""
    from bench.timing import turns
    order = turns(["aotk", "triton", "torch"], 6)
    assert all(sorted(round_) == ["aotk", "torch", "triton"] for round_ in order)
    firsts = [round_[0] for round_ in order]
    assert firsts.count("aotk") == firsts.count("triton") == firsts.count("torch") == 2


def test_the_kda_solve_bench_finds_both_kernels_and_builds_its_inputs():
    """bench/fla_kda_solve.py without a GPU: KDA's inter-solve kernel under each compiler,
    inputs of fla's bench size, and the table it prints."""
    pytest.importorskip("fla")
    pytest.importorskip("triton")
    pytest.importorskip("torch")
    import fla_kda_solve
    import fla_kkt_solve
    found = fla_kkt_solve.kernels(fla_kda_solve.MODULE, fla_kda_solve.KERNEL)
    assert set(found) == {"aotk", "triton"}
    assert all(f.__name__ == fla_kda_solve.KERNEL for f in found.values())
    data = fla_kda_solve.inputs("cpu")
    assert tuple(data["q"].shape) == tuple(data["k"].shape) == (4, 2048, 8, 128)
    assert str(data["k"].dtype) == "torch.bfloat16"
    assert tuple(data["g"].shape) == (4, 2048, 8, 128) and tuple(data["beta"].shape) == (4, 2048, 8)
    assert tuple(data["diagonal"].shape) == (4, 2048, 8, fla_kda_solve.BC)
    table = fla_kda_solve.markdown({"gpu": "H200", "triton": "3.6.0", "row": {
        "aotk_us": 60.92, "triton_us": 59.66, "aotk_over_triton": 1.021,
        "difference_aqk": 1.5e-3, "difference_akk": 6.1e-5}})
    assert "| 60.92 | 59.66 | 1.021 | 1.5e-03 | 6.1e-05 |" in table


def test_the_kkt_solve_bench_finds_both_kernels_and_builds_its_inputs():
    """bench/fla_kkt_solve.py without a GPU: fla's kernel under each compiler, inputs of
    fla's bench size, and the table it prints."""
    pytest.importorskip("fla")
    pytest.importorskip("triton")
    pytest.importorskip("torch")
    import fla_kkt_solve
    found = fla_kkt_solve.kernels()
    assert set(found) == {"aotk", "triton"}
    assert all(f.__name__ == fla_kkt_solve.KERNEL for f in found.values())
    data = fla_kkt_solve.inputs("cpu")
    assert tuple(data["k"].shape) == (4, 2048, 8, 128) and str(data["k"].dtype) == "torch.bfloat16"
    assert tuple(data["g"].shape) == tuple(data["beta"].shape) == (4, 2048, 8)
    table = fla_kkt_solve.markdown({"gpu": "H200", "triton": "3.6.0", "rows": [
        {"num_warps": 1, "aotk_us": 19.82, "triton_us": 22.14, "aotk_over_triton": 0.895,
         "difference": 1.2e-7}]})
    assert "| 1 | 19.82 | 22.14 | 0.895 | 1.2e-07 |" in table
