"""Loads the library built from the root aotk.toml and runs it on torch tensors.

    aotk build && python examples/python/demo.py
"""
import pathlib

import torch

import aotk

ROOT = pathlib.Path(__file__).resolve().parents[2]
lib = aotk.load(ROOT / "build" / "libexamples.so")

n = 1_000_003
x = torch.randn(n + 1, device="cuda")
y = torch.randn(n + 1, device="cuda")
out = torch.empty(n + 1, device="cuda")
print("aligned:", lib.add.select(x, y, out, n))
lib.add(x, y, out, n)
print("unaligned:", lib.add.select(x[1:], y[1:], out[1:], n))
lib.add(x[1:], y[1:], out[1:], n, stream=torch.cuda.current_stream())
torch.cuda.synchronize()
torch.testing.assert_close(out[1:], x[1:] + y[1:])
print("OK")
