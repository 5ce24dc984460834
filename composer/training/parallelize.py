"""Apply activation checkpointing, compilation and FSDP2 to a built model, in torchtitan's order.

Kept apart from the model so ``composer/model.py`` stays plain single-device code.
"""

from __future__ import annotations

import functools

import torch
from torch import nn

from composer.compiling import recompile_limit_at_least
from composer.model import ComposerModel, ResidualLayer

# Cache entries of ResidualLayer.forward one primitive type can need: train and eval, each with and without the
# input variants FSDP and autocast bring (on the H200 run: grad mode and a dispatch-key change per type).
ENTRIES_PER_PRIMITIVE_TYPE = 4


def apply_activation_checkpointing(model: ComposerModel) -> None:
    """Recompute each residual layer's activations in the backward pass (per-layer AC)."""
    for layer in model.layers:
        layer.activation_checkpointing = True


def apply_compile(model: nn.Module) -> None:
    """Compile each residual layer in place (names and FSDP units unchanged).

    Per layer rather than the whole model: layers of one primitive at one width share compiled code, within a
    model and across models in one process, so a search that builds many patterns compiles each primitive once
    instead of once per pattern. Works on any module holding :class:`ResidualLayer` s (e.g. MAD's autoencoder).
    The final norm, LM head and cross-entropy are compiled as one function too: Inductor fuses the loss over the
    vocabulary into single passes (on CPU, 2x faster than eager at an 8K vocabulary).

    Every layer runs the same ``ResidualLayer.forward`` code, and dynamo keeps one cache entry of it per primitive
    type and grad mode (training, and validation under ``no_grad``), with more for FSDP's and autocast's input
    variants. Past ``recompile_limit`` (8 by default) it runs new variants eagerly without an error: on an H200,
    ``(DMAM)x4`` at 1B widths hit the limit. So the limit is raised to leave room for every primitive type here,
    during the compiled calls only (:func:`_under_recompile_limit`): the process's own limit, which governs every
    other compiled function (a search worker's cost measurement, a user's code), is left as it was.

    ``dynamic=False``: shapes stay static, one cache entry per shape. Under dynamo's default, a second input shape
    of the shared forward (a second model, sequence length or width in one process: MAD's tasks, a ladder's rungs)
    recompiles it with symbolic shapes, and Inductor then failed on CPU for the all-six pattern ("cannot determine
    truth value of Relational", torch 2.13; a CI flake that depended on which tests shared an xdist worker).
    """
    types = {type(module.primitive) for module in model.modules() if isinstance(module, ResidualLayer)}
    needed = ENTRIES_PER_PRIMITIVE_TYPE * max(len(types), 1)
    for module in model.modules():
        if isinstance(module, ResidualLayer):
            module.compile(dynamic=False)
            module._compiled_call_impl = _under_recompile_limit(module._compiled_call_impl, needed)
        elif isinstance(module, ComposerModel):
            module.logits_and_loss = _under_recompile_limit(torch.compile(module.logits_and_loss, dynamic=False),
                                                            needed)


def _under_recompile_limit(compiled, limit: int):
    """``compiled`` called with dynamo's recompile limit at least ``limit`` (it is read when a call misses the
    cache); calls where the process's limit is already that high run as they are."""

    @functools.wraps(compiled)
    def call(*args, **kwargs):
        with recompile_limit_at_least(limit):
            return compiled(*args, **kwargs)

    return call


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
