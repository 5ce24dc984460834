"""Grouped-query attention against a naive reference, and its RoPE against Hugging Face's Llama-3 scaling."""

from __future__ import annotations

import pytest
import torch

from primitives.attention import AttentionConfig, GroupedQueryAttention
from primitives.base import InitScheme
from primitives.rope import RopeScaling, apply_rotary, inverse_frequencies, rotary_cos_sin, rotary_cos_sin_at


@pytest.mark.parametrize("n_kv_heads", [1, 2, 4])
def test_matches_naive_reference(n_kv_heads, naive_attention):
    config = AttentionConfig(d_model=32, n_heads=4, n_kv_heads=n_kv_heads, head_dim=8, rope_theta=10_000.0)
    module = GroupedQueryAttention(config)
    module.reset_parameters(InitScheme(std=0.2, n_layers=1))
    x = torch.randn(2, 11, 32)
    torch.testing.assert_close(module(x), naive_attention(module, x), atol=1e-5, rtol=1e-5)


def test_rope_rotation_is_relative():
    """q.k after RoPE depends only on the distance between positions."""
    inv_freq = inverse_frequencies(16, 10_000.0, None)
    cos, sin = rotary_cos_sin(inv_freq, 20, torch.float32)
    q, k = torch.randn(1, 1, 1, 16), torch.randn(1, 1, 1, 16)
    rq = apply_rotary(q.expand(1, 20, 1, 16), cos, sin)[0, :, 0]
    rk = apply_rotary(k.expand(1, 20, 1, 16), cos, sin)[0, :, 0]
    torch.testing.assert_close(rq[5] @ rk[2], rq[15] @ rk[12], atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_rope_at_a_tensor_position_is_the_tables_row_there(dtype):
    """A decoding step's cos/sin from its position as a tensor (0-d or [1]) are exactly the prefill table's."""
    inv_freq = inverse_frequencies(16, 500_000.0, RopeScaling())
    table = rotary_cos_sin(inv_freq, 3000, dtype)
    for pos in (0, 7, 2999):
        for position in (torch.tensor(pos), torch.tensor([pos])):
            at = rotary_cos_sin_at(inv_freq, position, dtype)
            for row, full in zip(at, table, strict=True):
                torch.testing.assert_close(row, full[pos : pos + 1], rtol=0, atol=0)


def test_llama3_scaling_matches_transformers():
    transformers = pytest.importorskip("transformers")
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    hf_config = transformers.LlamaConfig(
        hidden_size=2048, num_attention_heads=32, head_dim=64, max_position_embeddings=131072,
        rope_theta=500_000.0,
        rope_scaling={"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                      "original_max_position_embeddings": 8192},
    )
    expected, _ = ROPE_INIT_FUNCTIONS["llama3"](hf_config, "cpu")
    ours = inverse_frequencies(64, 500_000.0, RopeScaling(32.0, 1.0, 4.0, 8192))
    torch.testing.assert_close(ours, expected.float())


def test_flash_backend_refuses_cpu_with_a_clear_message():
    config = AttentionConfig(d_model=16, n_heads=2, n_kv_heads=1, head_dim=8, backend="flash")
    module = GroupedQueryAttention(config)
    with pytest.raises(RuntimeError, match="backend 'auto'"):
        module(torch.randn(1, 4, 16))


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"n_heads": 6, "n_kv_heads": 4}, "multiple of n_kv_heads"),
        ({"head_dim": 7}, "even"),
        ({"backend": "xformers"}, "unknown attention backend"),
    ],
)
def test_invalid_configs(kwargs, message):
    base = {"d_model": 16, "n_heads": 4, "n_kv_heads": 2, "head_dim": 8}
    with pytest.raises(ValueError, match=message):
        AttentionConfig(**{**base, **kwargs})


def test_kv_cache_bytes():
    config = AttentionConfig(d_model=2048, n_heads=32, n_kv_heads=8, head_dim=64)
    assert GroupedQueryAttention.inference_cache(config, dtype_bytes=2).bytes_per_token == 2048


def test_fused_rotary_split_matches_autograd_reference_in_float64():
    from primitives.rope import rotary_split_qkv

    n_heads, n_kv, head_dim, seq = 4, 2, 8, 7
    qkv = torch.randn(2, seq, n_heads + 2 * n_kv, head_dim, dtype=torch.float64, requires_grad=True)
    cos, sin = rotary_cos_sin(inverse_frequencies(head_dim, 10_000.0, None), seq, torch.float64)

    def reference(x):
        q, k, v = x.split((n_heads, n_kv, n_kv), dim=2)
        return apply_rotary(q, cos, sin), apply_rotary(k, cos, sin), v

    for ours, ref in zip(rotary_split_qkv(qkv, cos, sin, n_heads, n_kv), reference(qkv)):
        torch.testing.assert_close(ours, ref)
    assert torch.autograd.gradcheck(lambda x: rotary_split_qkv(x, cos, sin, n_heads, n_kv), (qkv,))


def test_head_entropy_is_log_of_visible_keys_for_uniform_attention_and_zero_for_one_key():
    """``head_entropy`` (issue 71's diagnostic): with q = k = 0 every query weighs its visible keys alike, so a head's
    entropy is the mean of log(position + 1) exactly; with one key far above the rest it is near 0."""
    config = AttentionConfig(d_model=16, n_heads=4, n_kv_heads=2, head_dim=8, rope_theta=10_000.0)
    attention = GroupedQueryAttention(config)
    torch.nn.init.zeros_(attention.wqkv.weight)
    seq = 12
    entropy = attention.head_entropy(torch.randn(2, seq, 16))
    assert entropy.shape == (4,)
    expected = sum(torch.log(torch.tensor(i + 1.0)) for i in range(seq)) / seq
    assert torch.allclose(entropy, expected.expand(4), atol=1e-5)
    # a sharp head: large q and k along one channel, every query picks the largest key -> entropy near 0
    torch.nn.init.normal_(attention.wqkv.weight, std=30.0)
    assert attention.head_entropy(torch.randn(2, seq, 16)).max() < 0.5 * expected
