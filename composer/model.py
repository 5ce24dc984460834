"""The composed language model: embedding -> pre-norm residual layers (one primitive each) -> norm -> LM head.

Readable top to bottom on purpose; parallelism, activation checkpointing and compilation are applied from the
outside (training engine), as in torchtitan.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from composer.config import ArchConfig
from composer.inference import InferenceCache
from composer.inference import generate as _generate
from composer.loss import IGNORE_INDEX, cross_entropy
from primitives.base import InitScheme, LayerCache, Primitive
from primitives.registry import REGISTRY



class CausalLMOutput(NamedTuple):
    """Output of a causal LM forward.

    ``loss`` is the training objective, ``lm_loss + aux_loss``, so any loop that calls ``loss.backward()`` also
    trains the auxiliary terms (MoE load balancing); ``lm_loss`` is the cross-entropy alone, the number to
    compare across architectures (validation). ``aux_loss`` is the sum of the layers' auxiliary losses (a zero
    tensor when no layer has one). The last two default to ``None`` so ``CausalLMOutput(logits, loss)`` still works
    for models without auxiliary losses.
    """

    logits: torch.Tensor
    loss: torch.Tensor | None
    lm_loss: torch.Tensor | None = None
    aux_loss: torch.Tensor | None = None


class ResidualLayer(nn.Module):
    """``x + primitive(rmsnorm(x))``: the unit every pattern symbol becomes, and the unit FSDP shards."""

    def __init__(self, primitive: Primitive, d_model: int, norm_eps: float) -> None:
        super().__init__()
        self.norm = nn.RMSNorm(d_model, eps=norm_eps)
        self.primitive = primitive
        # Set by the training engine: recompute this layer's activations in backward. A flag rather than a
        # wrapper module so parameter names (and so checkpoints and no-weight-decay names) do not change.
        self.activation_checkpointing = False

    @property
    def symbol(self) -> str:
        return self.primitive.symbol

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.activation_checkpointing and self.training and torch.is_grad_enabled():
            return checkpoint(self._residual, x, use_reentrant=False)
        return self._residual(x)

    def _residual(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.primitive(self.norm(x))

    def forward_cached(self, x: torch.Tensor, cache: LayerCache | None, start_pos: int) -> torch.Tensor:
        """The same residual for new tokens at ``start_pos ..``, the primitive reading and updating ``cache``."""
        return x + self.primitive.forward_cached(self.norm(x), cache, start_pos)

    def decode_step(self, x: torch.Tensor, cache: LayerCache | None, pos: torch.Tensor) -> torch.Tensor:
        """The residual of one decoding token at position ``pos`` (a tensor), with fixed shapes
        (:meth:`Primitive.decode_step <primitives.base.Primitive.decode_step>`)."""
        return x + self.primitive.decode_step(self.norm(x), cache, pos)


class ComposerModel(nn.Module):
    """A causal language model whose layers follow ``arch.pattern``.

    Built under ``torch.device("meta")`` it allocates nothing (for accounting or before FSDP sharding); call
    :meth:`init_weights` after ``to_empty(device=...)`` to materialise it.
    """

    def __init__(self, arch: ArchConfig) -> None:
        super().__init__()
        self.arch = arch
        configs = arch.primitive_configs()
        self.tok_embeddings = nn.Embedding(arch.vocab_size, arch.d_model)
        self.layers = nn.ModuleList(
            ResidualLayer(REGISTRY.get(symbol)(configs[symbol]), arch.d_model, arch.norm_eps)
            for symbol in arch.layers
        )
        self.norm = nn.RMSNorm(arch.d_model, eps=arch.norm_eps)
        self.output = None if arch.tie_embeddings else nn.Linear(arch.d_model, arch.vocab_size, bias=False)
        if not self.tok_embeddings.weight.is_meta:
            self.init_weights()

    @torch.no_grad()
    def init_weights(self) -> None:
        """Initialise every parameter; each primitive initialises its own body."""
        arch = self.arch
        init = InitScheme(std=arch.init_std, n_layers=arch.n_layers)
        nn.init.normal_(self.tok_embeddings.weight, std=arch.init_std)
        for layer in self.layers:
            layer.norm.reset_parameters()
            layer.primitive.reset_parameters(init)
        self.norm.reset_parameters()
        if self.output is not None:
            nn.init.normal_(self.output.weight, std=arch.d_model**-0.5)

    def forward(
        self,
        input_ids: torch.Tensor,
        targets: torch.Tensor | None = None,
        cache: InferenceCache | None = None,
    ) -> CausalLMOutput:
        """Logits ``[batch, seq, vocab]`` and, given ``targets`` (``-100`` = ignore), the losses.

        ``lm_loss`` is the mean cross-entropy; ``loss`` adds the layers' auxiliary losses (see
        :class:`CausalLMOutput`). With a ``cache`` (:meth:`init_cache`), ``input_ids`` are the tokens that
        follow the ``cache.pos`` tokens it has seen: the logits are those of these new positions, the same as a
        full forward over the whole sequence gives there, and the cache advances past them. The cached path is
        for inference: it computes no gradients.
        """
        if cache is not None and torch.is_grad_enabled():
            with torch.no_grad():
                return self.forward(input_ids, targets, cache)
        h = self.hidden_states(input_ids, cache)
        logits, lm_loss = self.logits_and_loss(h, targets)
        aux_loss = self.collect_aux_loss()
        loss = None
        if lm_loss is not None:
            loss = lm_loss if aux_loss is None else lm_loss + aux_loss
        if aux_loss is None:
            aux_loss = torch.zeros((), device=logits.device)
        return CausalLMOutput(logits, loss, lm_loss, aux_loss)

    def hidden_states(self, input_ids: torch.Tensor, cache: InferenceCache | None = None) -> torch.Tensor:
        """Embedding and layers, before the final norm: ``[batch, seq, d_model]``."""
        h = self.tok_embeddings(input_ids)
        if cache is None:
            for layer in self.layers:
                h = layer(h)
            return h
        batch, seq = input_ids.shape
        cache.check(batch, seq)
        with torch.no_grad():  # the cache is written in place; it must not join an autograd graph
            for layer, layer_cache in zip(self.layers, cache.layers, strict=True):
                h = layer.forward_cached(h, layer_cache, cache.pos)
        cache.pos += seq
        return h

    # -- generation (the loop and sampling live in composer/inference.py) ---------------------------------
    def init_cache(
        self,
        batch: int,
        max_len: int,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> InferenceCache:
        """An empty inference cache for ``batch`` sequences of up to ``max_len`` tokens (prompt and generated),
        on the model's device and in its dtype unless given."""
        primitives = (layer.primitive for layer in self.layers)
        return InferenceCache.for_layers(primitives, batch, max_len, device, dtype)

    def next_token_logits(self, input_ids: torch.Tensor, cache: InferenceCache) -> torch.Tensor:
        """Logits ``[batch, vocab]`` of the token after ``input_ids`` (fed through ``cache``); the LM head runs
        on the last position only."""
        h = self.hidden_states(input_ids, cache)[:, -1:]
        return self.logits_and_loss(h, None)[0][:, -1]

    def decode_step(self, token_ids: torch.Tensor, cache: InferenceCache, pos: torch.Tensor) -> torch.Tensor:
        """Logits ``[batch, vocab]`` of the token after ``token_ids [batch, 1]``, fed at position ``pos`` (a 0-d
        int64 tensor on the model's device) through ``cache``: :meth:`next_token_logits` of one token, with
        every shape fixed and the position a tensor, so that ``torch.compile`` builds one graph for all
        positions and a CUDA graph can replay it (:func:`composer.inference.compile_decode_step`).

        It neither reads nor advances ``cache.pos`` (a Python int, which a compiled step would bake in): the
        caller passes ``pos == cache.pos``, checks that the token fits, and advances ``cache.pos`` after."""
        with torch.no_grad():  # the cache is written in place; it must not join an autograd graph
            h = self.tok_embeddings(token_ids)
            for layer, layer_cache in zip(self.layers, cache.layers, strict=True):
                h = layer.decode_step(h, layer_cache, pos)
            return self.logits_and_loss(h, None)[0][:, -1]

    def generate(
        self,
        input_ids: torch.Tensor,
        max_new_tokens: int,
        temperature: float = 1.0,
        top_k: int | None = None,
        top_p: float | None = None,
        eos: int | Sequence[int] | None = None,
        cache: InferenceCache | None = None,
        generator: torch.Generator | None = None,
    ) -> torch.Tensor:
        """Continue ``input_ids [batch, seq]`` (or ``[seq]``) by up to ``max_new_tokens`` tokens; returns the new
        tokens only, ``[batch, n]`` (or ``[n]``).

        The prompt is prefilled in one chunked pass, then one token per step. ``temperature == 0`` is greedy
        (argmax); otherwise tokens are drawn from the softmax at ``temperature``, restricted by ``top_k`` and
        ``top_p`` (nucleus), with ``generator`` for reproducible draws. ``eos`` (one id or several): a sequence
        that produced one repeats it from then on, and generation stops early once every sequence has, so
        ``n <= max_new_tokens``.

        The prompts of a batch must have equal lengths (no padding or attention mask is supported). Without a
        ``cache`` one of exactly the needed length is allocated. With one, ``input_ids`` continue the sequences
        it holds (a fresh or :meth:`~composer.inference.InferenceCache.reset` cache starts new ones); the last
        returned token is not fed to it, so a later call continues with ``input_ids = out[:, -1:]``.
        """
        return _generate(self, input_ids, max_new_tokens, temperature, top_k, top_p, eos, cache, generator)

    def logits_and_loss(
        self, h: torch.Tensor, targets: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Final norm, LM head and cross-entropy: a method of its own so compilation can fuse the three."""
        h = self.norm(h)
        head = self.tok_embeddings.weight if self.output is None else self.output.weight
        logits = F.linear(h, head)
        return logits, None if targets is None else cross_entropy(logits, targets, IGNORE_INDEX)

    @property
    def has_aux_loss(self) -> bool:
        """Whether some layer's primitive adds an auxiliary training loss (e.g. ``E``'s load balancing)."""
        return any(hasattr(layer.primitive, "aux_loss") for layer in self.layers)

    def collect_aux_loss(self) -> torch.Tensor | None:
        """Sum of the auxiliary losses the layers stored in their latest forward; ``None`` when none has one.

        Protocol: a primitive with an auxiliary loss has an ``aux_loss`` attribute and sets it to a scalar tensor
        (already scaled by its coefficient) in every forward. Read here right after the layers ran, it is the
        tensor of the graph being built. Under activation checkpointing the backward pass recomputes the
        layer's forward and overwrites the attribute, but the sum used in the loss was taken before, so the
        recomputation neither changes nor double-counts it.
        """
        terms = [layer.primitive.aux_loss for layer in self.layers if hasattr(layer.primitive, "aux_loss")]
        terms = [term for term in terms if term is not None]
        return torch.stack(terms).sum() if terms else None

    def no_weight_decay(self) -> set[str]:
        """Full names of parameters AdamW must not decay: all norms plus what each primitive names."""
        names = {"norm.weight"}
        for i, layer in enumerate(self.layers):
            names.add(f"layers.{i}.norm.weight")
            names.update(f"layers.{i}.primitive.{name}" for name in layer.primitive.no_weight_decay())
        return names

    def parameter_groups(self, weight_decay: float) -> list[dict]:
        """Two AdamW groups: decayed and not decayed (names from :meth:`no_weight_decay`)."""
        skip = self.no_weight_decay()
        decay, no_decay = [], []
        for name, param in self.named_parameters():
            if param.requires_grad:
                (no_decay if name in skip else decay).append(param)
        return [
            {"params": decay, "weight_decay": weight_decay},
            {"params": no_decay, "weight_decay": 0.0},
        ]


def build_model(arch: ArchConfig, device: torch.device | str | None = None) -> ComposerModel:
    """Build ``arch`` on ``device``; ``"meta"`` gives a shape-only model that allocates no weights."""
    with torch.device(device or "cpu"):
        return ComposerModel(arch)
