"""Cases: liger's reinforcement-learning losses (GRPO and its variants, the selective
log-softmax it computes old and reference log-probabilities with), forward and backward.
"""
from __future__ import annotations

import torch

from .liger_cases import Case, randint, randn, with_outputs


# --- GRPO (TRL's GRPOTrainer loss) -----------------------------------------------------------
# logp = log_softmax(logits[:, :-1] / T)[completion_ids]; ratio = exp(logp - old_logp), per
# token or (importance_sampling_level="sequence") exp of its masked mean over the sequence.
# grpo/dapo/bnpo/dr_grpo: -min(ratio' A, clamp(ratio, 1 - eps_low, 1 + eps_high) A), ratio'
# the ratio clamped to delta; cispo: -clamp(ratio, max=eps_high).detach() A logp; sapo:
# -sigmoid(tau (ratio - 1)) 4 / tau A; vespo: -phi A logp. Times the vLLM ratio (not vespo),
# plus beta (exp(ref - logp) - (ref - logp) - 1), times the ratio under the bias correction.

def _grpo_inputs(device, bench, loss_type="grpo", level="token", beta=0.04, mask=True,
                 old=True, vllm=None, delta=None, bias_kl=False, temperature=0.9,
                 eps_low=0.2):
    batch, length, vocab = (8, 512, 32000) if bench else (3, 5, 40)
    logits = randn((batch, length + 1, vocab), device, scale=2.0)
    ids = randint(vocab, (batch, length), device, 5)
    logp = (logits[:, :-1] / temperature).log_softmax(-1).gather(-1, ids[..., None])[..., 0]
    completion_mask = torch.ones(batch, length, dtype=torch.int64, device=device)
    completion_mask[0, -2:] = 0
    completion_mask[-1, 1] = 0
    vllm_shape = {None: None, "token": (batch, length), "sequence": (batch, 1)}[vllm]
    return dict(
        logits=logits,
        old_logp=logp + randn(logp.shape, device, seed=6, scale=0.3) if old else None,
        ref_logp=logp + randn(logp.shape, device, seed=7, scale=0.3) if beta else None,
        completion_ids=ids, advantages=randn((batch,), device, seed=8),
        completion_mask=completion_mask if mask else None, temperature=temperature,
        beta=beta, eps_low=eps_low, eps_high=5.0 if loss_type == "cispo" else 0.28,
        loss_type=loss_type, level=level,
        vllm_is_ratio=(randn(vllm_shape, device, seed=9, scale=0.2).exp()
                       if vllm_shape else None),
        delta=delta, bias_kl=bias_kl,
        phi_seq=randn((batch,), device, seed=10).abs() if loss_type == "vespo" else None)


def _grpo(ops, inputs):
    function = ops["grpo_loss"].GrpoLossFunction.apply

    def loss(logits, old_logp, ref_logp, completion_ids, advantages, completion_mask,
             temperature, beta, eps_low, eps_high, loss_type, level, vllm_is_ratio, delta,
             bias_kl, phi_seq):
        return function(logits, old_logp, ref_logp, completion_ids, advantages,
                        completion_mask, temperature, beta, eps_low, eps_high, False, loss_type,
                        None, True, level, 1.0, 1.05, vllm_is_ratio, delta, bias_kl, None,
                        phi_seq)
    return with_outputs(loss, inputs, ("logits",))


def _grpo_reference_outputs(logits, old_logp, ref_logp, completion_ids, advantages,
                            completion_mask, temperature, beta, eps_low, eps_high, loss_type,
                            level, vllm_is_ratio, delta, bias_kl, phi_seq):
    """(loss, mean KL, clipped fraction), over the tokens of the completion mask."""
    logp = (logits[:, :-1] / temperature).log_softmax(-1).gather(
        -1, completion_ids[..., None])[..., 0]
    mask = torch.ones_like(logp) if completion_mask is None else completion_mask.float()
    advantage = advantages[:, None]
    log_ratio = logp - (logp.detach() if old_logp is None else old_logp)
    if level == "sequence":
        log_ratio = (log_ratio * mask).sum(-1, keepdim=True) / mask.sum(-1, keepdim=True)
    ratio = log_ratio.exp()
    no_clip = torch.zeros_like(logp, dtype=torch.bool)
    if loss_type == "cispo":
        loss = -ratio.clamp(max=eps_high).detach() * advantage * logp
        clipped = (ratio > eps_high) & (advantage > 0)
    elif loss_type == "sapo":
        tau = torch.where(advantage > 0, 1.0, 1.05)
        loss = -torch.sigmoid(tau * (ratio - 1)) * 4 / tau * advantage
        clipped = no_clip
    elif loss_type == "vespo":
        loss = -phi_seq[:, None] * advantage * logp
        clipped = no_clip
    else:
        clipped_ratio = ratio.clamp(1 - eps_low, 1 + eps_high)
        capped = ratio if delta is None else ratio.clamp(max=delta)
        loss = -torch.min(capped * advantage, clipped_ratio * advantage)
        clipped = ((ratio < 1 - eps_low) & (advantage < 0)) | \
            ((ratio > 1 + eps_high) & (advantage > 0))
    if vllm_is_ratio is not None and loss_type != "vespo":
        loss = loss * vllm_is_ratio.reshape(vllm_is_ratio.shape[0], -1)
    tokens = mask.sum().clamp(min=1)
    outputs = ()
    if beta:
        kl = torch.exp(ref_logp - logp) - (ref_logp - logp) - 1
        if bias_kl:
            kl = kl * ratio
        loss = loss + beta * kl
        outputs = ((kl * mask).sum().detach() / tokens,)
    masked = loss * mask
    if loss_type in ("grpo", "sapo"):
        reduced = (masked.sum(-1) / mask.sum(-1).clamp(min=1)).mean()
    elif loss_type == "bnpo":
        reduced = masked.sum() / tokens
    elif loss_type == "dr_grpo":
        reduced = masked.sum() / mask.numel()
    else:   # dapo, cispo, vespo: over the tokens of the batch (one process)
        reduced = masked.sum() / tokens
    clip_ratio = (clipped.expand_as(mask).float() * mask).sum() / tokens
    return (reduced, *outputs, clip_ratio)


def _grpo_reference(inputs):
    return with_outputs(_grpo_reference_outputs, inputs, ("logits",))


def _selective_log_softmax_inputs(device, bench):
    batch, prompt, length, vocab = (8, 128, 512, 32000) if bench else (3, 2, 5, 40)
    completion_mask = torch.ones(batch, length, dtype=torch.int64, device=device)
    completion_mask[1, -3:] = 0
    return dict(logits=randn((batch, length + 1, vocab), device, scale=2.0),
                input_ids=randint(vocab, (batch, prompt + length), device, 5),
                temperature=0.7, mask=completion_mask)


def _selective_log_softmax(ops, inputs):
    return (ops["grpo_loss"].fused_selective_log_softmax(*inputs.values()),)


def _selective_log_softmax_reference(inputs):
    logits, input_ids, temperature, mask = inputs.values()
    length = logits.shape[1] - 1
    logp = (logits[:, :-1] / temperature).log_softmax(-1).gather(
        -1, input_ids[:, -length:, None])[..., 0]
    return (logp * mask,)


CASES = [
    Case("grpo_loss", _grpo_inputs, _grpo, _grpo_reference, 1e-5, 1e-5, ("grpo_loss",)),
    Case("grpo_loss_cispo",
         lambda device, bench: _grpo_inputs(device, bench, "cispo", beta=0.0, vllm="token"),
         _grpo, _grpo_reference, 1e-5, 1e-5, ("grpo_loss",)),
    Case("grpo_loss_sapo",
         lambda device, bench: _grpo_inputs(device, bench, "sapo", old=False, bias_kl=True),
         _grpo, _grpo_reference, 1e-5, 1e-5, ("grpo_loss",)),
    Case("grpo_loss_vespo",
         lambda device, bench: _grpo_inputs(device, bench, "vespo", mask=False),
         _grpo, _grpo_reference, 1e-5, 1e-5, ("grpo_loss",)),
    Case("grpo_loss_dr_grpo_delta",
         lambda device, bench: _grpo_inputs(device, bench, "dr_grpo", delta=1.1,
                                            vllm="sequence"),
         _grpo, _grpo_reference, 1e-5, 1e-5, ("grpo_loss",)),
    # sequence-level importance sampling: the log-softmax kernel, then the *_seq kernels
    Case("grpo_loss_sequence",
         lambda device, bench: _grpo_inputs(device, bench, "bnpo", level="sequence",
                                            delta=1.1, bias_kl=True, eps_low=0.1),
         _grpo, _grpo_reference, 1e-5, 1e-5, ("grpo_loss",)),
    Case("grpo_selective_log_softmax", _selective_log_softmax_inputs, _selective_log_softmax,
         _selective_log_softmax_reference, 1e-5, 1e-5, ("grpo_loss",)),
]
