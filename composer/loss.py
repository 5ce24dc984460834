"""Token cross-entropy that keeps one vocabulary-sized tensor alive instead of three.

``F.cross_entropy`` stores the log-softmax output for backward, and its backward allocates a zero-filled gradient
before scattering into it. Here forward saves the (float) logits plus one log-sum-exp per row, and backward builds
the gradient in place from a single softmax. Same values and gradients; less memory at 128K vocabularies, and
about as fast as ``F.cross_entropy`` on CPU (76 vs 73-78 ms forward + backward at 2,048 x 8,192, 2 cores).
Under ``torch.compile`` torch's own cross-entropy is traced instead: Inductor fuses it (46 ms there).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

IGNORE_INDEX = -100


class _CrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits: torch.Tensor, targets: torch.Tensor, ignore_index: int) -> torch.Tensor:
        valid = targets != ignore_index
        safe_targets = torch.where(valid, targets, 0)
        lse = torch.logsumexp(logits, dim=-1)
        picked = logits.gather(1, safe_targets.unsqueeze(1)).squeeze(1)
        count = valid.sum().clamp(min=1)
        ctx.save_for_backward(logits, lse, safe_targets, valid, count)
        return torch.where(valid, lse - picked, 0.0).sum() / count

    @staticmethod
    def backward(ctx, grad_output: torch.Tensor):
        logits, lse, safe_targets, valid, count = ctx.saved_tensors
        weight = torch.where(valid, grad_output / count, 0.0).unsqueeze(1).to(logits.dtype)
        grad = torch.sub(logits, lse.unsqueeze(1)).exp_()  # softmax from the saved log-sum-exp, one buffer
        grad.mul_(weight)
        grad.scatter_add_(1, safe_targets.unsqueeze(1), -weight)
        return grad, None, None


def cross_entropy(logits: torch.Tensor, targets: torch.Tensor, ignore_index: int = IGNORE_INDEX) -> torch.Tensor:
    """Mean cross-entropy of ``logits [..., vocab]`` against ``targets [...]``; half precision is upcast to fp32.

    Targets equal to ``ignore_index`` do not count; with none left the loss is 0.
    """
    if logits.dtype in (torch.float16, torch.bfloat16):
        logits = logits.float()
    logits, targets = logits.reshape(-1, logits.shape[-1]), targets.reshape(-1)
    if torch.compiler.is_compiling():
        # Inductor fuses torch's own cross-entropy (forward and backward) into single passes over the logits,
        # which beats the hand-written backward; the sum / count keeps "no target left -> 0" (mean gives NaN).
        total = F.cross_entropy(logits, targets, ignore_index=ignore_index, reduction="sum")
        return total / (targets != ignore_index).sum().clamp(min=1)
    return _CrossEntropy.apply(logits, targets, ignore_index)
