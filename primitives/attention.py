"""``A``: causal grouped-query attention with RoPE (Llama-3 style, no biases).

The kernel is chosen per call: flash-attn when it is installed, the tensors are on CUDA and in half precision;
otherwise torch's ``scaled_dot_product_attention`` (which picks its own fused CPU/CUDA kernel).

Decoding (:class:`KVCache`): keys (already rotated) and values preallocated for ``max_len`` tokens, ``n_kv_heads``
wide; prefill runs the training kernel on the prompt, later tokens attend over the cache with SDPA.
:meth:`~GroupedQueryAttention.decode_step` is the static-shape step a compiled decoder runs: it writes at the
position given as a tensor and attends over the whole preallocated cache, the keys after it masked out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from primitives.base import CacheSpec, InitScheme, LayerCache, Primitive, check_cache_range
from primitives.rope import (
    RopeScaling,
    inverse_frequencies,
    rotary_cos_sin,
    rotary_cos_sin_at,
    rotary_split_qkv,
)

try:  # optional CUDA extra: pip install "composer-hnas[cuda]"
    from flash_attn import flash_attn_func
except (ImportError, OSError):  # not installed, or built against another torch/CUDA
    flash_attn_func = None

AttentionBackend = Literal["auto", "sdpa", "flash"]
_BACKENDS = ("auto", "sdpa", "flash")


@dataclass(frozen=True)
class AttentionConfig:
    d_model: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    rope_theta: float = 500_000.0
    rope_scaling: RopeScaling | None = None
    backend: AttentionBackend = "auto"

    def __post_init__(self) -> None:
        if min(self.d_model, self.n_heads, self.n_kv_heads, self.head_dim) <= 0:
            raise ValueError(f"attention widths must be positive, got {self}")
        if self.n_heads % self.n_kv_heads:
            raise ValueError(
                f"n_heads ({self.n_heads}) must be a multiple of n_kv_heads ({self.n_kv_heads})"
            )
        if self.head_dim % 2:
            raise ValueError(f"head_dim must be even for RoPE, got {self.head_dim}")
        if self.backend not in _BACKENDS:
            raise ValueError(f"unknown attention backend {self.backend!r}; choose one of {_BACKENDS}")

    @classmethod
    def from_arch(cls, arch, **options) -> AttentionConfig:
        return cls(
            d_model=arch.d_model,
            n_heads=arch.n_heads,
            n_kv_heads=arch.n_kv_heads,
            head_dim=arch.head_dim,
            rope_theta=arch.rope_theta,
            rope_scaling=arch.rope_scaling,
            **options,
        )


@dataclass
class KVCache(LayerCache):
    """Keys (rotated at their own positions) and values of up to ``max_len`` tokens, preallocated:
    ``k`` and ``v`` are ``[batch, max_len, n_kv_heads, head_dim]`` (grouped-query: ``n_kv_heads``, not
    ``n_heads``), position ``p`` at index ``p``."""

    k: torch.Tensor
    v: torch.Tensor


class GroupedQueryAttention(Primitive):
    """Causal GQA: ``n_heads`` query heads share ``n_kv_heads`` key/value heads."""

    symbol = "A"
    name = "attention"
    Config = AttentionConfig
    description = "causal grouped-query attention with RoPE"

    def __init__(self, config: AttentionConfig) -> None:
        super().__init__(config)
        c = config
        # q, k and v come from one fused projection: one large matmul is faster than three small ones.
        self.wqkv = nn.Linear(c.d_model, (c.n_heads + 2 * c.n_kv_heads) * c.head_dim, bias=False)
        self.wo = nn.Linear(c.n_heads * c.head_dim, c.d_model, bias=False)
        self.register_buffer("inv_freq", torch.empty(c.head_dim // 2), persistent=False)
        self._fill_inv_freq()

    def _fill_inv_freq(self) -> None:
        c = self.config
        if self.inv_freq.is_meta:
            return
        with torch.no_grad():
            self.inv_freq.copy_(inverse_frequencies(c.head_dim, c.rope_theta, c.rope_scaling))

    def reset_parameters(self, init: InitScheme) -> None:
        nn.init.normal_(self.wqkv.weight, std=init.std)
        nn.init.normal_(self.wo.weight, std=init.out_std)
        self._fill_inv_freq()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        c = self.config
        batch, seq, _ = x.shape
        q, k, v = self._project(x)
        out = self._attend(q, k, v)
        return self.wo(out.reshape(batch, seq, c.n_heads * c.head_dim))

    def _project(self, x: torch.Tensor, start_pos: int = 0) -> tuple[torch.Tensor, ...]:
        """Rotated q, rotated k and v ``[batch, seq, heads, head_dim]`` of tokens at ``start_pos ..``."""
        return self._rotated_qkv(x, *rotary_cos_sin(self.inv_freq, x.shape[1], x.dtype, start_pos))

    def _rotated_qkv(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> tuple[torch.Tensor, ...]:
        c = self.config
        batch, seq, _ = x.shape
        qkv = self.wqkv(x).view(batch, seq, c.n_heads + 2 * c.n_kv_heads, c.head_dim)
        return rotary_split_qkv(qkv, cos, sin, c.n_heads, c.n_kv_heads)

    # -- diagnostics ------------------------------------------------------------------------------------------
    def visible_keys(self, seq: int, device: torch.device) -> torch.Tensor:
        """Boolean ``[seq, seq]``: True where a query may attend a key in training (causal here)."""
        positions = torch.arange(seq, device=device)
        return positions[None, :] <= positions[:, None]

    @torch.no_grad()
    def head_entropy(self, x: torch.Tensor) -> torch.Tensor:
        """Each query head's attention entropy in nats (``[n_heads]``), averaged over the batch and the query
        positions of ``x`` (the layer's normed input, ``[batch, seq, d_model]``), with the weights computed
        explicitly (the training kernels never form them). A diagnostic: near 0 a head attends one key (often the
        first, an attention sink), near ``log(position + 1)`` it averages uniformly over what it sees; issue 71
        reads it to tell adjacent attention layers that collapse from ones that share the work."""
        c = self.config
        q, k, _ = self._project(x)
        k = k.repeat_interleave(c.n_heads // c.n_kv_heads, dim=2)
        scores = torch.einsum("bqhd,bkhd->bhqk", q.float(), k.float()) / math.sqrt(c.head_dim)
        scores = scores.masked_fill(~self.visible_keys(x.shape[1], x.device), float("-inf"))
        log_weights = torch.log_softmax(scores, dim=-1)
        entropy = -(log_weights.exp() * log_weights.nan_to_num(neginf=0.0)).sum(-1)  # [batch, heads, queries]
        return entropy.mean(dim=(0, 2))

    # -- incremental decoding -----------------------------------------------------------------------------
    def init_cache(self, batch, max_len, device=None, dtype=None) -> KVCache:
        c = self.config
        device, dtype = self._cache_placement(device, dtype)
        shape = (batch, max_len, c.n_kv_heads, c.head_dim)
        return KVCache(*(torch.zeros(shape, device=device, dtype=dtype) for _ in "kv"))

    def forward_cached(self, x: torch.Tensor, cache: KVCache, start_pos: int) -> torch.Tensor:
        """Write the new keys and values at their positions, then attend over every key up to each query."""
        c = self.config
        batch, n, _ = x.shape
        check_cache_range(cache.k.shape[1], start_pos, n, batch, cache.k.shape[0])
        q, k, v = self._project(x, start_pos)
        end = start_pos + n
        cache.k[:, start_pos:end] = k
        cache.v[:, start_pos:end] = v
        if start_pos == 0:  # prefill: the training kernel on the prompt alone
            out = self._attend(q, k, v)
        else:
            keys, values = cache.k[:, :end].to(q.dtype), cache.v[:, :end].to(q.dtype)
            mask = {}
            if n > 1:  # query i (position start_pos + i) sees keys 0 .. start_pos + i
                positions = torch.arange(end, device=x.device)
                mask["attn_mask"] = positions[None, :] <= positions[start_pos:, None]
            out = self._sdpa(q, keys, values, **mask)
        return self.wo(out.reshape(batch, n, c.n_heads * c.head_dim))

    def decode_step(self, x: torch.Tensor, cache: KVCache, pos: torch.Tensor) -> torch.Tensor:
        """:meth:`forward_cached` of one token at ``pos`` (a tensor) with fixed shapes: its key and value written
        at index ``pos`` and attention over all ``max_len`` cached keys, those after ``pos`` masked out (stale or
        zero), rather than over a slice whose length is the position. Masked keys cost their share of the
        arithmetic, which a step at batch 1 does not notice; the range is the caller's to check."""
        index = pos.reshape(1)
        visible = torch.arange(cache.k.shape[1], device=x.device) <= index
        return self._decode_over_cache(x, cache, pos, index, visible)

    def _decode_over_cache(self, x: torch.Tensor, cache: KVCache, pos: torch.Tensor, index: torch.Tensor,
                           visible: torch.Tensor) -> torch.Tensor:
        """One token at ``pos``: its key and value stored at cache index ``index`` (``[1]``), then attention over
        the cached keys where ``visible`` (``[cache length]``, boolean). ``A``'s and ``W``'s step alike."""
        c = self.config
        batch = x.shape[0]
        q, k, v = self._rotated_qkv(x, *rotary_cos_sin_at(self.inv_freq, pos, x.dtype))
        cache.k[:, index] = k.to(cache.k.dtype)  # index_put_: in place, and reinplaced by Inductor
        cache.v[:, index] = v.to(cache.v.dtype)
        keys, values = cache.k.to(q.dtype), cache.v.to(q.dtype)
        out = self._sdpa(q, keys, values, attn_mask=visible.view(1, 1, 1, -1))
        return self.wo(out.reshape(batch, 1, c.n_heads * c.head_dim))

    def _attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """Causal attention over ``[batch, seq, heads, head_dim]`` tensors, returned in the same layout."""
        if self._use_flash(q):
            return flash_attn_func(q, k, v, causal=True)
        return self._sdpa(q, k, v, is_causal=True)

    def _sdpa(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, **mask) -> torch.Tensor:
        """torch SDPA on ``[batch, seq, heads, head_dim]`` tensors; ``mask``: ``is_causal`` or ``attn_mask``."""
        out = F.scaled_dot_product_attention(
            q.transpose(1, 2),
            k.transpose(1, 2),
            v.transpose(1, 2),
            enable_gqa=self.config.n_kv_heads != self.config.n_heads,
            **mask,
        )
        return out.transpose(1, 2)

    def _use_flash(self, q: torch.Tensor) -> bool:
        backend = self.config.backend
        if backend == "sdpa":
            return False
        usable = flash_attn_func is not None and q.is_cuda and q.dtype in (torch.float16, torch.bfloat16)
        if backend == "flash" and not usable:
            raise RuntimeError(
                "attention backend 'flash' needs flash-attn installed (pip install 'composer-hnas[cuda]') "
                f"and CUDA fp16/bf16 inputs, got device={q.device} dtype={q.dtype}; use backend 'auto'"
            )
        return usable

    @classmethod
    def param_count(cls, config: AttentionConfig) -> int:
        c = config
        return c.d_model * (c.n_heads + 2 * c.n_kv_heads) * c.head_dim + c.n_heads * c.head_dim * c.d_model

    @classmethod
    def flops_per_token(cls, config: AttentionConfig, seq_len: int) -> int:
        # Projections: 6 FLOPs per weight (fwd 2 + bwd 4). Scores and weighted values: 2 matmuls of
        # 2 * heads * head_dim FLOPs per attended position; a causal token attends to seq_len / 2 positions
        # on average, so the forward pass costs 2 * heads * head_dim * seq_len and training 3x that.
        c = config
        return 6 * cls.param_count(c) + 6 * c.n_heads * c.head_dim * seq_len

    @classmethod
    def inference_cache(cls, config: AttentionConfig, dtype_bytes: int = 2) -> CacheSpec:
        return CacheSpec(bytes_per_token=2 * config.n_kv_heads * config.head_dim * dtype_bytes)

    @classmethod
    def decode_flops_per_token(cls, config: AttentionConfig, context: int) -> int:
        """The projections (2 per weight) and, per query head, scores and weighted values over the cached keys
        and the new one: ``4 * heads * head_dim * keys``. The part that grows with the context."""
        return 2 * cls.param_count(config) + 4 * config.n_heads * config.head_dim * cls._decode_keys(config, context)

    @classmethod
    def _decode_keys(cls, config: AttentionConfig, context: int) -> int:
        """Keys one decoding step attends to after ``context`` cached tokens: all of them and its own."""
        return context + 1
