"""flash-linear-attention's Triton kernels, used as installed (``import triton`` giving aotk):
every op module imports; six recurrences, chunked and fused-recurrent, match fla's own
PyTorch references on the interpreter, outputs and (where fla has a backward) gradients;
every specialization they launch, forward and backward, compiles for sm_80 and sm_90; on
the GPU they match the references too (tests/compat/fla.py)."""
import importlib
import traceback

import pytest

from tests.compat import autotune_variants, compile_failures, fla, fresh_package

pytestmark = pytest.mark.skipif(not fla.installed(), reason="fla-core is in the test extra")

# fla-core 0.6.0's own packaging, not aotk: these fail with the real triton as well
# (checked in the test): a name its delta_rule package no longer defines, and fla.layers,
# which ships in flash-linear-attention, not in fla-core.
BROKEN_IN_FLA = {"fla.ops.delta_rule.parallel": "fwd_prepare_T",
                 "fla.ops.deltaformer": "fla.layers"}


def _import_errors(redirect: bool) -> dict:
    import contextlib
    import logging
    import warnings
    from aotk.triton_imports import redirect_triton
    errors = {}
    with fresh_package(fla.PACKAGE), (redirect_triton() if redirect else contextlib.nullcontext()), \
            warnings.catch_warnings():
        warnings.simplefilter("ignore")
        logging.disable(logging.WARNING)
        try:
            for name in fla.op_modules():
                try:
                    importlib.import_module(name)
                except Exception:   # noqa: BLE001 - collected, asserted below
                    errors[name] = traceback.format_exc(limit=-1).strip().splitlines()[-1]
        finally:
            logging.disable(logging.NOTSET)
    return errors


def test_every_op_module_imports_through_the_redirection():
    errors = _import_errors(redirect=True)
    assert len(fla.op_modules()) > 250
    assert set(errors) == set(BROKEN_IN_FLA), errors
    for name, missing in BROKEN_IN_FLA.items():
        assert missing in errors[name]
    # Not aotk's: the real triton fails on them the same way.
    real = _import_errors(redirect=False)
    assert set(BROKEN_IN_FLA) <= set(real)


@pytest.fixture(scope="module")
def results():
    return fla.run_cases(fla.load_ops(redirect=True))


@pytest.mark.parametrize("case", fla.cases(), ids=lambda case: case.name)
def test_each_recurrence_matches_flas_reference_on_the_interpreter(results, case):
    outputs, reference, launches = results[case.name]
    if isinstance(outputs, Exception):
        raise outputs
    assert launches, "the op launched no kernel"
    error = float((outputs.float() - reference.float()).abs().max())
    assert error <= case.tolerance(reference), (case.name, error)


@pytest.mark.parametrize("case", [c for c in fla.cases() if c.backward],
                         ids=lambda case: case.name)
def test_each_recurrences_gradients_match_flas_reference_on_the_interpreter(case):
    """fla's backward kernels (chunked GLA's and KDA's take a constexpr that is rebound
    after an early return) against autograd through the reference."""
    from tests.compat import interpreting
    with interpreting():
        found, wanted = fla.gradients(case, fla.load_ops(redirect=True),
                                      fla.make_inputs("cpu"))
    assert set(found) == set(wanted) and found
    for name, gradient in found.items():
        scale = float(wanted[name].abs().max()) or 1.0
        error = float((gradient - wanted[name]).abs().max()) / scale
        assert error <= (1e-2 if case.chunked else 1e-4), (name, error)


@pytest.mark.slow
def test_every_launched_specialization_compiles_for_sm_80_and_sm_90(results):
    import aotk
    specializations = {}
    for _, _, launches in results.values():
        for launch in launches:
            specializations.setdefault(launch.specialization(), launch)
    assert len(specializations) >= 45   # forward and backward kernels
    for launch in specializations.values():
        for target in ("sm_80", "sm_90"):
            compiled = aotk.compile(launch.kernel, launch.signature, launch.constants,
                                    launch.num_warps, launch.num_stages, target=target)
            assert compiled.metadata["registers"] > 0
            # No build spills kilobytes with half its registers unused (ptxas's 32-register
            # choice: ``toolchain.ptxas.assemble_with_register_room``).
            room = min(255, 65536 // (32 * launch.num_warps))
            assert not (compiled.metadata["spills"] >= 1024 and
                        compiled.metadata["registers"] * 2 <= room), (launch.kernel, target)


def _slow_on_the_gpu(cases):
    """kda's chunked recurrence, the GPU suite's other long case (still running after five
    minutes of an H200 call, 2026-11-28): ``slow``, as liger's fused_moe cases are."""
    return [pytest.param(case, marks=pytest.mark.slow) if case.name == "kda chunk_kda"
            else case for case in cases]


@pytest.mark.gpu
@pytest.mark.parametrize("case", _slow_on_the_gpu(fla.cases()), ids=lambda case: case.name)
def test_each_recurrence_matches_flas_reference_on_the_gpu(case):
    ops = fla.load_ops(redirect=True)
    inputs = fla.make_inputs("cuda")
    reference = case.reference(ops, inputs)
    outputs = case.run(ops, inputs)
    error = float((outputs.float() - reference.float()).abs().max())
    assert error <= case.tolerance(reference), (case.name, error)


@pytest.mark.gpu
@pytest.mark.parametrize("case", _slow_on_the_gpu([c for c in fla.cases() if c.backward]),
                         ids=lambda case: case.name)
def test_each_recurrences_gradients_match_flas_reference_on_the_gpu(case):
    found, wanted = fla.gradients(case, fla.load_ops(redirect=True), fla.make_inputs("cuda"))
    assert set(found) == set(wanted) and found
    for name, gradient in found.items():
        scale = float(wanted[name].abs().max()) or 1.0
        error = float((gradient - wanted[name]).abs().max()) / scale
        assert error <= (1e-2 if case.chunked else 1e-4), (name, error)


@pytest.mark.slow
def test_every_autotune_config_of_a_launched_kernel_compiles_for_sm_90(results):
    """On the GPU fla's autotuners compile every config; the interpreter runs only the
    first. 101 of these failed to compile (a tf32 B left in wgmma fragments) while every
    first config did, and fla's gradients failed on the GPU alone."""
    launches = [launch for _, _, found in results.values() for launch in found]
    variants = autotune_variants(fla.load_ops(redirect=True)["modules"], launches)
    assert len(variants) >= 500
    failed = compile_failures(variants, "sm_90")
    assert not failed, failed[:5]
