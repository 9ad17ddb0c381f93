"""Cases: liger's rotary embeddings, attention pieces (softmax, sparsemax, neighborhood and
multi-token attention, attention residuals) and the norms that come with them (PolyNorm,
modulated RMSNorm), forward and backward."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from .liger_cases import Case, randn, with_grads


def _joined(*outputs):
    """One flat tensor of several outputs, so that ``with_grads`` back-propagates into all of
    them (it sends its gradient into the first output only)."""
    return torch.cat([output.reshape(-1) for output in outputs])


def _rotary_cos_sin(positions, dim, base=10000.0):
    """cos and sin of position * inverse frequency, duplicated as [f, f] along the last
    dimension (the Llama layout): positions [...] -> [..., dim]."""
    inv_freq = 1.0 / base ** (torch.arange(0, dim, 2, device=positions.device).float() / dim)
    freqs = positions.float()[..., None] * inv_freq
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos(), emb.sin()


def _rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


# --- RoPE (HF Llama): x * cos + rotate_half(x) * sin on the first cos.shape[-1] dims --------

def _rope_inputs(partial):
    def make(device, bench):
        batch, seq, n_q, n_kv, head_dim = (2, 2048, 32, 8, 128) if bench else (2, 10, 6, 2, 24)
        rotary_dim = head_dim // 2 if partial else head_dim
        positions = torch.arange(seq, device=device)
        if partial:   # one row of cos/sin per batch (cos_bs > 1), rotated positions offset
            positions = positions + 7 * torch.arange(batch, device=device)[:, None]
        else:         # one row of cos/sin shared by the batch (cos_bs == 1)
            positions = positions[None]
        cos, sin = _rotary_cos_sin(positions, rotary_dim)
        return dict(q=randn((batch, n_q, seq, head_dim), device),
                    k=randn((batch, n_kv, seq, head_dim), device, seed=2), cos=cos, sin=sin)
    return make


def _rope(ops, inputs):
    function = ops["rope"].LigerRopeFunction.apply
    return with_grads(lambda q, k, cos, sin: _joined(*function(q, k, cos, sin)), inputs,
                      ("q", "k"))


def _rope_reference_apply(x, cos, sin):
    rotary_dim = cos.shape[-1]
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)     # over heads
    rotated, passed = x[..., :rotary_dim], x[..., rotary_dim:]
    return torch.cat((rotated * cos + _rotate_half(rotated) * sin, passed), dim=-1)


def _rope_reference(inputs):
    return with_grads(lambda q, k, cos, sin: _joined(_rope_reference_apply(q, cos, sin),
                                                     _rope_reference_apply(k, cos, sin)),
                      inputs, ("q", "k"))


# --- Llama 4 RoPE: interleaved (real, imag) pairs times a complex frequency --------------

def _llama4_rope_inputs(device, bench):
    # head_dim / 2 = 40 pairs: two BLOCK_SIZE = 32 tiles, the second one masked.
    batch, seq, n_q, n_kv, head_dim = (2, 2048, 40, 8, 128) if bench else (2, 6, 4, 2, 80)
    inv_freq = 1.0 / 500000.0 ** (torch.arange(0, head_dim, 2, device=device).float()
                                  / head_dim)
    angles = torch.arange(seq, device=device).float()[:, None] * inv_freq
    return dict(q=randn((batch, seq, n_q, head_dim), device),
                k=randn((batch, seq, n_kv, head_dim), device, seed=2),
                freqs_cis=torch.polar(torch.ones_like(angles), angles))


def _llama4_rope(ops, inputs):
    function = ops["llama4_rope"].LigerLlama4RopeFunction.apply
    return with_grads(lambda q, k, freqs_cis: _joined(*function(q, k, freqs_cis)), inputs,
                      ("q", "k"))


def _llama4_rotate(x, freqs_cis):
    pairs = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    return torch.view_as_real(pairs * freqs_cis[None, :, None, :]).flatten(3).to(x.dtype)


def _llama4_rope_reference(inputs):
    return with_grads(lambda q, k, freqs_cis: _joined(_llama4_rotate(q, freqs_cis),
                                                      _llama4_rotate(k, freqs_cis)),
                      inputs, ("q", "k"))


# --- Qwen2-VL M-RoPE: the frequency bands split between temporal, height, width positions -

def _mrope_inputs(device, bench):
    batch, seq, n_q, n_kv, head_dim, section = (
        (2, 2048, 28, 4, 128, [16, 24, 24]) if bench else (2, 8, 6, 2, 32, [4, 6, 6]))
    positions = torch.stack([torch.arange(seq, device=device) * (axis + 1) + axis
                             for axis in range(3)])[:, None].expand(3, batch, seq)
    cos, sin = _rotary_cos_sin(positions, head_dim)          # [3, batch, seq, head_dim]
    return dict(q=randn((batch, n_q, seq, head_dim), device),
                k=randn((batch, n_kv, seq, head_dim), device, seed=2), cos=cos, sin=sin,
                mrope_section=section)


def _mrope(ops, inputs):
    function = ops["qwen2vl_mrope"].LigerQwen2VLMRopeFunction.apply
    return with_grads(lambda q, k, cos, sin, section: _joined(*function(q, k, cos, sin,
                                                                        section)),
                      inputs, ("q", "k"))


def _mrope_reference(inputs):
    def apply(q, k, cos, sin, section):
        # band i of the (duplicated) frequencies takes its angle from position axis i % 3
        def select(table):
            bands = table.split(section * 2, dim=-1)
            return torch.cat([band[i % 3] for i, band in enumerate(bands)], dim=-1)
        cos, sin = select(cos), select(sin)
        return _joined(_rope_reference_apply(q, cos, sin), _rope_reference_apply(k, cos, sin))
    return with_grads(apply, inputs, ("q", "k"))


# --- softmax over the last dimension ------------------------------------------------------
# Only liger's single-block kernels: its host code sizes the block as the next power of two of
# the row (and refuses rows over 65536), so ``n_cols <= BLOCK_SIZE`` always holds and
# ``_softmax_multi_block_{forward,backward}_kernel`` are never launched by it. They are not
# valid Triton either: both call a dtype (``tl.float32(-float("inf"))``, ``tl.float32(0.0)``),
# which Triton 3.8 rejects ("'dtype' object is not callable") as aotk does.

def _softmax_inputs(device, bench):
    return dict(x=randn((8, 512, 4096) if bench else (2, 3, 200), device, scale=3.0))


def _softmax(ops, inputs):
    return with_grads(ops["softmax"].LigerSoftmaxFunction.apply, inputs, ("x",))


def _softmax_reference(inputs):
    return with_grads(lambda x: torch.softmax(x, dim=-1), inputs, ("x",))


# --- sparsemax: the Euclidean projection of a row onto the probability simplex -----------

def _sparsemax_definition(z, dim):
    """max(z - tau, 0) with tau such that the result sums to 1: over z sorted in decreasing
    order, the support is the k largest with 1 + k z_(k) > z_(1) + ... + z_(k)."""
    z = z.transpose(dim, -1)
    ordered = torch.sort(z, dim=-1, descending=True).values
    ranks = torch.arange(1, z.shape[-1] + 1, device=z.device, dtype=z.dtype)
    cumulative = ordered.cumsum(-1)
    support = (1 + ranks * ordered > cumulative).sum(-1, keepdim=True)
    tau = (cumulative.gather(-1, support - 1) - 1) / support.to(z.dtype)
    return torch.clamp(z - tau, min=0).transpose(dim, -1)


def _sparsemax_inputs(device, bench):
    shape = (8, 4096, 1024) if bench else (3, 4, 50)
    return dict(x=randn(shape, device, scale=2.0), dim=-1)


def _sparsemax_dim1_inputs(device, bench):
    shape = (8, 1024, 512) if bench else (3, 37, 5)
    return dict(x=randn(shape, device, scale=2.0), dim=1)


def _sparsemax(ops, inputs):
    return with_grads(ops["sparsemax"].LigerSparsemaxFunction.apply, inputs, ("x",))


def _sparsemax_reference(inputs):
    return with_grads(_sparsemax_definition, inputs, ("x",))


# --- multi-token attention: mask_0(conv2d(act(mask_-1e9(scores)))), causal masks ---------

def _mta_inputs(sparse):
    def make(device, bench):
        batch, channels, length, kernel = (2, 8, 256, 5) if bench else (2, 4, 12, 3)
        return dict(scores=randn((batch, channels, length, length), device, scale=2.0),
                    weight=randn((channels, channels, kernel, kernel), device, seed=2,
                                 scale=0.3),
                    bias=randn((channels,), device, seed=3), stride=1, padding=kernel // 2,
                    dilation=1, groups=1, sparse=sparse)
    return make


def _mta(ops, inputs):
    return with_grads(ops["multi_token_attention"].LigerMultiTokenAttentionFunction.apply,
                      inputs, ("scores", "weight", "bias"))


def _mta_definition(scores, weight, bias, stride, padding, dilation, groups, sparse):
    length = scores.shape[-1]
    future = torch.ones(length, length, dtype=torch.bool, device=scores.device).triu(1)
    masked = scores.masked_fill(future, -1e9)
    probs = _sparsemax_definition(masked, -1) if sparse else torch.softmax(masked, dim=-1)
    out = F.conv2d(probs, weight, bias, stride=stride, padding=padding, dilation=dilation,
                   groups=groups)
    return out.masked_fill(future, 0.0)


def _mta_reference(inputs):
    return with_grads(_mta_definition, inputs, ("scores", "weight", "bias"))


# --- neighborhood attention: softmax(QK^T * scale, keys within the window) V -------------

def _neighborhood_inputs(dilation):
    def make(device, bench):
        batch, heads, seq, head_dim = (2, 8, 1024, 64) if bench else (1, 2, 20, 16)
        return dict(query=randn((batch, heads, seq, head_dim), device),
                    key=randn((batch, heads, seq, head_dim), device, seed=2),
                    value=randn((batch, heads, seq, head_dim), device, seed=3),
                    kernel_size=7, dilation=dilation, scale=None)
    return make


def _neighborhood(ops, inputs):
    function = ops["fused_neighborhood_attention"].LigerFusedNeighborhoodAttentionFunction
    return with_grads(function.apply, inputs, ("query", "key", "value"))


def _neighborhood_definition(query, key, value, kernel_size, dilation, scale):
    seq = query.shape[-2]
    scale = query.shape[-1] ** -0.5 if scale is None else scale
    offset = (torch.arange(seq, device=query.device)[None, :]
              - torch.arange(seq, device=query.device)[:, None])
    window = (offset.abs() <= (kernel_size // 2) * dilation) & (offset % dilation == 0)
    scores = (query @ key.transpose(-1, -2) * scale).masked_fill(~window, float("-inf"))
    return torch.softmax(scores, dim=-1) @ value


def _neighborhood_reference(inputs):
    return with_grads(_neighborhood_definition, inputs, ("query", "key", "value"))


# --- attention residuals: softmax over depth of w_query . RMSNorm(v_i), weighted sum of v_i

def _attn_res_inputs(device, bench):
    # 5 blocks: MAX_BLOCKS = 8, the last three skipped
    blocks, batch, seq, hidden = (8, 4, 1024, 4096) if bench else (5, 2, 3, 40)
    return dict(V=randn((blocks, batch, seq, hidden), device),
                w_query=randn((hidden,), device, seed=2, scale=0.5),
                w_norm=1.0 + randn((hidden,), device, seed=3, scale=0.1), eps=1e-6)


def _attn_res(ops, inputs):
    return with_grads(ops["attn_res"].LigerAttnResFunction.apply, inputs,
                      ("V", "w_query", "w_norm"))


def _attn_res_definition(V, w_query, w_norm, eps):
    keys = V * torch.rsqrt(V.pow(2).mean(-1, keepdim=True) + eps) * w_norm
    alpha = torch.softmax(keys @ w_query, dim=0)                 # [N, B, T] over blocks
    return (alpha[..., None] * V).sum(0)


def _attn_res_reference(inputs):
    return with_grads(_attn_res_definition, inputs, ("V", "w_query", "w_norm"))


# --- PolyNorm: w0 norm(x^3) + w1 norm(x^2) + w2 norm(x) + b, norm(u) = u / rms(u) --------

def _poly_norm_inputs(device, bench):
    rows, cols = (4096, 4096) if bench else (6, 200)
    return dict(X=randn((rows, cols), device, scale=0.8),
                W=torch.tensor([0.3, -0.5, 0.9], device=device),
                B=torch.tensor(0.25, device=device), eps=1e-6)


def _poly_norm(ops, inputs):
    function = ops["poly_norm"].LigerPolyNormFunction.apply
    return with_grads(lambda X, W, B, eps: function(X, W, B, eps, False), inputs,
                      ("X", "W", "B"))


def _poly_norm_definition(X, W, B, eps):
    def norm(u):
        return u * torch.rsqrt(u.pow(2).mean(-1, keepdim=True) + eps)
    return W[0] * norm(X ** 3) + W[1] * norm(X ** 2) + W[2] * norm(X) + B


def _poly_norm_reference(inputs):
    return with_grads(_poly_norm_definition, inputs, ("X", "W", "B"))


# --- modulated RMSNorm (AdaLN): (1 + scale) * RMSNorm(x) + shift --------------------------

def _modulated_inputs(per_token):
    def make(device, bench):
        batch, seq, hidden = (4, 1024, 3072) if bench else (2, 5, 48)
        modulation = (batch, seq, hidden) if per_token else (batch, 1, hidden)
        return dict(X=randn((batch, seq, hidden), device),
                    W=randn((hidden,), device, seed=2, scale=0.2),
                    scale=randn(modulation, device, seed=3, scale=0.2),
                    shift=randn(modulation, device, seed=4), eps=1e-6,
                    offset=0.0 if per_token else 1.0,
                    casting_mode="llama" if per_token else "gemma")
    return make


def _modulated(ops, inputs):
    function = ops["modulated_rms_norm"].LigerModulatedRMSNormFunction.apply
    return with_grads(lambda X, W, scale, shift, eps, offset, casting_mode:
                      function(X, W, scale, shift, eps, offset, casting_mode, False),
                      inputs, ("X", "W", "scale", "shift"))


def _modulated_definition(X, W, scale, shift, eps, offset, casting_mode):
    x = X.float()
    normed = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return (normed * (offset + W)).to(X.dtype) * (1 + scale) + shift


def _modulated_reference(inputs):
    return with_grads(_modulated_definition, inputs, ("X", "W", "scale", "shift"))


# tl.dot takes fp32 inputs as tf32 (10-bit mantissa) by default, on the GPU and in aotk's
# interpreter alike: products of unit-scale inputs carry about 1e-3 relative error.
_TF32 = 5e-3

CASES = [
    Case("rope", _rope_inputs(False), _rope, _rope_reference, 1e-5, 1e-5, ("rope",)),
    Case("rope_partial", _rope_inputs(True), _rope, _rope_reference, 1e-5, 1e-5, ("rope",)),
    Case("llama4_rope", _llama4_rope_inputs, _llama4_rope, _llama4_rope_reference, 1e-5,
         1e-5, ("llama4_rope",)),
    Case("qwen2vl_mrope", _mrope_inputs, _mrope, _mrope_reference, 1e-5, 1e-5,
         ("qwen2vl_mrope",)),
    Case("softmax", _softmax_inputs, _softmax, _softmax_reference, 1e-5, 1e-5, ("softmax",)),
    Case("sparsemax", _sparsemax_inputs, _sparsemax, _sparsemax_reference, 1e-5, 1e-5,
         ("sparsemax",)),
    Case("sparsemax_dim1", _sparsemax_dim1_inputs, _sparsemax, _sparsemax_reference, 1e-5,
         1e-5, ("sparsemax",)),
    # the weight and bias gradients sum over the batch and the L x L plane
    Case("multi_token_attention", _mta_inputs(False), _mta, _mta_reference, 1e-4, 1e-4,
         ("multi_token_attention", "softmax")),
    Case("multi_token_attention_sparse", _mta_inputs(True), _mta, _mta_reference, 1e-4,
         1e-4, ("multi_token_attention", "sparsemax")),
    Case("fused_neighborhood_attention", _neighborhood_inputs(1), _neighborhood,
         _neighborhood_reference, _TF32, _TF32, ("fused_neighborhood_attention", "softmax")),
    Case("fused_neighborhood_attention_dilated", _neighborhood_inputs(2), _neighborhood,
         _neighborhood_reference, _TF32, _TF32, ("fused_neighborhood_attention", "softmax")),
    # dW_query and dW_norm: atomic adds over every token, in no fixed order
    # The weight gradients are fp32 atomic sums over every token, in no fixed order: at the
    # bench size (4096 tokens) two runs of one implementation differ by more than 1e-3.
    Case("attn_res", _attn_res_inputs, _attn_res, _attn_res_reference, 1e-4, 1e-4,
         ("attn_res",), bench_tolerance=(1e-2, 1e-2)),
    # dW and dB: sums over every row of x^3-sized terms
    Case("poly_norm", _poly_norm_inputs, _poly_norm, _poly_norm_reference, 1e-4, 1e-4,
         ("poly_norm",)),
    Case("modulated_rms_norm", _modulated_inputs(True), _modulated, _modulated_reference,
         1e-5, 1e-5, ("modulated_rms_norm",)),
    # scale and shift shared by the sequence: their gradients by atomic adds
    Case("modulated_rms_norm_broadcast", _modulated_inputs(False), _modulated,
         _modulated_reference, 1e-4, 1e-4, ("modulated_rms_norm",)),
]
