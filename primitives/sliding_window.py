"""``W``: causal sliding-window grouped-query attention with RoPE (Mistral / Gemma-2 local attention).

Each query attends to itself and the ``window - 1`` keys before it, so compute grows linearly with the context
and the inference KV cache is bounded by ``window`` tokens (the local layers of Gemma 2/3, Mistral 7B v0.1,
Samba). Everything else (fused qkv projection, GQA, RoPE, initialisation, parameter names) is ``A``'s, so a
checkpointed ``A`` layer loads into a ``W`` layer and vice versa.

``window`` (option ``arch.options["W"]["window"]``) defaults to 4096, the window of Mistral 7B v0.1 and of
Gemma 2's local layers. It counts the query's own position: ``window=1`` sees only the token itself. When the
window covers the whole sequence the layer computes exactly ``A``'s full causal attention (same kernel call).
At search widths (MAD sequences of 32-256 tokens) the default is full attention: set a window below the
search sequence length there, e.g. ``{"W": {"window": 32}}``, for ``W`` to differ from ``A``.

Decoding (:class:`RingKVCache`): keys and values of the last ``min(window, max_len)`` tokens in a ring buffer,
position ``p`` in slot ``p % slots``; the cache never grows past the window however long the generation.
:meth:`~SlidingWindowAttention.decode_step`, the static-shape step, writes slot ``pos % slots`` and attends over
the whole ring, the slots not yet written masked out.

Kernels: flash-attn with ``window_size=(window - 1, 0)`` when it is installed and the tensors are CUDA fp16/bf16
(the same automatic choice as ``A``); otherwise torch SDPA with a banded causal boolean mask. (torch's
``flex_attention`` has no CPU backward in torch 2.13, and SDPA with the mask costs about the same as SDPA's causal
kernel on CPU at seq 256 / window 64: 6.4 ms vs 6.3 ms forward+backward.)
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from primitives import attention as _attention
from primitives.attention import AttentionConfig, GroupedQueryAttention
from primitives.base import CacheSpec, LayerCache, check_cache_range

DEFAULT_WINDOW = 4096


@dataclass(frozen=True)
class SlidingWindowConfig(AttentionConfig):
    window: int = DEFAULT_WINDOW

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.window, int) or isinstance(self.window, bool) or self.window < 1:
            raise ValueError(
                f"window must be a positive integer (tokens, including the query's own), got {self.window!r}"
            )


def sliding_window_mask(seq_len: int, window: int, device: torch.device | str | None = None) -> torch.Tensor:
    """Boolean ``[seq_len, seq_len]`` mask, True where query ``i`` may attend key ``j``: ``i - window < j <= i``."""
    positions = torch.arange(seq_len, device=device)
    distance = positions[:, None] - positions[None, :]
    return (distance >= 0) & (distance < window)


@dataclass
class RingKVCache(LayerCache):
    """Keys (rotated) and values of the last ``slots = min(window, max_len)`` tokens, a ring buffer:
    ``k`` and ``v`` are ``[batch, slots, n_kv_heads, head_dim]``, position ``p`` in slot ``p % slots``."""

    k: torch.Tensor
    v: torch.Tensor
    max_len: int


class SlidingWindowAttention(GroupedQueryAttention):
    """Causal GQA restricted to the last ``window`` positions (the query's own included)."""

    symbol = "W"
    name = "sliding_window_attention"
    Config = SlidingWindowConfig
    description = "causal sliding-window grouped-query attention with RoPE"

    def visible_keys(self, seq: int, device: torch.device) -> torch.Tensor:
        return sliding_window_mask(seq, self.config.window, device)

    def _attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        window, seq = self.config.window, q.shape[1]
        if window >= seq:  # nothing falls out of the window: exactly full causal attention
            return super()._attend(q, k, v)
        if self._use_flash(q):
            return _attention.flash_attn_func(q, k, v, causal=True, window_size=(window - 1, 0))
        return self._sdpa(q, k, v, attn_mask=sliding_window_mask(seq, window, q.device))

    # -- incremental decoding -----------------------------------------------------------------------------
    def init_cache(self, batch, max_len, device=None, dtype=None) -> RingKVCache:
        c = self.config
        device, dtype = self._cache_placement(device, dtype)
        shape = (batch, min(c.window, max_len), c.n_kv_heads, c.head_dim)
        k, v = (torch.zeros(shape, device=device, dtype=dtype) for _ in "kv")
        return RingKVCache(k, v, max_len)

    def forward_cached(self, x: torch.Tensor, cache: RingKVCache, start_pos: int) -> torch.Tensor:
        """Attend over the ring (the tokens before ``start_pos`` still in the window) and the new tokens, then
        store the new tokens' keys and values over the oldest slots."""
        c = self.config
        batch, n, _ = x.shape
        slots = cache.k.shape[1]
        check_cache_range(cache.max_len, start_pos, n, batch, cache.k.shape[0])
        q, k, v = self._project(x, start_pos)
        if n == 1 and start_pos > 0:  # a decoding step: once written, every filled slot is in the window
            cache.k[:, start_pos % slots] = k[:, 0]
            cache.v[:, start_pos % slots] = v[:, 0]
            filled = min(start_pos + 1, slots)
            out = self._sdpa(q, cache.k[:, :filled].to(q.dtype), cache.v[:, :filled].to(q.dtype))
        else:
            if start_pos == 0:  # prefill: the training kernel on the prompt alone
                out = self._attend(q, k, v)
            else:  # several tokens: the ring and the new tokens, masked by position
                device = x.device
                last = start_pos - 1  # the position each slot holds (negative: never written)
                slot_pos = last - (last - torch.arange(slots, device=device)) % slots
                new_pos = torch.arange(start_pos, start_pos + n, device=device)
                distance = new_pos[:, None] - torch.cat([slot_pos, new_pos])[None, :]
                mask = (distance >= 0) & (distance < c.window)
                mask[:, :slots] &= slot_pos >= 0
                keys = torch.cat([cache.k.to(q.dtype), k], dim=1)
                values = torch.cat([cache.v.to(q.dtype), v], dim=1)
                out = self._sdpa(q, keys, values, attn_mask=mask)
            kept = min(n, slots)  # only the last ``slots`` new tokens can be in a later query's window
            index = torch.arange(start_pos + n - kept, start_pos + n, device=x.device) % slots
            cache.k[:, index] = k[:, n - kept :].to(cache.k.dtype)
            cache.v[:, index] = v[:, n - kept :].to(cache.v.dtype)
        return self.wo(out.reshape(batch, n, c.n_heads * c.head_dim))

    def decode_step(self, x: torch.Tensor, cache: RingKVCache, pos: torch.Tensor) -> torch.Tensor:
        """:meth:`forward_cached` of one token at ``pos`` (a tensor) with fixed shapes: its key and value in slot
        ``pos % slots``, then attention over the whole ring. Slots fill in order, so slot ``s`` holds a token
        once ``pos >= s``, and every token the ring holds is in the window (``slots <= window``): the slots
        after ``pos`` are the only ones masked out."""
        slots = cache.k.shape[1]
        index = pos.reshape(1) % slots
        visible = torch.arange(slots, device=x.device) <= pos.reshape(1)
        return self._decode_over_cache(x, cache, pos, index, visible)

    @classmethod
    def flops_per_token(cls, config: SlidingWindowConfig, seq_len: int) -> int:
        # As A: 6 FLOPs per projection weight, plus scores and weighted values, 2 matmuls of 2 * heads *
        # head_dim FLOPs per attended key in the forward pass, 3x for training: 12 * heads * head_dim * keys.
        # Keys per query, averaged over positions in A's continuous approximation: A counts seq_len / 2 (the
        # mean of min(t, seq_len) over t in [0, seq_len]); with w = min(window, seq_len) the mean of min(t, w)
        # is w - w^2 / (2 seq_len): A's count at w = seq_len, tending to w for sequences much longer than w.
        w = min(config.window, seq_len)
        attention = 6 * config.n_heads * config.head_dim * (2 * w * seq_len - w * w) // seq_len
        return 6 * cls.param_count(config) + attention

    @classmethod
    def inference_cache(cls, config: SlidingWindowConfig, dtype_bytes: int = 2) -> CacheSpec:
        per_token = GroupedQueryAttention.inference_cache(config, dtype_bytes).bytes_per_token
        return CacheSpec(bytes_per_token=per_token, window=config.window)

    @classmethod
    def _decode_keys(cls, config: SlidingWindowConfig, context: int) -> int:
        """``A``'s decode FLOPs over at most ``window`` keys (the new token's own included): flat once the
        context fills the window."""
        return min(context + 1, config.window)
