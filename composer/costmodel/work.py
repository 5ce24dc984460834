"""What one step of a phase asks of the hardware, per kind of unit: FLOPs and bytes moved, from the primitives.

A step is one training step (forward + backward over ``batch x seq_len`` tokens, and the optimizer), one prefill
(a ``batch x seq_len`` prompt through the inference cache, logits of its last position) or one decoding step
(one token of each of ``batch`` sequences whose caches hold ``context`` tokens). Its units are the model's layers,
one :class:`Work` per symbol (every layer of a symbol costs the same), the LM head, and in training the embedding's
gradient and the optimizer over each symbol's parameters and the embedding's.

Everything here is accounting (no constants): FLOPs follow :mod:`composer.accounting`'s conventions (2 per
multiply-add, training 3x forward, norms and activations not counted); bytes are what must cross the memory bus
at least once: the weights (read by the forward, read again and their gradients written by the backward), the KV
cache or recurrent state a decoding step reads and writes, the cache a prefill writes.

Activations are counted apart (``Work.activation_bytes``): one ``d_model``-wide pass over a layer's tokens, which
a device's fitted ``activation_passes`` per primitive and phase multiplies (how many such passes its kernels make:
norms, gates, casts, the scan's blocks, all of widths that scale with ``d_model``). A layer's FLOPs grow as
``d_model^2`` and these passes as ``d_model``, so one efficiency alone had to be too high at narrow widths or
too low at wide ones: on this CPU, fitted at d_model 128 and 1024, a layer at 128 trained 33-49% slower than
predicted and one at 1024 20% faster (cost_model_fit-2026-11-29.json).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from composer.config import ArchConfig
from composer.errors import ConfigError
from primitives.base import Primitive
from primitives.parallel import ParallelPrimitive
from primitives.registry import REGISTRY

PHASES = ("train", "prefill", "decode")
# fp32 bytes per parameter of one optimizer step: AdamW reads the parameter, its gradient and two moments and
# writes the parameter and the moments (7 x 4); clip_grad_norm_ reads the gradients for the norm, then scales them
# in place (3 x 4). torch's AdamW and clipping as composer/training/module.py configures them; the least traffic
# they need: an implementation that makes more passes (torch's per-tensor AdamW on the CPU makes about 20) shows
# in the optimizer's fitted efficiency.
OPTIMIZER_BYTES_PER_PARAM = 40
GRAD_BYTES = 4  # gradients are fp32, also under bf16 autocast (the parameters are)


@dataclass(frozen=True)
class Work:
    """One kind of unit of a step, ``layers`` times: ``flops`` and ``bytes`` of one of them.

    ``key`` selects the efficiency (a primitive symbol, ``head``, ``embedding`` or ``optimizer``); ``count_key``
    and ``count_phase`` the measured op counts (an optimizer unit counts the optimizer's ops over ``count_key``'s
    parameters; ``count_phase`` None: no ops of its own, they are counted with another unit's); ``chunks``: chunks
    of the unit's scan this step runs (1 for a layer without one); ``activation_bytes``: one ``d_model``-wide pass
    over the tokens of one of them (training and prefill layers; module doc); ``slices``: (kernel, slices) of
    each kernel that the unit's CPU path runs a slice of the batch at a time (``Primitive.cpu_batch_slices``),
    whose ops are run once per slice: what a device that runs those kernels (the table's ``batch_slices``)
    counts.
    """

    key: str
    count_key: str
    count_phase: str | None
    layers: int
    flops: float
    bytes: float
    chunks: int = 1
    slices: tuple[tuple[str, int], ...] = ()
    activation_bytes: float = 0.0


def step_work(arch: ArchConfig, phase: str, batch: int, length: int, dtype_bytes: int,
              activation_bytes: int | None = None) -> list[Work]:
    """The units of one ``phase`` step of ``arch`` (module doc). ``length`` is the training sequence length, the
    prompt length (prefill) or the tokens the cache holds (decode); ``dtype_bytes`` the bytes of a weight and
    of a cache element; ``activation_bytes`` those of an activation (default ``dtype_bytes``; 2 for training
    under bf16 autocast over fp32 weights), which decide how a CPU kernel slices the batch."""
    if phase not in PHASES:
        raise ConfigError(f"unknown phase {phase!r}; choose one of {', '.join(PHASES)}")
    for name, value in (("batch", batch), ("length", length), ("dtype_bytes", dtype_bytes)):
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise ConfigError(f"{name} must be a positive integer, got {value!r}")
    configs = arch.primitive_configs()
    units: list[Work] = []
    for token, n in arch.counts.items():
        for cls, config in _branches(REGISTRY.get(token), configs[token]):
            units.append(_layer(cls, config, phase, batch, length, dtype_bytes, n,
                                activation_bytes or dtype_bytes, arch.d_model))
            if phase == "train":
                params = cls.param_count(config) + arch.d_model  # the residual layer's norm too
                units.append(Work("optimizer", cls.symbol, "optimizer", n, 0.0,
                                  float(OPTIMIZER_BYTES_PER_PARAM * params)))
    units.append(_head(arch, phase, batch, length, dtype_bytes))
    if phase == "train":
        units.append(_embedding_gradient(arch))
        params = arch.vocab_size * arch.d_model * (1 if arch.tie_embeddings else 2) + arch.d_model
        units.append(Work("optimizer", "head", "optimizer", 1, 0.0, float(OPTIMIZER_BYTES_PER_PARAM * params)))
    return units


def _branches(cls: type[Primitive], config) -> list[tuple[type[Primitive], object]]:
    """A parallel layer's branches (each costed as its own primitive; the branches' output norms are not
    counted), or the primitive itself."""
    if issubclass(cls, ParallelPrimitive):
        return list(zip(cls.branch_classes, config.branches, strict=True))
    return [(cls, config)]


def _layer(cls: type[Primitive], config, phase: str, batch: int, length: int, dtype_bytes: int, n: int,
           activation_bytes: int, d_model: int) -> Work:
    tokens = batch * length if phase != "decode" else batch
    weights = cls.weight_bytes(config, dtype_bytes, tokens)
    if phase == "train":
        flops = cls.flops_per_token(config, length) * tokens
        moved = 3 * weights  # read by the forward and the backward, the gradient written
    elif phase == "prefill":
        flops = cls.forward_flops_per_token(config, length) * tokens
        moved = weights + batch * cls.inference_cache(config, dtype_bytes).bytes_at(length)  # the cache written
    else:
        flops = cls.decode_flops_per_token(config, length) * batch
        moved = weights + batch * cls.decode_cache_bytes(config, length, dtype_bytes)
    chunk = getattr(config, "chunk_size", None)
    chunks = math.ceil(length / chunk) if phase != "decode" and isinstance(chunk, int) and chunk > 0 else 1
    # a decoding step is one token per sequence, run whole (conv_step, the recurrent steps): no slices
    slices = () if phase == "decode" else tuple(cls.cpu_batch_slices(config, batch, length, activation_bytes).items())
    passes = 0.0 if phase == "decode" else float(batch * length * d_model * activation_bytes)
    return Work(cls.symbol, cls.symbol, phase, n, float(flops), float(moved), chunks, slices, passes)


def _head(arch: ArchConfig, phase: str, batch: int, length: int, dtype_bytes: int) -> Work:
    """Final norm and LM head (and the embedding lookup, free): over every position in training, over the last
    one only in prefill and decode (``ComposerModel.next_token_logits``)."""
    weights = arch.d_model * arch.vocab_size
    if phase == "train":
        return Work("head", "head", phase, 1, 6.0 * weights * batch * length, 3.0 * weights * dtype_bytes)
    return Work("head", "head", phase, 1, 2.0 * weights * batch, float(weights * dtype_bytes))


def _embedding_gradient(arch: ArchConfig) -> Work:
    """The embedding's backward writes a dense ``vocab x d_model`` gradient (zeros, then the looked-up rows added);
    a tied LM head's gradient is then added to it (both read, the sum written): 4 passes over the matrix, 1 when
    untied. Memory-bound work the head's matmuls do not show (at a 128K vocabulary on the CPU, half the head's
    training step). Its ops are counted with the head's."""
    passes = 4 if arch.tie_embeddings else 1
    return Work("embedding", "head", None, 1, 0.0, float(passes * arch.vocab_size * arch.d_model * GRAD_BYTES))


__all__ = ["GRAD_BYTES", "OPTIMIZER_BYTES_PER_PARAM", "PHASES", "Work", "step_work"]
