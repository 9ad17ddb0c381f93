"""The compatibility suite: liger-kernel, a Triton kernel library installed from the package
index (aotk's test extra), used unmodified through aotk's import redirection.

- every CUDA op module of liger loads with ``import triton`` giving aotk;
- liger's own host code (its autograd Functions) runs each sampled op on torch CPU tensors,
  which aotk's interpreter executes (``AOTK_INTERPRET=1``), and the results match PyTorch;
- every kernel launch that host code made is compiled ahead of time for sm_80 and sm_90 with
  the same specialization (argument types and divisibility, constexprs, num_warps,
  num_stages); at least 95% of liger's kernels compile, and each one left out is listed in
  ``LEFT_OUT`` with its reason.
bench/liger.py runs the same cases on the GPU against liger under the real Triton.
"""
import pytest

pytest.importorskip("liger_kernel", reason="liger-kernel is in the test extra: "
                    "pip install -e '.[test]'")

import aotk  # noqa: E402
import torch  # noqa: E402
from tests.compat import autotune_variants, compile_failures, liger  # noqa: E402

TARGETS = ("sm_80", "sm_90")

# Kernels liger ships that are not compiled here, with the reason.
_SOFTMAX_MULTI_BLOCK = (
    "never launched: liger's host code sizes the block as next_power_of_2(n_cols), refuses "
    "rows over 65536 and so always takes the single-block kernels; and it calls a dtype "
    "(tl.float32(0.0)), which Triton 3.8 rejects too ('dtype' object is not callable)")
LEFT_OUT = {
    "softmax._softmax_multi_block_forward_kernel": _SOFTMAX_MULTI_BLOCK,
    "softmax._softmax_multi_block_backward_kernel": _SOFTMAX_MULTI_BLOCK,
}


@pytest.fixture(scope="module")
def ops():
    return liger.load_ops(redirect=True)


@pytest.fixture(scope="module")
def runs(ops):
    """{case name: (outputs, reference outputs, launches)}; an exception in place of the
    outputs where liger's host code or the interpreter failed."""
    ran = liger.run_cases(ops)
    return {case.name: (ran[case.name][0], case.reference(case.make_inputs("cpu", False)),
                        ran[case.name][1]) for case in liger.cases()}


def test_every_cuda_op_module_of_liger_loads_with_triton_as_aotk(ops):
    assert len(ops) == len(liger.op_files()) >= 35
    uses_triton = [m for m in ops.values() if hasattr(m, "triton")]
    assert uses_triton and all(m.triton is aotk for m in uses_triton)
    found, device_functions = liger.kernels(ops)
    assert len(found) >= 80 and "swiglu.silu" in device_functions


def test_a_real_triton_import_is_left_alone_beside_the_redirected_one(ops):
    """Both loads of liger live in one process (bench/liger.py compares them on the GPU)."""
    real = liger.load_ops(redirect=False)
    assert real["rms_norm"] is not ops["rms_norm"]
    assert getattr(real["rms_norm"], "triton", None) is not aotk


@pytest.mark.parametrize("case", liger.cases(), ids=lambda case: case.name)
def test_liger_op_on_the_interpreter_matches_pytorch(runs, case):
    outputs, reference, launches = runs[case.name]
    if isinstance(outputs, Exception):
        raise outputs
    assert launches, f"{case.name} launched no kernel"
    assert len(outputs) == len(reference)
    for index, (got, want) in enumerate(zip(outputs, reference)):
        torch.testing.assert_close(got, want, atol=case.atol, rtol=case.rtol,
                                   msg=lambda m: f"{case.name} output {index}: {m}")


def _compile_all(runs, ops):
    """{kernel name: reason} of the kernels that did not compile or were never launched,
    and the number of specializations compiled."""
    found, _ = liger.kernels(ops)
    by_function = {id(function): name for name, function in found.items()}
    launches = {}
    for _, _, case_launches in runs.values():
        for launch in case_launches:
            launches.setdefault(launch.specialization(), launch)
    failures, launched, compiled = {}, set(), 0
    for launch in launches.values():
        name = by_function[id(launch.kernel)]
        launched.add(name)
        for target in TARGETS:
            try:
                aotk.compile(launch.kernel, launch.signature, launch.constants,
                             launch.num_warps, launch.num_stages, target=target)
                compiled += 1
            except Exception as exc:   # noqa: BLE001 - every failure is reported
                first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
                failures.setdefault(name, f"{target}: {type(exc).__name__}: {first_line}")
    for name in found:
        if name not in launched:
            failures.setdefault(name, "not launched by any sampled liger host code")
    return found, failures, compiled


@pytest.mark.slow
def test_liger_kernels_compile_for_sm80_and_sm90_with_liger_launch_configs(runs, ops):
    found, failures, compiled = _compile_all(runs, ops)
    report = [f"liger-kernel: {len(found) - len(failures)} of {len(found)} kernels compile "
              f"for {' and '.join(TARGETS)} ({compiled} specialization builds)"]
    report += [f"  left out: {name}: {LEFT_OUT.get(name, reason)}"
               for name, reason in sorted(failures.items())]
    print("\n".join(report))
    assert set(failures) == set(LEFT_OUT), "\n".join(report)
    assert len(found) - len(failures) >= 0.95 * len(found), "\n".join(report)


@pytest.mark.slow
def test_every_autotune_config_of_a_launched_kernel_compiles_for_sm_90(runs, ops):
    """On the GPU liger's autotuners compile every config; the interpreter runs only the
    first. A config may fail only on the kernel's own static_assert about the launch's
    shapes (mm_int8int2's BLOCK_SIZE_K against this K), which Triton's compile fails the
    same way."""
    launches = [launch for _, _, found in runs.values() for launch in found]
    variants = autotune_variants(ops, launches)
    assert len(variants) >= 300
    failed = compile_failures(variants, "sm_90", allowed=lambda error: isinstance(
        error, aotk.CompilationError) and "static_assert failed" in str(error))
    assert not failed, failed[:5]


# The GPU suite's longest cases: liger autotunes fused_moe's five kernels over 16 to 32
# configs each, every one compiled by aotk (still running after four minutes of an H200
# call, 2026-11-28). ``slow``, so that ``-m "gpu and not slow"`` checks the rest within one
# device call; ``-m gpu`` runs them too.
SLOW_ON_THE_GPU = {"fused_moe", "fused_moe_top3"}


@pytest.mark.gpu
@pytest.mark.parametrize("case", [pytest.param(case, marks=pytest.mark.slow)
                                  if case.name in SLOW_ON_THE_GPU else case
                                  for case in liger.cases()], ids=lambda case: case.name)
def test_liger_op_on_the_gpu_matches_pytorch(ops, case):
    """The same host code on CUDA tensors: aotk compiles and launches every kernel."""
    inputs = case.make_inputs("cuda", False)
    outputs = case.run(ops, inputs)
    for index, (got, want) in enumerate(zip(outputs, case.reference(inputs))):
        torch.testing.assert_close(got, want, atol=case.atol, rtol=case.rtol,
                                   msg=lambda m: f"{case.name} output {index}: {m}")
