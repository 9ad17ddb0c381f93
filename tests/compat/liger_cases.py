"""liger-kernel's ops driven through liger's own host code, each against PyTorch.

A ``Case`` makes inputs (small ones for the interpreter, ``bench`` ones for the GPU), runs
them through liger's autograd Function (forward, and backward where it has one) and through
the op's definition written in PyTorch, and returns both as tuples of tensors to compare.
Cases are grouped by op family in ``liger_cases_*.py``; ``liger.cases()`` gathers them.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Callable

import torch


@dataclass
class Case:
    name: str
    make_inputs: Callable      # (device, bench: bool) -> dict of tensors and values
    run: Callable              # (ops, inputs) -> tuple of tensors, liger's host code
    reference: Callable        # (inputs) -> tuple of tensors, PyTorch
    atol: float = 1e-5
    rtol: float = 1e-5
    modules: tuple = field(default=())   # the op modules whose kernels it launches
    # (atol, rtol) at the bench size on the GPU, where longer sums meet; default 10x the above
    bench_tolerance: tuple | None = None


def generator(seed: int = 0):
    """Inputs are drawn on the CPU and then moved: a case sees the same values on every
    device (CUDA's generator draws other numbers), so a GPU run checks what the CPU run
    checked."""
    return torch.Generator().manual_seed(seed)


def randn(shape, device, dtype=torch.float32, seed=0, scale=1.0):
    return (torch.randn(shape, generator=generator(seed)) * scale).to(dtype).to(device)


def randint(high, shape, device, seed=0):
    return torch.randint(0, high, shape, generator=generator(seed)).to(device)


def with_grads(fn, tensors: dict, grad_of: tuple, seed: int = 1):
    """Runs ``fn(*tensors.values())`` (autograd Functions take no keywords) on copies of the tensors, those named in ``grad_of`` with
    requires_grad, and back-propagates a fixed random gradient of the (first) output.
    Returns (output, *gradients in grad_of order)."""
    inputs = {k: (v.detach().clone().requires_grad_(k in grad_of)
                  if isinstance(v, torch.Tensor) else v) for k, v in tensors.items()}
    out = fn(*inputs.values())
    out = out[0] if isinstance(out, (tuple, list)) else out
    grad = randn(out.shape, out.device, out.dtype, seed) if out.dim() else torch.ones_like(out)
    out.backward(grad)
    return (out.detach(), *[inputs[k].grad for k in grad_of])


def with_outputs(fn, tensors, grad_of):
    """``with_grads`` that also returns the other tensor outputs of ``fn`` (after the first,
    the one back-propagated): (output, *other outputs, *gradients)."""
    others = []

    def first(*args):
        outputs = fn(*args)
        others.extend(o.detach() for o in outputs[1:] if isinstance(o, torch.Tensor))
        return outputs[0]

    output, *grads = with_grads(first, tensors, grad_of)
    return (output, *others, *grads)


H100_SMS = 132


@contextlib.contextmanager
def sm_count_on_cpu(module):
    """Host code of ``module`` that sizes a persistent grid by the GPU's SM count (and knows
    no CPU path) is given an H100's when its inputs are on the CPU. On the GPU this changes
    nothing."""
    real_infer, real_properties = module.infer_device, torch.cuda.get_device_properties
    if torch.cuda.is_available():
        yield
        return
    module.infer_device = lambda: "cuda"
    torch.cuda.get_device_properties = lambda device=None: SimpleNamespace(
        multi_processor_count=H100_SMS)
    try:
        yield
    finally:
        module.infer_device, torch.cuda.get_device_properties = real_infer, real_properties
