from __future__ import annotations

from composer.accounting import analyze, default_seq_len
from composer.model import build_model
from composer.presets import get_preset


def test_issue_reference_figures():
    stats = analyze(get_preset("llama-3.2-1b").arch.with_pattern("AAMMMM"))
    assert stats.counts == {"A": 2, "M": 4}
    assert stats.non_embedding_params == 222_312_448
    assert stats.kv_cache_bytes_per_token == 4096


def test_non_embedding_excludes_untied_head():
    stats = analyze(get_preset("llama-3.1-8b").arch)
    assert stats.params - stats.non_embedding_params == 2 * 128_256 * 4096


def test_flops_follow_the_documented_formula():
    arch = get_preset("llama-3.2-1b").arch
    seq_len = 4096
    stats = analyze(arch, seq_len=seq_len)
    matmul_weights = stats.non_embedding_params - arch.d_model * (arch.n_layers + 1)  # minus norm weights
    head = arch.d_model * arch.vocab_size
    attention = 16 * 6 * arch.n_heads * arch.head_dim * seq_len
    assert stats.flops_per_token == 6 * (matmul_weights + head) + attention


def test_fewer_attention_layers_cost_less_cache_and_attention_flops():
    base = get_preset("llama-3.2-1b").arch
    llama, composite = analyze(base), analyze(base.with_pattern("(AAMMMM)x4 AMM"))
    assert composite.kv_cache_bytes_per_token * 16 == llama.kv_cache_bytes_per_token * 9
    assert composite.cache_bytes_per_sequence == composite.kv_cache_bytes_per_token * composite.seq_len


def test_default_seq_len_is_capped_by_max():
    assert default_seq_len(get_preset("llama-3.2-1b").arch) == 8192
    assert default_seq_len(get_preset("tiny").arch) == 1024


def test_counts_equal_numel_for_mixed_patterns():
    for pattern in ["A", "M", "AAMMMM", "MAMMA", "(AAMMMM)x2 AMM"]:
        arch = get_preset("tiny").arch.with_pattern(pattern)
        model = build_model(arch, device="meta")
        assert sum(p.numel() for p in model.parameters()) == analyze(arch).params


def test_active_params_count_only_the_routed_experts():
    from composer.presets import get_preset
    from primitives.moe import MoESwiGLU

    dense = analyze(get_preset("tiny").arch.with_pattern("AMAM"))
    assert dense.active_params == dense.params
    arch = get_preset("tiny").arch.with_pattern("AEAE")
    stats = analyze(arch)
    config = arch.primitive_configs()["E"]
    unused_per_layer = (config.n_experts - config.top_k) * 3 * config.d_model * config.expert_ffn_dim
    assert stats.active_params == stats.params - 2 * unused_per_layer
    assert stats.per_primitive["E"]["active_params_per_layer"] == MoESwiGLU.active_param_count(config) + arch.d_model
    assert stats.flops_per_token - dense.flops_per_token == 2 * (
        6 * MoESwiGLU.active_param_count(config) - 6 * (3 * arch.d_model * arch.ffn_dim))


def test_bytes_read_as_a_person_would():
    from composer.accounting import format_bytes

    assert [format_bytes(n) for n in (512, 1536, 3 * 1024**2)] == ["512 B", "1.5 KiB", "3.0 MiB"]
