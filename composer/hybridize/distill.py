"""Distillation losses: the student learns the teacher's next-token distribution (``composer hybridize``)."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def kl_divergence(student_logits: torch.Tensor, teacher_logits: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """Mean over tokens of ``KL(teacher || student)`` at ``temperature``, scaled by ``temperature ** 2`` (Hinton et
    al. 2015) so that its gradient keeps its size as the temperature changes. Computed in float32."""
    vocab = teacher_logits.size(-1)
    student = F.log_softmax(student_logits[..., :vocab].float().reshape(-1, vocab) / temperature, dim=-1)
    teacher = F.log_softmax(teacher_logits.float().reshape(-1, vocab) / temperature, dim=-1)
    return F.kl_div(student, teacher, log_target=True, reduction="batchmean") * temperature**2


def layer_outputs(model, input_ids: torch.Tensor) -> list[torch.Tensor]:
    """The residual stream after every layer of a ComposerModel (the last one is what the final norm reads)."""
    h = model.tok_embeddings(input_ids)
    outputs = []
    for layer in model.layers:
        h = layer(h)
        outputs.append(h)
    return outputs
