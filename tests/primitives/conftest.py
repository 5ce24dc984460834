"""Shared references for the primitive tests."""

from __future__ import annotations

import math

import pytest
import torch

from primitives.attention import GroupedQueryAttention
from primitives.rope import apply_rotary, rotary_cos_sin


def naive_attention_reference(module: GroupedQueryAttention, x: torch.Tensor) -> torch.Tensor:
    """Masked softmax over explicit scores with the module's weights: causal, and for a module with a ``window``
    (sliding-window attention) keys ``i - window < j <= i`` only."""
    c = module.config
    b, s, _ = x.shape
    q, k, v = module.wqkv(x).view(b, s, -1, c.head_dim).split((c.n_heads, c.n_kv_heads, c.n_kv_heads), 2)
    cos, sin = rotary_cos_sin(module.inv_freq, s, x.dtype)
    q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
    group = c.n_heads // c.n_kv_heads
    k, v = k.repeat_interleave(group, dim=2), v.repeat_interleave(group, dim=2)
    scores = torch.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(c.head_dim)
    i, j = torch.arange(s)[:, None], torch.arange(s)[None, :]
    allowed = j <= i
    window = getattr(c, "window", None)
    if window is not None:
        allowed &= j > i - window
    weights = scores.masked_fill(~allowed, float("-inf")).softmax(-1)
    return module.wo(torch.einsum("bhqk,bkhd->bqhd", weights, v).reshape(b, s, -1))


@pytest.fixture
def naive_attention():
    """The reference above, as a fixture so that test modules (imported with importlib) share one copy."""
    return naive_attention_reference
