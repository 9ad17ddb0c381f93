"""Cases: liger's losses (cross entropy, the divergences, their fused-linear forms), forward
and backward; GRPO's are in liger_cases_rl.py.

A scalar loss back-propagates an upstream gradient of 1, which liger's host code skips; where
a case multiplies its loss by ``UPSTREAM`` it is to run the backward's scaling kernel
(``utils.element_mul_kernel``) too.
"""
from __future__ import annotations

import contextlib
import sys
import types

import torch
import torch.nn.functional as F

import aotk
from aotk.triton_imports import redirect_triton

from .liger_cases import Case, randint, randn, with_grads, with_outputs

UPSTREAM = 0.75
IGNORE = -100


def _targets(rows, classes, device, seed=5, ignored=(1,)):
    """Class indices with ``IGNORE`` at the rows ``ignored``."""
    target = randint(classes, (rows,), device, seed)
    target[list(ignored)] = IGNORE
    return target


_packages: dict = {}


def _package_modules(ops):
    """{name: module} of the liger_kernel package ``ops`` was loaded from. ``load_ops`` takes
    its private copy of the package out of ``sys.modules`` again."""
    root = next(m.liger_kernel for m in ops.values() if hasattr(m, "liger_kernel"))
    if id(root) in _packages:
        return _packages[id(root)][1]
    found, todo = {}, [root, *ops.values()]
    while todo:
        module = todo.pop()
        if module.__name__ in found:
            continue
        found[module.__name__] = module
        todo += [value for value in vars(module).values() if isinstance(value, types.ModuleType)
                 and value.__name__.split(".")[0] == "liger_kernel"]
    _packages[id(root)] = root, found   # the root kept alive: its id stays its own
    return found


@contextlib.contextmanager
def dispatchable(ops):
    """liger's dispatcher (``liger_kernel.backends.dispatch``, used by jsd, fused_linear_jsd
    and fused_linear_kl_div) imports the module registering an op's Triton implementation on
    the op's first call. That import must see the package ``ops`` was loaded from, with
    ``import triton`` as it was then, for the registration to land in that package's registry
    and the implementation to launch that package's kernels. (``backends.dispatch`` the
    module is not among them: its package's attribute of that name is the function, so nothing
    held on to the module; the registry's cache invalidation imports a copy of it, harmlessly:
    the dispatcher fills its cache after discovery.)"""
    fresh = _package_modules(ops)
    redirected = any(getattr(m, "triton", None) is aotk for m in ops.values())
    saved = {n: m for n, m in sys.modules.items() if n.split(".")[0] == "liger_kernel"}
    for name in saved:
        del sys.modules[name]
    sys.modules.update(fresh)
    try:
        with redirect_triton() if redirected else contextlib.nullcontext():
            yield
    finally:
        for name in [n for n in sys.modules if n.split(".")[0] == "liger_kernel"]:
            fresh[name] = sys.modules.pop(name)   # with the modules the dispatcher imported
        sys.modules.update(saved)


def _rows_vocab(bench):
    return (4096, 32000) if bench else (6, 300)


def _reduce(loss, reduction, count):
    return loss.sum() / count if reduction == "mean" else loss.sum() if reduction == "sum" \
        else loss


# --- cross entropy: F.cross_entropy of (softcapped) logits, plus the z-loss ---------------
# lse_square_scale * logsumexp(x)^2 per kept row (unweighted; reduced like the loss).

def _ce_inputs(device, bench, dtype=torch.float32, weight=False, reduction="mean",
               label_smoothing=0.0, lse_square_scale=0.0, softcap=None, rows_vocab=None):
    rows, vocab = rows_vocab or _rows_vocab(bench)
    return dict(X=randn((rows, vocab), device, dtype, scale=2.0),
                y=_targets(rows, vocab, device, ignored=(1, rows - 2)),
                weight=randn((vocab,), device, seed=3).abs() + 0.5 if weight else None,
                ignore_index=IGNORE, lse_square_scale=lse_square_scale,
                label_smoothing=label_smoothing, reduction=reduction, softcap=softcap)


def _ce_reference_outputs(X, y, weight, ignore_index, lse_square_scale, label_smoothing,
                          reduction, softcap):
    """(loss with z-loss, z-loss, token accuracy, predicted tokens), liger's four outputs."""
    logits = X.float()
    if softcap is not None:
        logits = softcap * torch.tanh(logits / softcap)
    kept = y != ignore_index
    loss = F.cross_entropy(logits, y, weight, ignore_index=ignore_index, reduction=reduction,
                           label_smoothing=label_smoothing)
    z_loss = _reduce(lse_square_scale * torch.logsumexp(logits, -1) ** 2 * kept, reduction,
                     kept.sum())
    predicted = torch.where(kept, logits.argmax(-1), -1)
    correct = (predicted == y).float()
    accuracy = correct if reduction == "none" else correct.sum() / kept.sum()
    return (loss + z_loss).to(X.dtype), z_loss.to(X.dtype), accuracy, predicted


def _cross_entropy(scale=UPSTREAM, metrics=False):
    def run(ops, inputs):
        function = ops["cross_entropy"].LigerCrossEntropyFunction.apply

        def loss(X, y, weight, ignore_index, lse_square_scale, label_smoothing, reduction,
                 softcap):
            out = function(X, y, weight, ignore_index, lse_square_scale, label_smoothing,
                           reduction, softcap, metrics, metrics, metrics)
            return (out[0] * scale, *out[1:])
        return with_outputs(loss, inputs, ("X",))
    return run


def _cross_entropy_reference(scale=UPSTREAM, metrics=False):
    def reference(inputs):
        def loss(*args):
            out = _ce_reference_outputs(*args)
            return (out[0] * scale, *(out[1:] if metrics else ()))
        return with_outputs(loss, inputs, ("X",))
    return reference


def _ce_forward_only(ops, inputs):
    """No input needs a gradient: the kernel's forward-only variant, with the metrics."""
    out = ops["cross_entropy"].LigerCrossEntropyFunction.apply(
        *inputs.values(), False, True, True)
    return (out[0], out[2], out[3])


def _ce_forward_only_reference(inputs):
    loss, _, accuracy, predicted = _ce_reference_outputs(*inputs.values())
    return loss, accuracy, predicted


# --- fused linear + cross entropy: CE of x @ W^T + b ----------------------------------------

def _flce_inputs(device, bench, bias=True, **options):
    rows, hidden, vocab = (4096, 4096, 32000) if bench else (10, 16, 72)
    return dict(x=randn((rows, hidden), device, scale=1.0),
                W=randn((vocab, hidden), device, seed=2, scale=hidden ** -0.5 * 2),
                y=_targets(rows, vocab, device, ignored=(1, 7)),
                b=randn((vocab,), device, seed=3, scale=0.1) if bias else None, **options)


def _flce(ops, inputs):
    function = ops["fused_linear_cross_entropy"].LigerFusedLinearCrossEntropyFunction.apply
    return with_grads(lambda x, W, y, b: function(x, W, y, b)[0] * UPSTREAM, inputs,
                      ("x", "W", "b"))


def _flce_reference(inputs):
    return with_grads(lambda x, W, y, b: F.cross_entropy(x @ W.T + b, y, ignore_index=IGNORE)
                      * UPSTREAM, inputs, ("x", "W", "b"))


_FLCE_NONE = dict(label_smoothing=0.1, softcap=20.0, lse_square_scale=1e-3)


def _flce_none(ops, inputs):
    """reduction="none": liger defers the gradient to backward (the forward's kernel runs
    without gradients, backward's with them); per-token scaling by the detached target
    probability; the z-loss and metrics returned."""
    function = ops["fused_linear_cross_entropy"].LigerFusedLinearCrossEntropyFunction.apply
    return with_outputs(
        lambda x, W, y, b, label_smoothing, softcap, lse_square_scale: function(
            x, W, y, None, None, IGNORE, lse_square_scale, label_smoothing, "none", softcap,
            True, None, True, True, True), inputs, ("x", "W"))


def _flce_none_reference(inputs):
    def loss(x, W, y, b, label_smoothing, softcap, lse_square_scale):
        logits = x @ W.T
        ce, z_loss, accuracy, predicted = _ce_reference_outputs(
            logits, y, None, IGNORE, lse_square_scale, label_smoothing, "none", softcap)
        capped = softcap * torch.tanh(logits / softcap)
        probability = capped.softmax(-1).gather(-1, y.clamp(min=0)[:, None])[:, 0]
        scale = torch.where(y != IGNORE, probability, 0.0).detach()
        return ce * scale, z_loss * scale, accuracy, predicted
    return with_outputs(loss, inputs, ("x", "W"))


# --- KL divergence: F.kl_div(log q, p) ------------------------------------------------------

def _kl_inputs(device, bench, reduction="batchmean", log_target=False):
    rows, vocab = _rows_vocab(bench)
    target = randn((rows, vocab), device, seed=2).log_softmax(-1)
    return dict(y_pred=randn((rows, vocab), device).log_softmax(-1),
                y_true=target if log_target else target.exp(), reduction=reduction,
                log_target=log_target)


def _kl_div(scale):
    def run(ops, inputs):
        function = ops["kl_div"].LigerKLDivLossFunction.apply
        return with_grads(lambda y_pred, y_true, reduction, log_target: function(
            y_pred, y_true, reduction, log_target) * scale, inputs, ("y_pred",))
    return run


def _kl_div_reference(scale):
    def reference(inputs):
        return with_grads(lambda y_pred, y_true, reduction, log_target: F.kl_div(
            y_pred, y_true, reduction=reduction, log_target=log_target) * scale, inputs,
            ("y_pred",))
    return reference


# --- generalized JSD, X = log Q (student), Y = log P (teacher) ----------------------------
# beta = 0: KL(P || Q); beta = 1: KL(Q || P); else
# beta * KL(P || M) + (1 - beta) * KL(Q || M), M = beta * P + (1 - beta) * Q.
# Summed over the kept rows, divided by their number.

def _jsd_rows(X, Y, beta):
    P, Q = Y.exp(), X.exp()
    if beta == 0.0:
        return (P * (Y - X)).sum(-1)
    if beta == 1.0:
        return (Q * (X - Y)).sum(-1)
    log_M = torch.log(beta * P + (1 - beta) * Q)
    return (beta * P * (Y - log_M) + (1 - beta) * Q * (X - log_M)).sum(-1)


def _jsd_reference_loss(X, Y, labels, beta):
    rows = _jsd_rows(X, Y, beta)
    if labels is None:
        return rows.sum() / X.shape[0]
    kept = labels != IGNORE
    return (rows * kept).sum() / kept.sum()


def _jsd_inputs(device, bench, beta=0.5, labels=True):
    rows, vocab = _rows_vocab(bench)
    return dict(X=randn((rows, vocab), device, scale=2.0).log_softmax(-1),
                Y=randn((rows, vocab), device, seed=2, scale=2.0).log_softmax(-1),
                labels=_targets(rows, vocab, device, ignored=(2,)) if labels else None,
                beta=beta)


def _jsd(ops, inputs):
    function = ops["jsd"].LigerJSDFunction.apply
    with dispatchable(ops):
        return with_grads(lambda X, Y, labels, beta: function(
            X, Y, labels, beta, IGNORE, "nvidia-triton") * UPSTREAM, inputs, ("X",))


def _jsd_reference(inputs):
    return with_grads(lambda X, Y, labels, beta: _jsd_reference_loss(X, Y, labels, beta)
                      * UPSTREAM, inputs, ("X",))


# --- total variation distance: 0.5 * |p - q| ----------------------------------------------

def _tvd_inputs(device, bench, reduction="batchmean", labels=True):
    rows, vocab = _rows_vocab(bench)
    return dict(p=randn((rows, vocab), device).softmax(-1),
                q=randn((rows, vocab), device, seed=2).softmax(-1),
                labels=_targets(rows, vocab, device, ignored=(0, 3)) if labels else None,
                reduction=reduction)


def _tvd(scale):
    def run(ops, inputs):
        function = ops["tvd"].LigerTVDLossFunction.apply
        return with_grads(lambda p, q, labels, reduction: function(
            p, q, labels, reduction, IGNORE) * scale, inputs, ("p",))
    return run


def _tvd_reference(scale):
    def reference(inputs):
        def loss(p, q, labels, reduction):
            kept = torch.ones(p.shape[0], dtype=torch.bool, device=p.device) \
                if labels is None else labels != IGNORE
            distance = 0.5 * (p - q).abs() * kept[:, None]
            if reduction == "none":
                return distance * scale
            count = {"batchmean": kept.sum(), "mean": kept.sum() * p.shape[1], "sum": 1}
            return distance.sum() / count[reduction] * scale
        return with_grads(loss, inputs, ("p",))
    return reference


# --- fused CE + TVD: per-token CE(student) and TVD(softmax(student), softmax(teacher)) ----

def _ce_tvd_inputs(device, bench):
    rows, vocab = _rows_vocab(bench)
    return dict(student=randn((rows, vocab), device, scale=2.0),
                teacher=randn((rows, vocab), device, seed=2, scale=2.0),
                target=_targets(rows, vocab, device, ignored=(1, 4)))


def _ce_tvd(ops, inputs):
    """Both per-token outputs stacked, so backward gets an upstream gradient for each."""
    function = ops["fused_ce_tvd"].LigerFusedCETVDFunction.apply
    return with_grads(lambda student, teacher, target: torch.stack(
        function(student, teacher, target, IGNORE)), inputs, ("student",))


def _ce_tvd_reference(inputs):
    def loss(student, teacher, target):
        kept = target != IGNORE
        ce = F.cross_entropy(student, target, ignore_index=IGNORE, reduction="none")
        tvd = 0.5 * (student.softmax(-1) - teacher.softmax(-1)).abs().sum(-1) * kept
        return torch.stack((ce, tvd))
    return with_grads(loss, inputs, ("student",))


# --- fused linear + JSD: JSD of log_softmax(x @ W^T / T) for student and teacher ---------

def _fljsd_inputs(device, bench):
    rows, hidden, vocab = (4096, 4096, 32000) if bench else (10, 16, 72)
    return dict(x=randn((rows, hidden), device), W=randn((vocab, hidden), device, seed=2,
                                                         scale=hidden ** -0.5 * 2),
                x_teacher=randn((rows, hidden), device, seed=3),
                W_teacher=randn((vocab, hidden), device, seed=4, scale=hidden ** -0.5 * 2),
                labels=_targets(rows, vocab, device, ignored=(2, 5)), beta=0.3,
                temperature=2.0)


def _fljsd(ops, inputs):
    function = ops["fused_linear_jsd"].LigerFusedLinearJSDFunction.apply
    with dispatchable(ops):
        return with_grads(
            lambda x, W, x_teacher, W_teacher, labels, beta, temperature: function(
                x, W, x_teacher, W_teacher, labels, beta, IGNORE, temperature, None,
                "nvidia-triton") * UPSTREAM, inputs, ("x", "W"))


def _fljsd_reference(inputs):
    def loss(x, W, x_teacher, W_teacher, labels, beta, temperature):
        student = (x @ W.T / temperature).log_softmax(-1)
        teacher = (x_teacher @ W_teacher.T / temperature).log_softmax(-1)
        return _jsd_reference_loss(student, teacher, labels, beta) * UPSTREAM
    return with_grads(loss, inputs, ("x", "W"))


# --- fused linear + KL: KL(q || softmax(x @ W^T / T)) over the kept rows --------------------

def _flkl_inputs(device, bench, reduction="batchmean", labels=True):
    # V > 16 H: liger's chunk budget (16 x rows x H) splits the rows into chunks.
    rows, hidden, vocab = (4096, 4096, 32000) if bench else (10, 4, 80)
    return dict(x=randn((rows, hidden), device), W=randn((vocab, hidden), device, seed=2,
                                                         scale=hidden ** -0.5 * 2),
                q=randn((rows, vocab), device, seed=3).softmax(-1),
                labels=_targets(rows, vocab, device, ignored=(0, 6)) if labels else None,
                reduction=reduction, temperature=1.5)


def _flkl(scale):
    def run(ops, inputs):
        function = ops["fused_linear_kl_div"].LigerFusedLinearKLDivFunction.apply
        with dispatchable(ops):
            return with_grads(lambda x, W, q, labels, reduction, temperature: function(
                x, W, q, labels, reduction, IGNORE, temperature) * scale, inputs, ("x", "W"))
    return run


def _flkl_reference(scale):
    def reference(inputs):
        def loss(x, W, q, labels, reduction, temperature):
            kept = torch.ones(x.shape[0], dtype=torch.bool, device=x.device) \
                if labels is None else labels != IGNORE
            log_p = (x @ W.T / temperature).log_softmax(-1)
            rows = F.kl_div(log_p, q, reduction="none").sum(-1) * kept
            count = {"batchmean": kept.sum(), "mean": kept.sum() * W.shape[0], "sum": 1}
            return rows.sum() / count[reduction] * scale
        return with_grads(loss, inputs, ("x", "W"))
    return reference


# --- vocab-parallel cross entropy (one rank: no process group) --------------------------------
# Per-token F.cross_entropy over [seq, batch, vocab] logits; label smoothing alpha (pytorch)
# or alpha V / (V - 1) (megatron).

def _vpce_inputs(device, bench, label_smoothing=0.0, formula="pytorch", mode="global"):
    seq, batch, vocab = (2048, 2, 32000) if bench else (4, 2, 300)
    target = _targets(seq * batch, vocab, device, ignored=(2, 5)).reshape(seq, batch)
    return dict(logits=randn((seq, batch, vocab), device, scale=2.0), target=target,
                label_smoothing=label_smoothing, formula=formula, mode=mode)


def _vpce(ops, inputs):
    function = ops["vocab_parallel_cross_entropy"].LigerVocabParallelCEFunction.apply
    return with_grads(lambda logits, target, label_smoothing, formula, mode: function(
        logits, target, None, IGNORE, label_smoothing, formula, mode), inputs, ("logits",))


def _vpce_reference(inputs):
    def loss(logits, target, label_smoothing, formula, mode):
        vocab = logits.shape[-1]
        alpha = label_smoothing * vocab / (vocab - 1) if formula == "megatron" \
            else label_smoothing
        return F.cross_entropy(logits.reshape(-1, vocab), target.reshape(-1),
                               ignore_index=IGNORE, reduction="none",
                               label_smoothing=alpha).reshape(target.shape)
    return with_grads(loss, inputs, ("logits",))


CASES = [
    # mean reduction, ignored rows; backward scales the gradient (element_mul_kernel)
    Case("cross_entropy", _ce_inputs, _cross_entropy(), _cross_entropy_reference(),
         1e-5, 1e-5, ("cross_entropy", "utils")),
    Case("cross_entropy_smoothing",
         lambda device, bench: _ce_inputs(device, bench, reduction="none", label_smoothing=0.1,
                                          lse_square_scale=1e-4, softcap=6.0),
         _cross_entropy(1.0, True), _cross_entropy_reference(1.0, True), 1e-5, 1e-5,
         ("cross_entropy",)),
    Case("cross_entropy_weighted",
         lambda device, bench: _ce_inputs(device, bench, weight=True, reduction="sum",
                                          label_smoothing=0.05),
         _cross_entropy(), _cross_entropy_reference(), 1e-5, 1e-5,
         ("cross_entropy", "utils")),
    # V > liger's 32768-wide block: the online softmax and argmax run over two blocks
    Case("cross_entropy_metrics",
         lambda device, bench: _ce_inputs(device, bench, rows_vocab=(
             (4096, 128256) if bench else (3, 40000))),
         _ce_forward_only, _ce_forward_only_reference, 1e-5, 1e-5, ("cross_entropy",)),
    # bf16 logits, fp32 softmax: liger rounds each row's loss and the gradient to bf16 and sums
    # the mean loss in bf16 (8 bits of mantissa: 2e-2 relative)
    Case("cross_entropy_bf16",
         lambda device, bench: _ce_inputs(device, bench, torch.bfloat16),
         _cross_entropy(), _cross_entropy_reference(), 2e-2, 2e-2,
         ("cross_entropy", "utils")),
    Case("fused_linear_cross_entropy", _flce_inputs, _flce, _flce_reference, 1e-5, 1e-5,
         ("fused_linear_cross_entropy", "cross_entropy", "utils")),
    Case("fused_linear_cross_entropy_none",
         lambda device, bench: _flce_inputs(device, bench, bias=False, **_FLCE_NONE),
         _flce_none, _flce_none_reference, 1e-5, 1e-5,
         ("fused_linear_cross_entropy", "cross_entropy")),
    Case("kl_div", _kl_inputs, _kl_div(UPSTREAM), _kl_div_reference(UPSTREAM), 1e-5, 1e-5,
         ("kl_div",)),
    Case("kl_div_log_target",
         lambda device, bench: _kl_inputs(device, bench, "none", log_target=True),
         _kl_div(1.0), _kl_div_reference(1.0), 1e-5, 1e-5, ("kl_div",)),
    Case("jsd", _jsd_inputs, _jsd, _jsd_reference, 1e-5, 1e-5, ("jsd",)),
    Case("jsd_forward_kl", lambda device, bench: _jsd_inputs(device, bench, 0.0, False),
         _jsd, _jsd_reference, 1e-5, 1e-5, ("jsd",)),
    Case("jsd_reverse_kl", lambda device, bench: _jsd_inputs(device, bench, 1.0),
         _jsd, _jsd_reference, 1e-5, 1e-5, ("jsd",)),
    Case("tvd", _tvd_inputs, _tvd(UPSTREAM), _tvd_reference(UPSTREAM), 1e-5, 1e-5, ("tvd",)),
    Case("tvd_none", lambda device, bench: _tvd_inputs(device, bench, "none", labels=False),
         _tvd(1.0), _tvd_reference(1.0), 1e-5, 1e-5, ("tvd",)),
    Case("fused_ce_tvd", _ce_tvd_inputs, _ce_tvd, _ce_tvd_reference, 1e-5, 1e-5,
         ("fused_ce_tvd",)),
    Case("fused_linear_jsd", _fljsd_inputs, _fljsd, _fljsd_reference, 1e-5, 1e-5,
         ("fused_linear_jsd", "jsd", "utils")),
    Case("fused_linear_kl_div", _flkl_inputs, _flkl(UPSTREAM), _flkl_reference(UPSTREAM),
         1e-5, 1e-5, ("fused_linear_kl_div", "utils")),
    Case("fused_linear_kl_div_sum",
         lambda device, bench: _flkl_inputs(device, bench, "sum", labels=False),
         _flkl(1.0), _flkl_reference(1.0), 1e-5, 1e-5, ("fused_linear_kl_div",)),
    Case("vocab_parallel_cross_entropy", _vpce_inputs, _vpce, _vpce_reference, 1e-5, 1e-5,
         ("vocab_parallel_cross_entropy",)),
    Case("vocab_parallel_cross_entropy_smoothing",
         lambda device, bench: _vpce_inputs(device, bench, 0.1, "megatron", "partition"),
         _vpce, _vpce_reference, 1e-5, 1e-5, ("vocab_parallel_cross_entropy",)),
]
