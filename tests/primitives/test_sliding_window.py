"""Sliding-window attention: A's output when the window covers the sequence, a naive banded reference otherwise."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from composer.accounting import analyze
from composer.config import ArchConfig
from composer.errors import ConfigError
from composer.presets import get_preset
from primitives.attention import AttentionConfig, GroupedQueryAttention
from primitives.base import InitScheme
from primitives.sliding_window import SlidingWindowAttention, SlidingWindowConfig, sliding_window_mask

WIDTHS = {"d_model": 32, "n_heads": 4, "n_kv_heads": 2, "head_dim": 8, "rope_theta": 10_000.0}


def make(window: int, **overrides) -> SlidingWindowAttention:
    module = SlidingWindowAttention(SlidingWindowConfig(**{**WIDTHS, **overrides}, window=window))
    module.reset_parameters(InitScheme(std=0.2, n_layers=1))
    return module


def test_mask_is_banded_and_causal():
    mask = sliding_window_mask(5, 2)
    expected = torch.tensor(
        [[1, 0, 0, 0, 0], [1, 1, 0, 0, 0], [0, 1, 1, 0, 0], [0, 0, 1, 1, 0], [0, 0, 0, 1, 1]],
        dtype=torch.bool,
    )
    assert torch.equal(mask, expected)


@pytest.mark.parametrize("window", [11, 12, 4096])
def test_window_covering_the_sequence_is_exactly_full_attention(window):
    """Same weights, window >= seq: bit-identical to A (the same kernel call)."""
    sliding = make(window)
    full = GroupedQueryAttention(AttentionConfig(**WIDTHS))
    full.load_state_dict(sliding.state_dict())
    x = torch.randn(2, 11, 32)
    assert torch.equal(sliding(x), full(x))


@pytest.mark.parametrize("window, n_kv_heads", [(1, 2), (3, 2), (4, 1), (6, 4)])
def test_matches_naive_reference(window, n_kv_heads, naive_attention):
    module = make(window, n_kv_heads=n_kv_heads)
    x = torch.randn(2, 13, 32)
    torch.testing.assert_close(module(x), naive_attention(module, x), atol=1e-5, rtol=1e-5)


def test_window_one_sees_only_the_token_itself():
    """Softmax over a single key: the output is the token's own value, whatever the queries are."""
    module = make(1)
    x = torch.randn(1, 6, 32)
    c = module.config
    v = module.wqkv(x).view(1, 6, -1, c.head_dim)[:, :, c.n_heads + c.n_kv_heads :]
    v = v.repeat_interleave(c.n_heads // c.n_kv_heads, dim=2).reshape(1, 6, -1)
    torch.testing.assert_close(module(x), module.wo(v))


def test_causal_and_blind_beyond_the_window():
    """Output at position t depends on positions t - window + 1 .. t only."""
    window, t = 4, 9
    module = make(window).eval()
    x = torch.randn(2, 14, 32)
    with torch.no_grad():
        base = module(x)
        past = x.clone()
        past[:, t - window] = torch.randn(2, 32)  # one step outside the window of position t
        future = x.clone()
        future[:, t + 1 :] = torch.randn(2, 14 - t - 1, 32)
        inside = x.clone()
        inside[:, t - window + 1] = torch.randn(2, 32)  # the oldest position inside the window
        y_past, y_future, y_inside = module(past), module(future), module(inside)
    torch.testing.assert_close(y_past[:, t:], base[:, t:])  # positions >= t do not see t - window
    assert not torch.allclose(y_past[:, t - window : t], base[:, t - window : t])
    torch.testing.assert_close(y_future[:, : t + 1], base[:, : t + 1])
    assert not torch.allclose(y_inside[:, t], base[:, t])


def test_gradients_match_the_reference(naive_attention):
    module = make(3)
    x = torch.randn(2, 9, 32, requires_grad=True)
    (grad_ours,) = torch.autograd.grad(module(x).square().sum(), x)
    (grad_ref,) = torch.autograd.grad(naive_attention(module, x).square().sum(), x)
    torch.testing.assert_close(grad_ours, grad_ref, atol=1e-5, rtol=1e-5)


def test_accounting():
    window_config = SlidingWindowConfig(**WIDTHS, window=64)
    full_config = AttentionConfig(**WIDTHS)
    assert SlidingWindowAttention.param_count(window_config) == GroupedQueryAttention.param_count(full_config)
    # window >= seq_len: A's FLOPs exactly; longer sequences: the attention term tends to 12 * H * hd * window
    for seq in (16, 64):
        assert SlidingWindowAttention.flops_per_token(
            window_config, seq
        ) == GroupedQueryAttention.flops_per_token(full_config, seq)
    projections = 6 * GroupedQueryAttention.param_count(full_config)
    attention = SlidingWindowAttention.flops_per_token(window_config, 64 * 1024) - projections
    assert attention == pytest.approx(12 * 4 * 8 * 64, rel=1e-3)
    assert attention < GroupedQueryAttention.flops_per_token(full_config, 64 * 1024) - projections
    cache = SlidingWindowAttention.inference_cache(window_config, dtype_bytes=2)
    assert cache.window == 64 and cache.bytes_per_token == 2 * 2 * 8 * 2
    assert cache.bytes_at(10_000) == cache.bytes_at(64) == 64 * cache.bytes_per_token


def test_window_option_from_the_arch_and_bounded_cache_in_accounting():
    tiny = get_preset("tiny").arch
    arch = tiny.with_pattern("WMAM").replace(options={"W": {"window": 32}})
    (layer,) = [p for p in arch.primitive_configs().values() if isinstance(p, SlidingWindowConfig)]
    assert layer.window == 32
    stats = analyze(arch, seq_len=1024)
    per_token = 2 * tiny.n_kv_heads * tiny.head_dim * 2
    assert stats.kv_cache_bytes_per_token == per_token  # only A's cache grows with the context
    assert stats.cache_bytes_per_sequence == per_token * (1024 + 32)
    assert SlidingWindowConfig.from_arch(tiny).window == 4096


@pytest.mark.parametrize("window", [0, -3, 2.5, True])
def test_invalid_window_is_a_config_error(window):
    with pytest.raises(ConfigError, match="window must be a positive integer"):
        ArchConfig(
            **{**get_preset("tiny").arch.to_dict(), "pattern": "WM", "options": {"W": {"window": window}}}
        )


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_flash_window_matches_sdpa_on_cuda():
    pytest.importorskip("flash_attn")
    module = make(5, d_model=128, n_heads=4, n_kv_heads=2, head_dim=32).cuda().to(torch.bfloat16)
    x = torch.randn(2, 64, 128, device="cuda", dtype=torch.bfloat16)
    flash = module(x)
    sdpa = SlidingWindowAttention(dataclasses.replace(module.config, backend="sdpa"))
    sdpa = sdpa.cuda().to(torch.bfloat16)
    sdpa.load_state_dict(module.state_dict())
    torch.testing.assert_close(flash, sdpa(x), atol=2e-2, rtol=2e-2)


def test_head_entropy_sees_only_the_window():
    """A window of 4 keys: uniform attention's entropy is the mean of log(min(position + 1, 4)), not A's."""
    module = make(4)
    torch.nn.init.zeros_(module.wqkv.weight)
    seq = 10
    entropy = module.head_entropy(torch.randn(1, seq, module.config.d_model))
    expected = sum(torch.log(torch.tensor(min(i + 1, 4) * 1.0)) for i in range(seq)) / seq
    assert torch.allclose(entropy, expected.expand_as(entropy), atol=1e-5)
