"""flash-linear-attention (``fla-core``), a second installed Triton kernel library, loaded
through aotk's import redirection.

In: the installed ``fla`` package (a test extra; nothing of it is copied here). Out:
- ``op_modules()``: the names of its Triton op modules (``fla.ops.*``), less the backends
  that are not Triton for CUDA (Ascend NPUs, TileLang, Gluon);
- ``load_ops(redirect)``: the op packages the cases call, imported with ``import triton``
  giving aotk (``redirect=True``) or the real triton; ``sys.modules`` is left as found;
- ``cases()``: fla's own host code for six recurrences (simple GLA, GLA, gated delta rule,
  linear attention, HGRN, KDA), each in its chunked and its fused-recurrent form, run on
  inputs and compared with fla's own PyTorch reference (``naive_recurrent_*``);
- ``run_cases(ops)``: each case on the CPU interpreter with its launches recorded.
"""
from __future__ import annotations

import contextlib
import dataclasses
import importlib
import importlib.util
import pkgutil
import sys
from typing import Callable

from aotk.triton_imports import redirect_triton

from . import fresh_package, interpreting

PACKAGE = "fla"

# Op modules that are not Triton-for-CUDA code: other backends and languages.
OTHER_BACKENDS = ("ascend", "tilelang", "gluon", "npu")

# The recurrences the cases run: {family: (chunked op, fused-recurrent op, reference)}.
FAMILIES = {
    "simple_gla": ("chunk_simple_gla", "fused_recurrent_simple_gla",
                   "naive_recurrent_simple_gla"),
    "gla": ("chunk_gla", "fused_recurrent_gla", "naive_recurrent_gla"),
    "gated_delta_rule": ("chunk_gated_delta_rule", "fused_recurrent_gated_delta_rule",
                         "naive_recurrent_gated_delta_rule"),
    "linear_attn": ("chunk_linear_attn", "fused_recurrent_linear_attn",
                    "naive_recurrent_linear_attn"),
    "hgrn": ("chunk_hgrn", "fused_recurrent_hgrn", "naive_recurrent_hgrn"),
    "kda": ("chunk_kda", "fused_recurrent_kda", "naive_recurrent_kda"),
}


def installed() -> bool:
    return importlib.util.find_spec(PACKAGE) is not None


def op_modules() -> list[str]:
    import fla.ops
    return sorted(m.name for m in pkgutil.walk_packages(fla.ops.__path__, "fla.ops.")
                  if not any(part in m.name for part in OTHER_BACKENDS))


_loaded: dict = {}


def load_ops(redirect: bool = True) -> dict:
    """{family: its package (``fla.ops.<family>``), family + ".naive": its references}."""
    if redirect not in _loaded:
        with fresh_package(PACKAGE), (redirect_triton() if redirect else contextlib.nullcontext()):
            ops = {}
            for family in FAMILIES:
                ops[family] = importlib.import_module(f"fla.ops.{family}")
                ops[family + ".naive"] = importlib.import_module(f"fla.ops.{family}.naive")
            # Every module that defines a kernel the cases launch, by name.
            ops["modules"] = {name: module for name, module in sys.modules.items()
                              if name.startswith("fla.ops.")}
            _loaded[redirect] = ops
    return _loaded[redirect]


@dataclasses.dataclass
class Case:
    name: str          # "<family> <op>"
    family: str
    op: str
    chunked: bool      # chunked ops multiply fp32 on tensor cores as tf32
    call: Callable     # (op function, inputs) -> outputs
    backward: bool     # fla implements its gradient

    def run(self, ops, inputs):
        out = self.call(getattr(ops[self.family], self.op), inputs)
        return out[0] if isinstance(out, tuple) else out

    def reference(self, ops, inputs):
        reference = getattr(ops[self.family + ".naive"], FAMILIES[self.family][2])
        return _REFERENCE_CALLS[self.family](reference, inputs)[0]

    def tolerance(self, reference) -> float:
        """Chunked forms take fp32 dots as tf32 (10-bit mantissas): 1% of the output's
        largest magnitude; the fused-recurrent forms are fp32 throughout."""
        scale = float(reference.abs().max())
        return 1e-2 * scale if self.chunked else 1e-5 * max(1.0, scale)


# The test size (T not a multiple of the 64-step chunks) and the GPU benchmark's.
TEST_SIZE = {"B": 1, "T": 80, "H": 2, "K": 32, "V": 32}
BENCH_SIZE = {"B": 4, "T": 2048, "H": 8, "K": 128, "V": 128}


def make_inputs(device: str = "cpu", size: dict = TEST_SIZE, dtype=None) -> dict:
    """q, k, v (and k of unit rows, for the delta rules), gates and HGRN's x: ``dtype``
    (default float32) for what the ops read, the gates float32 as fla keeps them."""
    import torch
    import torch.nn.functional as F
    generator = torch.Generator().manual_seed(0)
    dtype = dtype or torch.float32

    def randn(*shape, scale=1.0):
        return (torch.randn(*shape, generator=generator) * scale).to(device)
    B, T, H, K, V = (size[n] for n in "BTHKV")
    k = randn(B, T, H, K, scale=0.5)
    inputs = {"q": randn(B, T, H, K, scale=0.5), "k": k, "v": randn(B, T, H, V, scale=0.5),
              "k_unit": F.normalize(k, dim=-1), "x": randn(B, T, 64)}
    inputs = {name: value.to(dtype) for name, value in inputs.items()}
    return {**inputs, "g": F.logsigmoid(randn(B, T, H)), "gk": F.logsigmoid(randn(B, T, H, K)),
            "beta": torch.rand(B, T, H, generator=generator).to(device).sigmoid(),
            "gx": F.logsigmoid(randn(B, T, 64))}


# The same inputs to the op (keywords where the two forms' positions differ) and reference.
_OP_CALLS = {
    "simple_gla": lambda f, i: f(i["q"], i["k"], i["v"], i["g"]),
    "gla": lambda f, i: f(i["q"], i["k"], i["v"], i["gk"]),
    "gated_delta_rule": lambda f, i: f(i["q"], i["k_unit"], i["v"], g=i["g"], beta=i["beta"]),
    "linear_attn": lambda f, i: f(i["q"], i["k"], i["v"], normalize=False),
    "hgrn": lambda f, i: f(i["x"], i["gx"]),
    "kda": lambda f, i: f(i["q"], i["k_unit"], i["v"], g=i["gk"], beta=i["beta"]),
}
_REFERENCE_CALLS = {
    "simple_gla": lambda f, i: f(i["q"], i["k"], i["v"], i["g"]),
    "gla": lambda f, i: f(i["q"], i["k"], i["v"], i["gk"]),
    "gated_delta_rule": lambda f, i: f(i["q"], i["k_unit"], i["v"], i["beta"], i["g"]),
    "linear_attn": lambda f, i: f(i["q"], i["k"], i["v"]),
    "hgrn": lambda f, i: f(i["x"], i["gx"]),
    "kda": lambda f, i: f(i["q"], i["k_unit"], i["v"], i["gk"], i["beta"]),
}


# Ops fla gives no gradient: its fused-recurrent gated delta rule raises
# NotImplementedError in backward, its fused-recurrent KDA returns outputs without one.
NO_BACKWARD = {"fused_recurrent_gated_delta_rule", "fused_recurrent_kda"}


def cases() -> list:
    return [Case(f"{family} {op}", family, op, op.startswith("chunk"), _OP_CALLS[family],
                 op not in NO_BACKWARD)
            for family, names in FAMILIES.items() for op in names[:2]]


def gradients(case, ops, inputs: dict, output_grad=None) -> tuple:
    """(op's gradients, reference's gradients), {input name: gradient}, of the sum of the
    output times ``output_grad`` (seeded normal values by default): the op's backward
    kernels against autograd through fla's PyTorch reference."""
    import torch

    def leaves():
        return {name: value.detach().clone().requires_grad_(True)
                for name, value in inputs.items()}
    op_inputs, reference_inputs = leaves(), leaves()
    out = case.run(ops, op_inputs)
    if output_grad is None:
        output_grad = torch.randn(out.shape, generator=torch.Generator().manual_seed(1)) \
            .to(out.device, out.dtype)
    (out * output_grad).sum().backward()
    (case.reference(ops, reference_inputs) * output_grad).sum().backward()
    found = {name: value.grad for name, value in op_inputs.items() if value.grad is not None}
    wanted = {name: value.grad for name, value in reference_inputs.items()
              if value.grad is not None}
    return found, wanted


def run_cases(ops) -> dict:
    """{case name: (outputs, reference, launches)} on the CPU interpreter (AOTK_INTERPRET=1
    for the duration); an exception in place of the outputs where a case failed. The
    launches are the forward's and, where fla has one, the backward's (``gradients``)."""
    import aotk
    results = {}
    with interpreting():
        inputs = make_inputs("cpu")
        for case in cases():
            reference = case.reference(ops, inputs)
            with aotk.record_launches() as launches:
                try:
                    outputs = case.run(ops, inputs)
                    if case.backward:
                        gradients(case, ops, inputs)
                except Exception as exc:   # noqa: BLE001 - reported by the caller
                    outputs = exc
            results[case.name] = (outputs, reference, list(launches))
    return results


def triton_function(kernel):
    """The real triton's JITFunction of an aotk kernel that one of the cases launched."""
    import triton
    module = load_ops(redirect=False)["modules"][kernel.fn.__module__]
    function = getattr(module, kernel.__name__)
    while not isinstance(function, triton.runtime.jit.JITFunction):
        function = function.fn
    return function
