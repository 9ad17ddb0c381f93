"""Cases: liger's matmul-bearing ops (fused SwiGLU MLP, fused MoE, mHC, int2 matmul), its
embedding and the SwiGLU variants the activations group leaves out, forward and backward.

Tolerances: Triton's ``tl.dot`` on fp32 operands defaults to tf32 (10-bit mantissa; aotk's
interpreter reads the operands the same way), against PyTorch's full fp32 matmul. Inputs
are scaled so that every dot result is O(1); those cases allow 1e-2, a few tf32 roundings
of relative error ~1e-3 compounded through SwiGLU and its gradient.
"""
from __future__ import annotations

import contextlib
import math

import torch
import torch.nn.functional as F

from .liger_cases import Case, randint, randn, with_grads

TF32 = 1e-2   # see the module text


# --- fused SwiGLU MLP: down(silu(g * x @ Wg^T) * (x @ Wu^T)) * d ---------------------------

class _ReportsCuda(torch.Tensor):
    """A CPU tensor whose ``is_cuda`` is True (operations on it give plain tensors)."""
    __torch_function__ = torch._C._disabled_torch_function_impl

    @property
    def is_cuda(self):
        return True


@contextlib.contextmanager
def _cuda_assert_on_cpu(module, check="_check_inputs"):
    """Host code of ``module`` that asserts ``t.is_cuda`` of its inputs before validating
    them with ``module.<check>`` (and has no other CPU obstacle) runs on CPU tensors: yields
    a function that marks tensors as CUDA ones, and ``check`` unmarks them before they go
    further (a kernel launch sees plain CPU tensors). On the GPU this changes nothing."""
    real_check = getattr(module, check)
    if torch.cuda.is_available():
        yield lambda *tensors: tensors
        return

    def unmarked(*tensors, **kwargs):
        return real_check(*[t.as_subclass(torch.Tensor) if isinstance(t, _ReportsCuda) else t
                            for t in tensors], **kwargs)

    setattr(module, check, unmarked)
    try:
        yield lambda *tensors: tuple(t.as_subclass(_ReportsCuda) for t in tensors)
    finally:
        setattr(module, check, real_check)


def _mlp_inputs(device, bench, gate_multiplier=1.0, down_multiplier=1.0):
    # Rows (B * S) not a multiple of the kernels' BLOCK_M, widths multiples of 4 (16-byte
    # TMA strides in fp32) but not of BLOCK_N / BLOCK_K.
    batch, seq, dim, hidden = (2, 2048, 4096, 11008) if bench else (2, 24, 48, 40)
    return dict(input=randn((batch, seq, dim), device),
                gate_weight=randn((hidden, dim), device, seed=2, scale=dim ** -0.5),
                up_weight=randn((hidden, dim), device, seed=3, scale=dim ** -0.5),
                down_weight=randn((dim, hidden), device, seed=4, scale=hidden ** -0.5),
                gate_multiplier=gate_multiplier, down_multiplier=down_multiplier)


_MLP_WEIGHTS = ("input", "gate_weight", "up_weight", "down_weight")


def _mlp_reference_fn(input, gate_weight, up_weight, down_weight, gate_multiplier,
                      down_multiplier):
    gate = input @ gate_weight.T * gate_multiplier
    return (F.silu(gate) * (input @ up_weight.T)) @ down_weight.T * down_multiplier


def _mlp(ops, inputs):
    module = ops["mlp"]
    with _cuda_assert_on_cpu(module) as as_cuda:
        return with_grads(lambda input, gate_weight, up_weight, down_weight, gm, dm:
                          module.LigerMLPFunction.apply(
                              *as_cuda(input, gate_weight, up_weight, down_weight), gm, dm),
                          inputs, _MLP_WEIGHTS)


def _mlp_reference(inputs):
    return with_grads(_mlp_reference_fn, inputs, _MLP_WEIGHTS)


def _mlp_inference(ops, inputs):
    """No input requires grad: liger's inference kernel (no pre-activations stored)."""
    module = ops["mlp"]
    tensors = [inputs[k] for k in _MLP_WEIGHTS]
    with _cuda_assert_on_cpu(module) as as_cuda:
        return (module.LigerMLPFunction.apply(*as_cuda(*tensors), inputs["gate_multiplier"],
                                              inputs["down_multiplier"]),)


def _mlp_inference_reference(inputs):
    return (_mlp_reference_fn(**inputs),)


# --- fused MoE: out[t] = sum_k w[t,k] * down_e(silu(gate_e(x[t])) * up_e(x[t])), e = idx[t,k]

def _moe_inputs(device, bench, top_k=2, experts=4, empty_expert=False):
    tokens, hidden, inter = (4096, 2048, 1408) if bench else (20, 48, 40)
    if bench:   # Mixtral's 8 experts, Qwen1.5-MoE's widths
        experts = 8
    logits = randn((tokens, experts), device, seed=5)
    if empty_expert:   # no token routed to the last expert (the weight-gradient kernels skip it)
        logits[:, -1] = -math.inf
    top_values, top_index = logits.topk(top_k, dim=-1)
    return dict(x=randn((tokens, hidden), device),
                gate_up_proj=randn((experts, 2 * inter, hidden), device, seed=2,
                                   scale=hidden ** -0.5),
                down_proj=randn((experts, hidden, inter), device, seed=3, scale=inter ** -0.5),
                top_k_index=top_index.to(torch.int32),
                top_k_weights=torch.softmax(top_values, dim=-1))


_MOE_GRADS = ("x", "gate_up_proj", "down_proj", "top_k_weights")


def _moe_reference_fn(x, gate_up_proj, down_proj, top_k_index, top_k_weights):
    inter = down_proj.shape[2]
    out = torch.zeros_like(x)
    for expert in range(gate_up_proj.shape[0]):
        token, slot = torch.nonzero(top_k_index == expert, as_tuple=True)
        gate_up = x[token] @ gate_up_proj[expert].T
        y = (F.silu(gate_up[:, :inter]) * gate_up[:, inter:]) @ down_proj[expert].T
        out = out.index_add(0, token, y * top_k_weights[token, slot, None])
    return out


def _moe(ops, inputs):
    return with_grads(ops["fused_moe"].LigerFusedMoEFunction.apply, inputs, _MOE_GRADS)


def _moe_reference(inputs):
    return with_grads(_moe_reference_fn, inputs, _MOE_GRADS)


# --- mHC (manifold-constrained hyper-connections) ---------------------------------------
# coefficients: mix = (x_flat @ phi) * rsqrt(mean(x_flat^2) + eps), x_flat = x[..., HC*C];
#   h_pre = sigmoid(a_pre * mix[:HC] + b[:HC]) + pre_eps,
#   h_post = post_mult * sigmoid(a_post * mix[HC:2HC] + b[HC:2HC]),
#   h_res = sinkhorn(a_res * mix[2HC:] + b[2HC:]) as [HC, HC]
# pre: out = sum_s h_pre[s] * x[s];  post_res: out[o] = h_post[o] * f + sum_i h_res[o, i] x[i]

def _sinkhorn(logits, tmax, eps):
    mat = torch.softmax(logits, dim=-1) + eps
    mat = mat / (mat.sum(-2, keepdim=True) + eps)
    for _ in range(tmax - 1):
        mat = mat / (mat.sum(-1, keepdim=True) + eps)
        mat = mat / (mat.sum(-2, keepdim=True) + eps)
    return mat


def _mhc_shape(bench):
    return (4, 1024, 4, 2048) if bench else (2, 3, 4, 32)   # batch, seq, HC, C


def _mhc_coeffs_inputs(device, bench, dtype=torch.float32):
    batch, seq, hc, c = _mhc_shape(bench)
    m = hc * hc + 2 * hc
    return dict(x=randn((batch, seq, hc, c), device, dtype),
                phi=randn((hc * c, m), device, dtype, seed=2, scale=(hc * c) ** -0.5),
                b=randn((m,), device, seed=3, scale=0.1),
                alpha_pre=torch.tensor(0.8, device=device),
                alpha_post=torch.tensor(1.1, device=device),
                alpha_res=torch.tensor(0.9, device=device),
                allow_fp32=True, tmax=20 if bench else 6, rms_eps=1e-6, pre_eps=1e-3,
                sinkhorn_eps=1e-6, post_mult=2.0)


_MHC_COEFF_GRADS = ("x", "phi", "b", "alpha_pre", "alpha_post", "alpha_res")


def _mhc_coeffs_reference_fn(x, phi, b, alpha_pre, alpha_post, alpha_res, allow_fp32, tmax,
                             rms_eps, pre_eps, sinkhorn_eps, post_mult):
    hc = x.shape[-2]
    x_flat = x.float().flatten(-2)
    mix = (x_flat @ phi.float()) * torch.rsqrt(x_flat.pow(2).mean(-1, keepdim=True) + rms_eps)
    h_pre = torch.sigmoid(alpha_pre * mix[..., :hc] + b[:hc]) + pre_eps
    h_post = post_mult * torch.sigmoid(alpha_post * mix[..., hc:2 * hc] + b[hc:2 * hc])
    logits = (alpha_res * mix[..., 2 * hc:] + b[2 * hc:]).unflatten(-1, (hc, hc))
    return h_pre, h_post, _sinkhorn(logits, tmax, sinkhorn_eps)


def _concatenated(h_pre, h_post, h_res):
    """The three coefficient tensors as one, so that one gradient reaches all of them."""
    return torch.cat([h_pre, h_post, h_res.flatten(-2)], dim=-1)


def _mhc_coeffs(ops, inputs):
    function = ops["mhc"].LigerMHCCoeffsFunction.apply
    return with_grads(lambda *args: _concatenated(*function(*args)), inputs, _MHC_COEFF_GRADS)


def _mhc_coeffs_reference(inputs):
    return with_grads(lambda *args: _concatenated(*_mhc_coeffs_reference_fn(*args)), inputs,
                      _MHC_COEFF_GRADS)


def _mhc_pre_inputs(device, bench):
    batch, seq, hc, c = _mhc_shape(bench)
    return dict(x=randn((batch, seq, hc, c), device),
                h_pre=torch.sigmoid(randn((batch, seq, hc), device, seed=2)))


def _mhc_pre(ops, inputs):
    return with_grads(ops["mhc"].LigerMHCPreFunction.apply, inputs, ("x", "h_pre"))


def _mhc_pre_reference(inputs):
    return with_grads(lambda x, h_pre: (x * h_pre[..., None]).sum(-2), inputs, ("x", "h_pre"))


def _mhc_post_res_inputs(device, bench):
    batch, seq, hc, c = _mhc_shape(bench)
    return dict(x=randn((batch, seq, hc, c), device), f_out=randn((batch, seq, c), device, seed=2),
                h_post=2 * torch.sigmoid(randn((batch, seq, hc), device, seed=3)),
                h_res=torch.softmax(randn((batch, seq, hc, hc), device, seed=4), dim=-1))


_MHC_POST_RES_GRADS = ("x", "f_out", "h_post", "h_res")


def _mhc_post_res(ops, inputs):
    return with_grads(ops["mhc"].LigerMHCPostResFunction.apply, inputs, _MHC_POST_RES_GRADS)


def _mhc_post_res_reference(inputs):
    return with_grads(lambda x, f_out, h_post, h_res:
                      f_out[..., None, :] * h_post[..., None] + h_res @ x,
                      inputs, _MHC_POST_RES_GRADS)


# The split + Sinkhorn kernels without the iteration history (what the coefficients'
# Function uses when nothing needs a gradient; its backward always has the history): liger's
# host functions, forward and backward (to the residual logits) given a gradient of h_res.

def _mhc_sinkhorn_inputs(device, bench):
    batch, seq, hc, _ = _mhc_shape(bench)
    n, m = batch * seq, hc * hc + 2 * hc
    return dict(mix=randn((n, m), device), b=randn((m,), device, seed=2, scale=0.1),
                alpha_pre=torch.tensor(0.8, device=device),
                alpha_post=torch.tensor(1.1, device=device),
                alpha_res=torch.tensor(0.9, device=device),
                grad_hres=randn((n, hc, hc), device, seed=3),
                tmax=20 if bench else 6, pre_eps=1e-3, sinkhorn_eps=1e-6, post_mult=2.0)


def _mhc_sinkhorn(ops, inputs):
    module, i = ops["mhc"], inputs
    shared = dict(tmax=i["tmax"], sinkhorn_eps=i["sinkhorn_eps"])
    h_pre, h_post, h_res = module.mhc_split_sinkhorn_fwd(
        i["mix"], i["b"], i["alpha_pre"], i["alpha_post"], i["alpha_res"],
        pre_eps=i["pre_eps"], post_mult=i["post_mult"], **shared)
    grad_logits = module.mhc_sinkhorn_bwd(i["mix"], i["b"], i["alpha_res"], i["grad_hres"],
                                          hist=None, **shared)
    return h_pre, h_post, h_res, grad_logits


def _mhc_sinkhorn_reference(inputs):
    i = inputs
    hc = i["grad_hres"].shape[-1]
    mix, b = i["mix"], i["b"]
    h_pre = torch.sigmoid(i["alpha_pre"] * mix[:, :hc] + b[:hc]) + i["pre_eps"]
    h_post = i["post_mult"] * torch.sigmoid(i["alpha_post"] * mix[:, hc:2 * hc] + b[hc:2 * hc])
    logits = (i["alpha_res"] * mix[:, 2 * hc:] + b[2 * hc:]).unflatten(-1, (hc, hc))
    logits.requires_grad_()
    h_res = _sinkhorn(logits, i["tmax"], i["sinkhorn_eps"])
    h_res.backward(i["grad_hres"])
    return h_pre, h_post, h_res.detach(), logits.grad


# --- embedding ------------------------------------------------------------------------------

def _embedding_inputs(device, bench):
    vocab, dim, index_shape = (32000, 4096, (8, 2048)) if bench else (30, 20, (4, 9))
    indices = randint(vocab, index_shape, device, 5)
    indices[0, :3] = indices[1, 0]   # repeated rows: the backward's atomic adds meet
    return dict(embeddings=randn((vocab, dim), device), indices=indices)


def _embedding(ops, inputs):
    return with_grads(ops["experimental.embedding"].LigerEmbeddingFunction.apply, inputs,
                      ("embeddings",))


def _embedding_reference(inputs):
    return with_grads(lambda embeddings, indices: F.embedding(indices, embeddings), inputs,
                      ("embeddings",))


# --- int8 x ternary matmul, the weights packed four 2-bit values (w + 1) a byte ----------------
# packed[r, n] holds W[r + i * K/4, n] + 1 in bits 2i..2i+1.

def _int2_inputs(device, bench):
    m, k, n = (4096, 4096, 4096) if bench else (10, 256, 24)   # K a multiple of 4 * BLOCK_K
    a = (randint(256, (m, k), device, 6) - 128).to(torch.int8)
    weights = (randint(3, (k, n), device, 7) - 1).to(torch.int32)
    quarters = (weights + 1).view(4, k // 4, n)
    packed = sum(quarters[i] << (2 * i) for i in range(4)).to(torch.uint8)
    return dict(a=a, packed=packed, weights=weights)


def _int2_matmul(ops, inputs):
    return (ops["experimental.mm_int8int2"].matmul(inputs["a"], inputs["packed"]),)


def _int2_matmul_reference(inputs):
    # Exact in float64 (|sums| < 2^53), and float64 matmul exists on every device.
    return ((inputs["a"].double() @ inputs["weights"].double()).to(torch.int32),)


# --- SwiGLU variants: column-tiled rows, and gate and up in one tensor ----------------------

@contextlib.contextmanager
def _blackwell_arch(module):
    """liger takes its column-tiled SwiGLU kernels on Blackwell GPUs only (for rows of at
    least 8193 columns); this reports a Blackwell arch to ``module`` on every device so that
    those (portable) kernels run here and on any GPU."""
    real = module.infer_device_arch
    module.infer_device_arch = lambda *args, **kwargs: "blackwell"
    try:
        yield
    finally:
        module.infer_device_arch = real


def _swiglu_tiled_inputs(device, bench):
    rows, cols = (4096, 14336) if bench else (3, 8200)   # next_power_of_2(cols) >= 16384
    return dict(a=randn((rows, cols), device), b=randn((rows, cols), device, seed=2),
                gate_multiplier=0.7, down_multiplier=1.5)


def _swiglu_tiled(ops, inputs):
    with _blackwell_arch(ops["swiglu"]):
        return with_grads(ops["swiglu"].LigerSiLUMulFunction.apply, inputs, ("a", "b"))


def _swiglu_tiled_reference(inputs):
    return with_grads(lambda a, b, gm, dm: F.silu(gm * a) * b * dm, inputs, ("a", "b"))


def _gate_up_inputs(device, bench, in_place=False):
    rows, ffn = (4096, 14336) if bench else (6, 100)
    return dict(y=randn((rows, 2 * ffn), device), in_place=in_place)


def _gate_up(ops, inputs):
    return with_grads(ops["swiglu"].LigerFusedGateUpSiLUMulFunction.apply, inputs, ("y",))


def _gate_up_reference(inputs):
    def swiglu(y, in_place):
        gate, up = y.chunk(2, dim=-1)
        return F.silu(gate) * up
    return with_grads(swiglu, inputs, ("y",))


CASES = [
    # The MLP's kernels read and write through host-built TMA descriptors
    # (triton.tools.tensor_descriptor.TensorDescriptor); its host code asserts CUDA inputs.
    Case("mlp", _mlp_inputs, _mlp, _mlp_reference, TF32, TF32, ("mlp",)),
    Case("mlp_multipliers",   # Falcon-H1's gate and down multipliers
         lambda device, bench: _mlp_inputs(device, bench, 0.5, 2.0),
         _mlp, _mlp_reference, TF32, TF32, ("mlp",)),
    Case("mlp_inference", _mlp_inputs, _mlp_inference, _mlp_inference_reference, TF32, TF32,
         ("mlp",)),
    Case("fused_moe", _moe_inputs, _moe, _moe_reference, TF32, TF32,
         ("fused_moe", "fused_moe_kernels")),
    # top-3 (the routing kernels' non-power-of-two path), one expert routed no token.
    Case("fused_moe_top3",
         lambda device, bench: _moe_inputs(device, bench, top_k=3, experts=6,
                                           empty_expert=True),
         _moe, _moe_reference, TF32, TF32, ("fused_moe", "fused_moe_kernels")),
    Case("mhc_coeffs", _mhc_coeffs_inputs, _mhc_coeffs, _mhc_coeffs_reference, TF32, TF32,
         ("mhc",)),
    # bf16 x and phi: liger's tensor-core path (the gradient of the matmul rounded to bf16).
    Case("mhc_coeffs_bf16", lambda device, bench: _mhc_coeffs_inputs(device, bench,
                                                                     torch.bfloat16),
         _mhc_coeffs, _mhc_coeffs_reference, 2e-2, 2e-2, ("mhc",)),
    Case("mhc_pre", _mhc_pre_inputs, _mhc_pre, _mhc_pre_reference, 1e-5, 1e-5, ("mhc",)),
    Case("mhc_post_res", _mhc_post_res_inputs, _mhc_post_res, _mhc_post_res_reference,
         1e-5, 1e-5, ("mhc",)),
    Case("mhc_sinkhorn", _mhc_sinkhorn_inputs, _mhc_sinkhorn, _mhc_sinkhorn_reference,
         1e-5, 1e-5, ("mhc",)),
    Case("embedding", _embedding_inputs, _embedding, _embedding_reference, 1e-6, 1e-6,
         ("experimental.embedding",)),
    Case("mm_int8int2", _int2_inputs, _int2_matmul, _int2_matmul_reference, 0, 0,
         ("experimental.mm_int8int2",)),
    Case("swiglu_tiled", _swiglu_tiled_inputs, _swiglu_tiled, _swiglu_tiled_reference,
         1e-5, 1e-5, ("swiglu",)),
    Case("swiglu_fused_gate_up", _gate_up_inputs, _gate_up, _gate_up_reference, 1e-5, 1e-5,
         ("swiglu",)),
    Case("swiglu_fused_gate_up_in_place",
         lambda device, bench: _gate_up_inputs(device, bench, in_place=True),
         _gate_up, _gate_up_reference, 1e-5, 1e-5, ("swiglu",)),
]
