"""Apply activation checkpointing, compilation and FSDP2 to a built model, in torchtitan's order.

Kept apart from the model so ``composer/model.py`` stays plain single-device code.
"""

from __future__ import annotations

import torch
from torch import nn

from composer.model import ComposerModel


def apply_activation_checkpointing(model: ComposerModel) -> None:
    """Recompute each residual layer's activations in the backward pass (per-layer AC)."""
    for layer in model.layers:
        layer.activation_checkpointing = True


def apply_compile(model: ComposerModel) -> None:
    """Compile each layer in place (names and FSDP units unchanged; repeated layers share compiled code)."""
    for layer in model.layers:
        layer.compile()


def apply_fsdp(
    model: ComposerModel,
    mesh,
    param_dtype: torch.dtype | None = None,
    reduce_dtype: torch.dtype = torch.float32,
) -> None:
    """FSDP2: shard every residual layer, then the root (embedding, final norm, head).

    ``param_dtype`` (e.g. bf16) makes FSDP all-gather and compute in that dtype while the sharded master weights
    and the optimizer state stay float32, and gradients are reduced in ``reduce_dtype``.
    """
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    policy = MixedPrecisionPolicy(param_dtype=param_dtype, reduce_dtype=reduce_dtype)
    last = len(model.layers) - 1
    for index, layer in enumerate(model.layers):
        # the last layer's parameters are needed again right away by the backward pass: keep them gathered
        fully_shard(layer, mesh=mesh, mp_policy=policy, reshard_after_forward=index < last)
    fully_shard(model, mesh=mesh, mp_policy=policy)


def count_parameters(model: nn.Module) -> int:
    """Global parameter count, also for sharded (DTensor) parameters."""
    return sum(p.numel() for p in model.parameters())
