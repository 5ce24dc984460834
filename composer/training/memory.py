"""The memory a training run needs, counted from its architecture before anything is allocated, against what its
device has free.

Why: ``composer train --arch "(AM)x999"`` built the model, started Lightning and died 144 lines later in an
out-of-memory traceback (issue 69), though the sizes follow from the architecture alone, as ``composer info``
counts them. :func:`check_training_memory` refuses such a run in one line that names the size and how to make it
fit, before ``--out`` exists.

The count is a floor, so that no run that fits is refused:

* state: every trained weight with its gradient and AdamW's two moments (16 bytes a parameter with fp32 weights,
  8 with bf16 weights), split over the devices under FSDP. Where some groups are frozen, every parameter counts
  its weight only (a frozen one has no gradient or moments); a teacher's weights come beside it.
* activations: what the forward pass keeps for the backward pass, at one forward's micro-batch x seq_len tokens.
  A matrix multiply keeps its input (for its weight's gradient) and what reads its output (an activation
  function, attention, a gate) keeps that, so every linear layer's input and output width per token is counted,
  plus each layer's input, which its norm keeps. With activation checkpointing only each layer's input is kept,
  and one layer's worth while it is recomputed. A primitive's own intermediates (a scan's states, attention's
  statistics) come on top and are not counted.
* logits: the float logits the loss keeps for its backward pass, and their gradient.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from composer.accounting import analyze, format_bytes
from composer.config import ArchConfig
from composer.errors import ConfigError
from composer.precision import available_memory_bytes, resolve_device

BF16_PRECISIONS = ("bf16-mixed", "bf16-true", "16-mixed")  # activations kept in 16 bits


@dataclass(frozen=True)
class TrainingMemory:
    """Bytes one device (one process) needs at least, by what holds them."""

    state: int
    activations: int
    logits: int
    tokens: int  # per forward pass: micro-batch x seq_len

    @property
    def total(self) -> int:
        return self.state + self.activations + self.logits


def linear_widths(arch: ArchConfig) -> dict[str, int]:
    """Per layer token: the input and output widths of its linear layers summed, plus its own input (the values
    per token one forward keeps of that layer, the module docstring's floor). Counted on a one-layer model of each
    token built on the meta device, which allocates nothing."""
    from composer.model import build_model

    widths = {}
    for token in arch.counts:
        layer = build_model(arch.replace(pattern=token), device="meta").layers[0]
        linears = [m for m in layer.modules() if isinstance(m, torch.nn.Linear)]
        widths[token] = arch.d_model + sum(m.in_features + m.out_features for m in linears)
    return widths


def training_memory(arch: ArchConfig, *, micro_batch_size: int, seq_len: int, precision: str, shards: int = 1,
                    frozen: bool = False, teacher: ArchConfig | None = None,
                    activation_checkpointing: bool = False) -> TrainingMemory:
    """The floor of one device's memory (module docstring). ``shards``: the devices FSDP splits the state over
    (1 without FSDP)."""
    params = analyze(arch, seq_len=seq_len).params
    bf16_weights = precision == "bf16-true"
    weight_bytes = 2 if bf16_weights else 4
    state = params * weight_bytes if frozen else params * 4 * weight_bytes  # weight, gradient, two moments
    if teacher is not None:
        state += analyze(teacher, seq_len=seq_len).params * weight_bytes
    value_bytes = 2 if precision in BF16_PRECISIONS else 4
    tokens = micro_batch_size * seq_len
    per_layer = linear_widths(arch)
    if activation_checkpointing:
        kept = arch.n_layers * arch.d_model + max(per_layer.values())
    else:
        kept = sum(per_layer[token] * n for token, n in arch.counts.items())
    logits = 2 * tokens * arch.vocab_size * 4  # float logits and their gradient
    return TrainingMemory(state=state // shards, activations=tokens * kept * value_bytes, logits=logits,
                          tokens=tokens)


def check_training_memory(memory: TrainingMemory, device_name: str, processes: int, what: str) -> None:
    """A one-line usage error when ``memory`` (per process) exceeds what the device has free; ``processes``: how
    many of the run's processes share this memory (the CPU's: all of this host's; a GPU's: one). Silent where the
    free memory cannot be read."""
    device = resolve_device(device_name)
    free = available_memory_bytes(device)
    needed = memory.total * processes
    if free is None or needed <= free:
        return
    on = "the CPU" if device.type == "cpu" else f"{device.type}:{device.index or 0}"
    each = f"{processes} processes of {format_bytes(memory.total)}: " if processes > 1 else ""
    raise ConfigError(
        f"{what} needs at least {format_bytes(needed)} to train ({each}weights, gradients and AdamW state "
        f"{format_bytes(memory.state)}, activations {format_bytes(memory.activations)} at {memory.tokens:,} tokens "
        f"per forward, logits {format_bytes(memory.logits)}) but {on} has {format_bytes(free)} free: lower "
        "--micro-batch-size or --seq-len, add --activation-checkpointing, or train a smaller model")
