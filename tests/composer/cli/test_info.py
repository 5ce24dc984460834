from __future__ import annotations

import json
import subprocess
import sys

import pytest

from composer.cli import main


def run_json(capsys, *argv):
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_preset_json(capsys):
    data = run_json(capsys, "info", "llama-3.2-1b")
    assert data["params"] == 1_235_814_400
    assert data["counts"] == {"A": 16, "M": 16}
    assert data["pattern"] == "AM" * 16 and data["compact"] == "(AM)x16"
    for key in ("non_embedding_params", "flops_per_token", "kv_cache_bytes_per_token"):
        assert isinstance(data[key], int) and data[key] > 0


def test_pattern_at_preset_widths_json(capsys):
    data = run_json(capsys, "info", "AAMMMM", "--preset", "llama-3.2-1b")
    assert data["counts"] == {"A": 2, "M": 4}
    assert data["non_embedding_params"] == 222_312_448
    assert data["kv_cache_bytes_per_token"] == 4096


def test_seq_len_and_cache_dtype(capsys):
    short = run_json(capsys, "info", "tiny", "--seq-len", "128")
    long = run_json(capsys, "info", "tiny", "--seq-len", "512", "--cache-precision", "fp32")
    assert short["seq_len"] == 128 and long["flops_per_token"] > short["flops_per_token"]
    assert long["kv_cache_bytes_per_token"] == 2 * short["kv_cache_bytes_per_token"]


def test_human_output(capsys):
    assert main(["info", "(AM)x16", "--preset", "llama-3.2-1b"]) == 0
    out = capsys.readouterr().out
    assert "1,235,814,400" in out and "(AM)x16" in out and "32,768 bytes" in out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["info", "AQM"], "unknown primitive 'Q' at position 1"),
        (["info", "llama-1b"], "neither a preset"),
        (["info", "AM", "--preset", "nope"], "unknown preset 'nope'"),
        (["info", "tiny", "--preset", "tiny"], "is a preset already"),
        (["info", "tiny", "--seq-len", "0"], "--seq-len must be a positive integer"),
    ],
)
def test_usage_errors_exit_2_with_one_line(capsys, argv, message):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


def test_console_script_help_lists_subcommands():
    result = subprocess.run([sys.executable, "-m", "composer", "--help"], capture_output=True, text=True)
    assert result.returncode == 0
    assert "info" in result.stdout and "presets" in result.stdout
    bad = subprocess.run([sys.executable, "-m", "composer", "info", "AQM"], capture_output=True, text=True)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr


def test_every_primitive_reports_its_own_cache_or_state(capsys):
    """Issue 6's check: one JSON object with counts for every registered symbol and, per mixing primitive, a
    KV cache per token (bounded by a window for W) or a fixed recurrent state (S, D)."""
    from primitives.registry import REGISTRY

    symbols = REGISTRY.symbols
    assert main(["info", symbols, "--preset", "tiny", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["counts"] == {symbol: 1 for symbol in symbols}
    per = data["per_primitive"]
    assert set(per) == set(symbols)
    assert sum(p["params_per_layer"] for p in per.values()) + 64 == data["non_embedding_params"]
    assert per["A"]["kv_bytes_per_token"] > 0 and per["A"]["window"] is None and per["A"]["state_bytes"] == 0
    assert per["M"]["kv_bytes_per_token"] == 0 and per["M"]["state_bytes"] == 0
    if "W" in per:
        assert per["W"]["kv_bytes_per_token"] == per["A"]["kv_bytes_per_token"] and per["W"]["window"] > 0
    for recurrent in set("SD") & set(per):
        assert per[recurrent]["state_bytes"] > 0 and per[recurrent]["kv_bytes_per_token"] == 0
    assert data["state_bytes_per_sequence"] == sum(p["state_bytes"] * p["layers"] for p in per.values())


# -- --device: the cost model's predictions beside the accounting (composer/costmodel) -------------------------
def test_device_json_carries_the_predictions_keyed_by_batch_and_their_sources(capsys):
    data = run_json(capsys, "info", "SADDDD", "--preset", "llama-3.2-1b", "--cost-device", "h200")
    assert data["device"] == "h200" and data["context"] == 4096 and data["params"] > 0  # beside the accounting
    assert data["train_tokens_per_s"] > 0 and (data["train_batch"], data["train_seq_len"]) == (8, 2048)
    assert set(data["decode_ms_per_token"]) == {"1", "64"} == set(data["prefill_tokens_per_s"])
    assert 0 < data["decode_ms_per_token"]["1"] < data["decode_ms_per_token"]["64"]
    sources = data["cost_sources"]
    assert data["cost_constants"] and all(c["source"] in sources for c in data["cost_constants"].values())
    assert sources[data["cost_constants"]["h200.peak_flops"]["source"]]["kind"] == "datasheet"


def test_device_context_is_capped_by_the_models_max_seq_len(capsys):
    data = run_json(capsys, "info", "AMSD", "--preset", "demo-4m", "--cost-device", "cpu")  # max_seq_len 2048
    assert data["context"] == 2047 and data["threads"] == 1  # the step after 2,047 tokens writes the last one


def test_device_text_rows_follow_the_accounting(capsys):
    assert main(["info", "AAMMMM", "--preset", "llama-3.2-1b", "--cost-device", "h100"]) == 0
    out = capsys.readouterr().out
    assert out.index("cache/sequence") < out.index("train (model)") < out.index("decode (model)")
    assert "ms/token at batch 1" in out and "ms/token at batch 64" in out and "after 4,096 tokens" in out
    assert main(["info", "AAMMMM", "--preset", "llama-3.2-1b"]) == 0
    assert "(model)" not in capsys.readouterr().out  # without --device: unchanged


def test_an_unknown_device_is_a_usage_error_naming_the_choices(capsys):
    assert main(["info", "AM", "--preset", "tiny", "--cost-device", "tpu"]) == 2
    err = capsys.readouterr().err
    assert "unknown device 'tpu'; choose one of: cpu, h100, h200" in err and err.count("\n") == 1


def test_a_pattern_at_a_depth_is_accounted_at_the_widths_that_size_it(capsys):
    data = run_json(capsys, "info", "SADDDD", "--preset", "demo-4m", "--depth-at-target", "16",
                    "--attention-at-target", "keep")
    assert data["n_layers"] == 16 and data["arch"]["d_model"] == 280 and data["pattern"].count("A") == 1
    own = run_json(capsys, "info", "SADDDD", "--preset", "demo-4m")
    assert own["arch"]["d_model"] == 192 and own["n_layers"] == 6
    assert main(["info", "demo-4m", "--depth-at-target", "16"]) == 2
    assert "give a pattern, not a preset" in capsys.readouterr().err
