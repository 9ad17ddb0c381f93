"""The library built from the root aotk.toml as PyTorch operators, eager and under
torch.compile(fullgraph=True).

    aotk build && python examples/python/torch_ops.py
"""
import pathlib

import torch

import aotk

ROOT = pathlib.Path(__file__).resolve().parents[2]
ops = aotk.torch.register(aotk.load(ROOT / "build" / "libexamples.so"))   # torch.ops.examples


def softmax_of_sum(x, y):
    out, probabilities = torch.empty_like(x), torch.empty_like(x)
    ops.add(x, y, out, x.numel())
    rows, columns = x.shape
    ops.softmax(probabilities, out, columns, columns, rows, columns)
    return probabilities


x, y = torch.randn(64, 1000, device="cuda"), torch.randn(64, 1000, device="cuda")
eager = softmax_of_sum(x, y)
compiled = torch.compile(softmax_of_sum, fullgraph=True)(x, y)
torch.testing.assert_close(eager, torch.softmax(x + y, dim=1))
torch.testing.assert_close(compiled, eager)
print("OK")
