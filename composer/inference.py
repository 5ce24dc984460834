"""Incremental decoding of a :class:`~composer.model.ComposerModel`: the per-model inference cache, sampling and
the generation loop.

The cache holds one :class:`~primitives.base.LayerCache` per layer (``None`` for stateless layers such as ``M``
and ``E``) and the number of tokens it has seen. Every tensor is allocated once, by
:meth:`ComposerModel.init_cache <composer.model.ComposerModel.init_cache>`; prefill and decoding write into it in
place. Its :meth:`InferenceCache.nbytes` is exactly the analytic figure of :mod:`composer.accounting` for the
same batch, length and dtype: ``batch * analyze(arch, seq_len=max_len, cache_dtype_bytes=...)
.cache_bytes_per_sequence`` (``A`` preallocates ``max_len`` tokens, which is the analytic per-token cost at
``max_len``; ``W`` holds ``min(window, max_len)``; ``S`` and ``D`` their fixed states).

Typical use::

    cache = model.init_cache(batch=1, max_len=512)
    logits = model(prompt, cache=cache).logits          # prefill: logits of every prompt position
    logits = model(next_token, cache=cache).logits      # one decoding step
    tokens = model.generate(prompt, max_new_tokens=64)  # or the whole loop
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Protocol

import torch

from primitives.base import LayerCache, Primitive


class Decoder(Protocol):
    """What the generation loop needs of a model; :class:`~composer.model.ComposerModel` is one. The loop depends
    on these two methods, not on the model's module, so that the model can import the loop."""

    def init_cache(self, batch: int, max_len: int, device: torch.device | str | None = None,
                   dtype: torch.dtype | None = None) -> InferenceCache: ...

    def next_token_logits(self, input_ids: torch.Tensor, cache: InferenceCache) -> torch.Tensor: ...


class InferenceCache:
    """Per-layer caches of one model for ``batch`` sequences of up to ``max_len`` tokens, and ``pos``, the number
    of tokens of each sequence the layers have seen (the next token's position; equal for all sequences).

    Reuse: :meth:`reset` (or a forward at ``pos == 0``) starts new sequences in the same memory; a later
    forward or :meth:`ComposerModel.generate` with the same cache continues the sequences where they stopped.
    """

    def __init__(self, layers: Sequence[LayerCache | None], batch: int, max_len: int) -> None:
        self.layers = list(layers)
        self.batch = batch
        self.max_len = max_len
        self.pos = 0

    @classmethod
    def for_layers(
        cls,
        primitives: Iterable[Primitive],
        batch: int,
        max_len: int,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> InferenceCache:
        if not (isinstance(batch, int) and batch > 0 and isinstance(max_len, int) and max_len > 0):
            raise ValueError(f"batch and max_len must be positive integers, got {batch!r} and {max_len!r}")
        layers = [primitive.init_cache(batch, max_len, device, dtype) for primitive in primitives]
        return cls(layers, batch, max_len)

    @property
    def remaining(self) -> int:
        """Tokens that still fit."""
        return self.max_len - self.pos

    def layer_nbytes(self) -> list[int]:
        """Bytes allocated per layer (0 for a stateless layer)."""
        return [0 if cache is None else cache.nbytes() for cache in self.layers]

    def nbytes(self) -> int:
        """Bytes allocated by the whole cache (all layers, all sequences)."""
        return sum(self.layer_nbytes())

    def reset(self) -> None:
        """Start new sequences: position 0. (The next forward ignores what the layers hold; the tensors are
        zeroed anyway, so that a reset cache also reads as empty.)"""
        self.pos = 0
        for cache in self.layers:
            if cache is not None:
                cache.reset()

    def check(self, batch: int, n_tokens: int) -> None:
        """Raise unless ``n_tokens`` more tokens of ``batch`` sequences fit."""
        if batch != self.batch:
            raise ValueError(f"batch of {batch} sequences for an inference cache allocated for {self.batch}")
        if n_tokens > self.remaining:
            raise ValueError(
                f"{n_tokens} more tokens do not fit the inference cache: it holds {self.pos} of max_len "
                f"{self.max_len}; allocate a longer one with model.init_cache(batch, max_len)"
            )

    def __repr__(self) -> str:
        return (
            f"InferenceCache(batch={self.batch}, max_len={self.max_len}, pos={self.pos}, "
            f"nbytes={self.nbytes()})"
        )


# -- sampling -------------------------------------------------------------------------------------------------


def sample_next(
    logits: torch.Tensor,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """One token per row of ``logits [batch, vocab]``: the argmax when ``temperature == 0``, otherwise a draw
    from ``softmax(logits / temperature)`` restricted to the ``top_k`` most likely tokens and then to the
    smallest set whose probability reaches ``top_p`` (nucleus; the most likely token is always kept).
    ``generator`` (on the logits' device) makes draws reproducible. Returns ``[batch]`` (int64)."""
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0, got {temperature}")
    if top_k is not None and top_k < 1:
        raise ValueError(f"top_k must be a positive integer, got {top_k}")
    if top_p is not None and not 0 < top_p <= 1:
        raise ValueError(f"top_p must be in (0, 1], got {top_p}")
    logits = logits.float()
    if temperature == 0:
        return logits.argmax(dim=-1)
    logits = logits / temperature
    if top_k is not None and top_k < logits.shape[-1]:
        kth = logits.topk(top_k, dim=-1).values[..., -1:]
        logits = logits.masked_fill(logits < kth, -torch.inf)
    if top_p is not None and top_p < 1:
        sorted_logits, order = logits.sort(dim=-1, descending=True)
        probs = sorted_logits.softmax(dim=-1)
        before = probs.cumsum(dim=-1) - probs  # probability of the tokens ranked above
        drop_sorted = before >= top_p  # the first token has before == 0 < top_p: always kept
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
        logits = logits.masked_fill(drop, -torch.inf)
    probs = logits.softmax(dim=-1)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)


# -- generation -----------------------------------------------------------------------------------------------


@torch.no_grad()
def stream(
    model: Decoder,
    input_ids: torch.Tensor,
    max_new_tokens: int,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    eos: int | Iterable[int] | None = None,
    cache: InferenceCache | None = None,
    generator: torch.Generator | None = None,
    vocab_limit: int | None = None,
) -> Iterator[torch.Tensor]:
    """The generation loop as it runs: yields the next token of every sequence (``[batch]``) as soon as it is
    drawn, for callers that show text while it is generated (``composer generate``). ``input_ids`` is
    ``[batch, seq]``; the other arguments as in :meth:`ComposerModel.generate
    <composer.model.ComposerModel.generate>`. ``vocab_limit``: ids from there on are never drawn (the rows
    ``composer train`` pads the vocabulary with, which no tokenizer decodes)."""
    if input_ids.dim() != 2 or input_ids.shape[1] == 0:
        raise ValueError(f"input_ids must be [batch, seq] with seq >= 1, got shape {tuple(input_ids.shape)}")
    if max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be >= 0, got {max_new_tokens}")
    if max_new_tokens == 0:
        return
    batch, prompt_len = input_ids.shape
    fed = prompt_len + max_new_tokens - 1  # the last token is returned, never fed
    if cache is None:
        cache = model.init_cache(batch, fed, device=input_ids.device)
    cache.check(batch, fed)
    eos_ids = None
    if eos is not None:
        eos_ids = torch.tensor([eos] if isinstance(eos, int) else list(eos), device=input_ids.device)
    finished = torch.zeros(batch, dtype=torch.bool, device=input_ids.device)

    step_input = input_ids
    for step in range(max_new_tokens):
        logits = model.next_token_logits(step_input, cache)
        if vocab_limit is not None and vocab_limit < logits.shape[-1]:
            logits[:, vocab_limit:] = -torch.inf
        token = sample_next(logits, temperature, top_k, top_p, generator)
        if eos_ids is not None:  # a finished sequence repeats its eos
            token = torch.where(finished, eos_ids[0], token)
            finished |= torch.isin(token, eos_ids)
        yield token
        if eos_ids is not None and bool(finished.all()):
            return
        if step + 1 < max_new_tokens:
            step_input = token[:, None]


def generate(
    model: Decoder,
    input_ids: torch.Tensor,
    max_new_tokens: int,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    eos: int | Iterable[int] | None = None,
    cache: InferenceCache | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """See :meth:`ComposerModel.generate <composer.model.ComposerModel.generate>`: :func:`stream`, collected."""
    squeeze = input_ids.dim() == 1
    batched = input_ids.unsqueeze(0) if squeeze else input_ids
    tokens = list(stream(model, batched, max_new_tokens, temperature, top_k, top_p, eos, cache, generator))
    out = torch.stack(tokens, dim=1) if tokens else batched.new_empty(batched.shape[0], 0)
    return out[0] if squeeze else out
