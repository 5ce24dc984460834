"""composer import: transformers checkpoints of the Llama family as Composer models, with equal logits."""

from __future__ import annotations

import json

import pytest
import torch

transformers = pytest.importorskip("transformers")

from composer.cli import main  # noqa: E402
from composer.errors import ConfigError  # noqa: E402
from composer.interop.hf_import import arch_from_hf, compare_logits, import_hf  # noqa: E402
from composer.interop.model_dir import load_pretrained  # noqa: E402

SMALL = dict(vocab_size=96, hidden_size=64, intermediate_size=160, num_hidden_layers=3, num_attention_heads=4,
             num_key_value_heads=2, max_position_embeddings=128)


def save(tmp_path, config, name="hf", **save_options):
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config).float()
    with torch.no_grad():  # random norms, so a swapped norm weight cannot pass unnoticed
        for module_name, param in model.named_parameters():
            if "norm" in module_name:
                param.uniform_(0.5, 1.5)
    path = tmp_path / name
    model.save_pretrained(path, safe_serialization=True, **save_options)
    return path


@pytest.mark.parametrize("extra", [
    {},
    {"tie_word_embeddings": True},
    {"head_dim": 32, "rope_theta": 500000.0,
     "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                      "original_max_position_embeddings": 32}},
], ids=["untied", "tied", "llama3-rope-head-dim"])
def test_a_llama_imports_with_equal_logits_in_float32(tmp_path, extra):
    source = save(tmp_path, transformers.LlamaConfig(**SMALL, **extra))
    result = import_hf(source, tmp_path / "ours", verify=True)
    assert result.arch.pattern == "AM" * 3 and result.max_logit_difference < 1e-4
    assert result.arch.tie_embeddings == bool(extra.get("tie_word_embeddings", False))
    if "rope_scaling" in extra:
        assert result.arch.rope_scaling.factor == 8.0 and result.arch.head_dim == 32
    model = load_pretrained(tmp_path / "ours")
    assert sum(p.numel() for p in model.parameters()) == transformers.AutoModelForCausalLM.from_pretrained(
        source).num_parameters()


def test_a_sharded_checkpoint_imports(tmp_path):
    source = save(tmp_path, transformers.LlamaConfig(**SMALL), max_shard_size="40KB")
    assert (source / "model.safetensors.index.json").is_file()
    assert import_hf(source, tmp_path / "ours", verify=True).max_logit_difference < 1e-4


def test_mistral_with_a_sliding_window_imports_as_window_layers_with_equal_logits_past_the_window(tmp_path):
    source = save(tmp_path, transformers.MistralConfig(**SMALL, sliding_window=8))
    result = import_hf(source, tmp_path / "ours")
    assert result.arch.pattern == "WM" * 3 and result.arch.options == {"W": {"window": 8}}
    assert compare_logits(source, tmp_path / "ours", seq_len=48) < 1e-4  # 48 tokens: six windows


def test_the_tokenizer_travels_and_the_cli_prints_the_check(tmp_path, capsys):
    from composer.data.tokenizer import load_tokenizer, save_tokenizer_files

    source = save(tmp_path, transformers.LlamaConfig(**{**SMALL, "vocab_size": 320}))
    save_tokenizer_files(load_tokenizer("bytes"), source, 128)  # what a Hugging Face tokenizer directory holds
    assert main(["import", str(source), "--out", str(tmp_path / "ours"), "--verify", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["max_logit_difference"] < 1e-4 and "tokenizer.json" in report["tokenizer"]
    from composer.data.tokenizer import load_tokenizer_for

    assert load_tokenizer_for(tmp_path / "ours").encode_batch(["hi"]) == [[104, 105]]
    assert main(["import", str(source), "--out", str(tmp_path / "ours")]) == 2
    assert "not empty" in capsys.readouterr().err


@pytest.mark.parametrize("config, message", [
    ({"model_type": "qwen2"}, "q/k/v projections have biases"),
    ({"model_type": "qwen3"}, "q_norm, k_norm"),
    ({"model_type": "llama", "attention_bias": True}, "biases"),
    ({"model_type": "llama", "hidden_act": "gelu"}, "activation 'gelu'"),
    ({"model_type": "llama", "rope_scaling": {"rope_type": "yarn", "factor": 4.0}}, "RoPE scaling 'yarn'"),
])
def test_what_cannot_be_imported_exactly_is_refused_by_name(config, message):
    with pytest.raises(ConfigError, match=message):
        arch_from_hf({**SMALL, **config})


def test_not_a_checkpoint_is_one_line(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert main(["import", str(tmp_path / "empty"), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no config.json" in err
