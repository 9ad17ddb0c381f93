"""Cases: liger's normalizations and elementwise activations, forward and backward."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from .liger_cases import Case, randn, sm_count_on_cpu, with_grads


def _rows(bench):
    return (4096, 4096) if bench else (6, 200)


# --- RMSNorm (llama casting: the normalization in fp32, the weight applied in X's type) ----

def _rms_inputs(device, bench, dtype=torch.float32, rows_cols=None):
    rows, cols = rows_cols or _rows(bench)
    return dict(X=randn((rows, cols), device, dtype), W=randn((cols,), device, dtype, seed=2),
                eps=1e-6, offset=0.0)


def _rms_reference(X, W, eps, offset):
    x = X.float()
    normed = (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)).to(X.dtype)
    return normed * (offset + W)


def _rms_norm(row_mode):
    def run(ops, inputs):
        function = ops["rms_norm"].LigerRMSNormFunction.apply
        return with_grads(lambda X, W, eps, offset: function(X, W, eps, offset, "llama", False,
                                                             row_mode), inputs, ("X", "W"))
    return run


def _rms_norm_reference(inputs):
    return with_grads(_rms_reference, inputs, ("X", "W"))


# --- LayerNorm ------------------------------------------------------------------------

def _layer_norm_inputs(device, bench):
    rows, cols = _rows(bench)
    return dict(X=randn((rows, cols), device), W=randn((cols,), device, seed=2),
                B=randn((cols,), device, seed=3), eps=1e-5)


def _layer_norm(ops, inputs):
    function = ops["layer_norm"].LigerLayerNormFunction.apply
    return with_grads(function, inputs, ("X", "W", "B"))


def _layer_norm_reference(inputs):
    return with_grads(lambda X, W, B, eps: F.layer_norm(X, X.shape[-1:], W, B, eps), inputs,
                      ("X", "W", "B"))


# --- fused add + RMSNorm: (rmsnorm(X + R), X + R) ---------------------------------------

def _fused_add_inputs(device, bench):
    X, W, eps, offset = _rms_inputs(device, bench).values()
    return dict(X=X, R=randn(X.shape, device, seed=4), W=W, eps=eps, offset=offset)


def _fused_add_rms_norm(ops, inputs):
    function = ops["fused_add_rms_norm"].LigerFusedAddRMSNormFunction.apply
    return with_grads(lambda X, R, W, eps, offset: function(X, R, W, eps, offset, "llama",
                                                            False), inputs, ("X", "R", "W"))


def _fused_add_reference(inputs):
    return with_grads(lambda X, R, W, eps, offset: _rms_reference(X + R, W, eps, offset),
                      inputs, ("X", "R", "W"))


# --- GroupNorm --------------------------------------------------------------------------

def _group_norm_inputs(device, bench):
    batch, channels, hidden = (32, 64, 1024) if bench else (3, 8, 20)
    return dict(X=randn((batch, channels, hidden), device), W=randn((channels,), device, seed=2),
                B=randn((channels,), device, seed=3), num_channels=channels, num_groups=4,
                eps=1e-6)


def _group_norm(ops, inputs):
    function = ops["group_norm"].LigerGroupNormFunction.apply
    return with_grads(function, inputs, ("X", "W", "B"))


def _group_norm_reference(inputs):
    return with_grads(lambda X, W, B, num_channels, num_groups, eps:
                      F.group_norm(X, num_groups, W, B, eps), inputs, ("X", "W", "B"))


# --- DyT: gamma * tanh(alpha * x) + beta -------------------------------------------------

def _dyt_inputs(device, bench):
    rows, cols = _rows(bench)
    return dict(x=randn((rows, cols), device), alpha=torch.tensor([0.7], device=device),
                gamma=randn((cols,), device, seed=2), beta=randn((cols,), device, seed=3))


def _dyt(ops, inputs):
    with sm_count_on_cpu(ops["dyt"]):
        return with_grads(ops["dyt"].LigerDyTFunction.apply, inputs,
                          ("x", "alpha", "gamma", "beta"))


def _dyt_reference(inputs):
    return with_grads(lambda x, alpha, gamma, beta: gamma * torch.tanh(alpha * x) + beta,
                      inputs, ("x", "alpha", "gamma", "beta"))


# --- activations: SwiGLU, GEGLU (tanh), ReLU^2 -------------------------------------------

def _pair_inputs(device, bench):
    rows, cols = _rows(bench)
    return dict(a=randn((rows, cols), device), b=randn((rows, cols), device, seed=2))


def _swiglu(ops, inputs):
    return with_grads(ops["swiglu"].LigerSiLUMulFunction.apply, inputs, ("a", "b"))


def _geglu(ops, inputs):
    return with_grads(ops["geglu"].LigerGELUMulFunction.apply, inputs, ("a", "b"))


def _relu_squared(ops, inputs):
    return with_grads(lambda a, b: ops["relu_squared"].LigerReLUSquaredFunction.apply(a),
                      inputs, ("a",))


CASES = [
    Case("rms_norm", _rms_inputs, _rms_norm(None), _rms_norm_reference, 1e-5, 1e-5,
         ("rms_norm",)),
    # Many short rows (n_rows >= 32768, BLOCK_SIZE <= 256): liger's row-block kernels.
    Case("rms_norm_block",
         lambda device, bench: _rms_inputs(device, bench, rows_cols=(32768, 64)),
         _rms_norm(False), _rms_norm_reference, 1e-4, 1e-3,   # dW: sums of 32768 rows
         ("rms_norm",)),
    Case("rms_norm_bf16",
         lambda device, bench: _rms_inputs(device, bench, torch.bfloat16),
         _rms_norm(True), _rms_norm_reference, 2e-2, 2e-2, ("rms_norm",)),
    Case("layer_norm", _layer_norm_inputs, _layer_norm, _layer_norm_reference, 1e-4, 1e-4,
         ("layer_norm",)),
    Case("fused_add_rms_norm", _fused_add_inputs, _fused_add_rms_norm, _fused_add_reference,
         1e-5, 1e-5, ("fused_add_rms_norm",)),
    Case("group_norm", _group_norm_inputs, _group_norm, _group_norm_reference, 1e-4, 1e-4,
         ("group_norm",)),
    Case("dyt", _dyt_inputs, _dyt, _dyt_reference, 1e-4, 1e-4, ("dyt",)),
    Case("swiglu", _pair_inputs, _swiglu,
         lambda inputs: with_grads(lambda a, b: F.silu(a) * b, inputs, ("a", "b")),
         1e-5, 1e-5, ("swiglu",)),
    Case("geglu", _pair_inputs, _geglu,
         lambda inputs: with_grads(lambda a, b: F.gelu(a, approximate="tanh") * b, inputs,
                                   ("a", "b")), 1e-5, 1e-5, ("geglu",)),
    Case("relu_squared", _pair_inputs, _relu_squared,
         lambda inputs: with_grads(lambda a, b: F.relu(a) ** 2, inputs, ("a",)),
         1e-5, 1e-5, ("relu_squared",)),
]
