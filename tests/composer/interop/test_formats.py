from __future__ import annotations

import json

import pytest

from composer.cli import main
from composer.errors import ConfigError
from composer.interop.formats import convert, format_text
from composer.presets import get_preset, resolve_architecture

TINY = get_preset("tiny").arch


def test_megatron_writes_one_character_per_layer_for_a_s_m_e():
    out = convert(TINY.with_pattern("SMAESMAM"), "megatron")
    assert out["hybrid_override_pattern"] == "M-*EM-*-"
    args = out["args"]
    assert args["num-layers"] == 8 and args["hidden-size"] == 64 and args["num-query-groups"] == 2
    assert args["num-experts"] == 8 and args["moe-router-topk"] == 2 and args["mamba-state-dim"] == 64
    text = format_text(out)
    assert "--hybrid-override-pattern 'M-*EM-*-'" in text and "--swiglu" in text


def test_nemotron_h_at_8b_depth_is_its_published_pattern_shape():
    arch, _ = resolve_architecture("nemotron-h:52", "llama-3.1-8b", "tiny")
    pattern = convert(arch, "megatron")["hybrid_override_pattern"]
    assert len(pattern) == 52 and pattern.count("*") == 4 and pattern.count("M") == 24 and pattern.count("-") == 24


def test_hf_layer_types_name_each_decoder_layers_mixer_and_list_dense_ffns_beside_moe():
    out = convert(TINY.with_pattern("DEDEDEAM" + "WMSM"), "hf")
    assert out["layer_types"] == ["linear_attention"] * 3 + ["full_attention", "sliding_attention", "mamba"]
    assert out["num_hidden_layers"] == 6 and out["mlp_only_layers"] == [3, 4, 5] and out["sliding_window"] > 0
    assert "mlp_only_layers" not in convert(TINY.with_pattern("AMSM"), "hf")


def test_fla_lists_attention_layers_of_a_gated_deltanet_model():
    out = convert(TINY.with_pattern("DMDMAMDM"), "fla")
    assert out["model_type"] == "gated_deltanet" and out["num_hidden_layers"] == 4
    assert out["attn"] == {"layers": [2], "num_heads": 4, "num_kv_heads": 2, "window_size": None,
                           "rope_theta": TINY.rope_theta}
    windowed = convert(TINY.with_pattern("DMWM"), "fla")["attn"]
    assert windowed["layers"] == [1] and windowed["window_size"] > 0


@pytest.mark.parametrize("fmt, pattern, message", [
    ("megatron", "AMDM", "layer 2 (D)"),
    ("megatron", "WM", "layer 0 (W)"),
    ("hf", "AAMM", "layer 1 (A)"),
    ("hf", "MAMA", "layer 0 (M)"),
    ("hf", "AMA", "layer 2 (A)"),
    ("fla", "SMAM", "layer 0 (S)"),
    ("fla", "DEAM", "layer 1 (E)"),
    ("fla", "DMAMWM", "layer 4 (W)"),
])
def test_what_a_format_cannot_express_is_refused_naming_the_layer(fmt, pattern, message):
    with pytest.raises(ConfigError, match=rf"--format {fmt} cannot express {message.replace('(', '[(]').replace(')', '[)]')}"):
        convert(TINY.with_pattern(pattern), fmt)


def test_cli_format(capsys):
    assert main(["info", "jamba", "--preset", "tiny", "--format", "megatron", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["hybrid_override_pattern"].count("*") * 8 == len(out["hybrid_override_pattern"]) // 2
    assert main(["info", "(DM)x3 AM", "--preset", "tiny", "--format", "fla"]) == 0
    assert json.loads(capsys.readouterr().out)["attn"]["layers"] == [3]
    assert main(["info", "AAMM", "--preset", "tiny", "--format", "hf"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot express layer 1 (A)" in err
