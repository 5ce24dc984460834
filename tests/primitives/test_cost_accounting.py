"""The primitives' accounting for the cost model (primitives/base.py: ``forward_flops_per_token``,
``decode_flops_per_token``, ``weight_bytes``, ``decode_cache_bytes``): what grows with the context and what does
not, and the bytes a decoding step moves against the cache a layer really allocates."""

from __future__ import annotations

import pytest
import torch

from composer.presets import get_preset
from primitives.registry import REGISTRY

SYMBOLS = list(REGISTRY.symbols) + ["[AS]", "[WD]"]


def config_of(symbol: str, preset: str = "demo-4m"):
    return get_preset(preset).arch.with_pattern(symbol).primitive_configs()[symbol]


@pytest.mark.parametrize("symbol", SYMBOLS)
def test_forward_is_a_third_of_training_and_weights_are_every_parameter(symbol):
    cls, config = REGISTRY.get(symbol), config_of(symbol)
    assert cls.forward_flops_per_token(config, 256) == cls.flops_per_token(config, 256) // 3
    assert cls.weight_bytes(config, 2) == 2 * cls.param_count(config)
    assert cls.decode_flops_per_token(config, 64) >= 2 * (cls.active_param_count(config) - 3 * config.d_model)


def test_attention_decode_grows_with_the_context_and_a_window_stops_it():
    attention, window = config_of("A"), config_of("W", "search-1m")  # search-1m: W's window is 64
    a, w = REGISTRY.get("A"), REGISTRY.get("W")
    assert a.decode_flops_per_token(attention, 1000) - a.decode_flops_per_token(attention, 0) == (
        4 * attention.n_heads * attention.head_dim * 1000)
    assert a.decode_cache_bytes(attention, 2000, 2) > a.decode_cache_bytes(attention, 1000, 2)
    assert w.decode_flops_per_token(window, 100) == w.decode_flops_per_token(window, 5000)
    assert w.decode_cache_bytes(window, 100, 2) == w.decode_cache_bytes(window, 5000, 2)
    assert w.decode_flops_per_token(window, 10) < w.decode_flops_per_token(window, 100)


@pytest.mark.parametrize("symbol", ["S", "D", "M", "E"])
def test_fixed_state_and_stateless_layers_move_the_same_bytes_at_any_context(symbol):
    cls, config = REGISTRY.get(symbol), config_of(symbol)
    assert cls.decode_cache_bytes(config, 16, 2) == cls.decode_cache_bytes(config, 100_000, 2)
    assert cls.decode_flops_per_token(config, 16) == cls.decode_flops_per_token(config, 100_000)
    state = cls.inference_cache(config, 2).fixed_bytes
    assert cls.decode_cache_bytes(config, 16, 2) == 2 * state  # read and written whole; 0 for M and E


@pytest.mark.parametrize("symbol", ["A", "W", "S", "D"])
def test_decode_bytes_are_what_the_allocated_cache_holds_read_plus_one_token_written(symbol):
    cls, config = REGISTRY.get(symbol), config_of(symbol, "search-1m")
    layer = cls(config)
    context = 96
    cache = layer.init_cache(1, context, dtype=torch.bfloat16)
    spec = cls.inference_cache(config, 2)
    assert cls.decode_cache_bytes(config, context, 2) == cache.nbytes() + spec.bytes_per_token + spec.fixed_bytes


def test_moe_reads_the_experts_its_tokens_are_routed_to():
    e, config = REGISTRY.get("E"), config_of("E")
    expert = 3 * config.d_model * config.expert_ffn_dim * 2
    router = config.d_model * config.n_experts * 2
    assert e.weight_bytes(config, 2, tokens=1) == router + config.top_k * expert
    assert e.weight_bytes(config, 2, tokens=10_000) == pytest.approx(e.weight_bytes(config, 2), rel=1e-9)


def test_a_parallel_layer_sums_its_branches():
    cls, config = REGISTRY.get("[AS]"), config_of("[AS]")
    a, s = config.branches
    attention, mamba = REGISTRY.get("A"), REGISTRY.get("S")
    assert cls.decode_flops_per_token(config, 500) == (attention.decode_flops_per_token(a, 500)
                                                       + mamba.decode_flops_per_token(s, 500))
    assert cls.decode_cache_bytes(config, 500, 2) == (attention.decode_cache_bytes(a, 500, 2)
                                                      + mamba.decode_cache_bytes(s, 500, 2))
