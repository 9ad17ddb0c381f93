"""``aotk.compile`` keeps Python's cyclic collector from running inside a compile (its
llvmlite IR is short-lived garbage full of cycles, and the collector's passes over it cost
a matmul compile 13 % of its time), and leaves the collector as the caller had it, also
when the compile fails."""
import gc
import sys

import pytest

import aotk
from aotk import compiler
from tests.kernels.elementwise import binary_ops_kernel

SIGNATURE = "*fp32:16, *fp32:16, *fp32:16, i32"


def _compile(constants):
    compiler.forget_machine_code()   # LLVM and ptxas run again, as in a fresh build
    return aotk.compile(binary_ops_kernel, SIGNATURE, constants, target="sm_80")


def _inside_a_compile() -> bool:
    """Is a compile lowering the kernel or running LLVM and ptxas (where its time goes)?"""
    frame = sys._getframe()
    while frame is not None:
        code = frame.f_code
        if code.co_filename == compiler.__file__ and code.co_name in ("_lower", "_machine_code"):
            return True
        frame = frame.f_back
    return False


@pytest.fixture
def collections():
    """The generations the collector visited inside a compile while the test ran."""
    seen = []

    def record(phase, info):
        if phase == "start" and _inside_a_compile():
            seen.append(info["generation"])
    gc.collect()
    gc.callbacks.append(record)
    yield seen
    gc.callbacks.remove(record)


def test_the_collector_does_not_run_during_a_compile(collections):
    # Allocations that would have started the collector many times over while it ran.
    threshold = gc.get_threshold()
    gc.set_threshold(10, 10, 10)
    try:
        compiled = _compile({"OP": "add", "BLOCK": 1024})
        assert gc.isenabled()
    finally:
        gc.set_threshold(*threshold)
    assert compiled.cubin and collections == []


def test_the_collector_stays_off_where_the_caller_turned_it_off():
    gc.disable()
    try:
        _compile({"OP": "add", "BLOCK": 1024})
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_the_collector_is_back_on_after_a_failed_compile():
    with pytest.raises(Exception):
        _compile({"OP": "no_such_op", "BLOCK": 1024})
    assert gc.isenabled()
