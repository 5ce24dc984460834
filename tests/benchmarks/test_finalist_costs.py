"""``benchmarks/finalist_costs.py``: the serving cost of finalists on their models at the target (analytic,
measured, and the cost model's prediction beside it), the stored figures of docs/search.md recomputed with the
accounting, and the predictions at other devices and sizes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from composer.costmodel import predict_decode, predict_train

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results"


def test_the_stored_costs_are_the_accountings(load_benchmark):
    script = load_benchmark("finalist_costs")
    stored = json.loads((RESULTS / "answer_trust-2026-11-27.json").read_text())["costs"]
    entries = [f"{row['name']}:{row['pattern']}" if row["name"] else row["pattern"] for row in stored["rows"]]
    again = script.measure(entries, stored["target"], measured=False)
    keys = ("at_target", "n_layers", "params", "kv_bytes_per_token", "state_bytes", "cache_bytes")
    assert [{k: row[k] for k in keys} for row in again] == [{k: row[k] for k in keys} for row in stored["rows"]]


def test_it_measures_predicts_and_writes_json(tmp_path, capsys, load_benchmark):
    script = load_benchmark("finalist_costs")
    assert script.main(["--target", "tiny", "--seq-len", "32", "SAMD:keep", "nemotron-h:SMSAMS",
                        "--predict", "h200@llama-350m", "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert "| layout | at the target" in printed and "(nemotron-h)" in printed and "h200 at llama-350m" in printed
    saved = json.loads((tmp_path / "finalist_costs.json").read_text())
    rows = saved["rows"]
    assert [row["pattern"] for row in rows] == ["SAMD", "SMSAMS"]
    assert rows[0]["how"].startswith("grown to the target's size with its 1 attention layer")
    assert rows[1]["how"].startswith("nemotron-h's own layout")
    for row in rows:  # the cost model's figures for the model measured, at the shapes it was measured at
        measured, predicted = row["measured"], row["predicted_here"]
        arch = script.model_at(row["entry"], "tiny")[2]
        assert arch.pattern == row["at_target"]
        shape = measured["train_tokens_per_s"]
        assert (shape["batch"], shape["seq_len"]) == (16, 32)  # 16 x 32 tokens: under the CPU's cut of 1,024
        assert predicted["train_tokens_per_s"] == pytest.approx(
            predict_train(arch, "cpu", batch=16, seq_len=32).tokens_per_s, rel=1e-9)
        assert set(predicted["decode_ms_per_token"]) == set(measured["decode_ms_per_token"]) == {"1", "64"}
        for batch, by_context in predicted["decode_ms_per_token"].items():
            assert set(by_context) == set(measured["decode_ms_per_token"][batch]) == {"32", "256"}
            for context, ms in by_context.items():
                assert ms == pytest.approx(
                    predict_decode(arch, "cpu", context=int(context), batch=int(batch)).ms_per_token, rel=1e-9)
        # both hold attention: a step reads more cache after more tokens, and a step of 64 sequences takes longer
        for batch in ("1", "64"):
            assert predicted["decode_ms_per_token"][batch]["32"] < predicted["decode_ms_per_token"][batch]["256"]
        assert predicted["decode_ms_per_token"]["1"]["256"] < predicted["decode_ms_per_token"]["64"]["256"]
    assert all(row["measured"]["dtype"] == "fp32" for row in rows)  # the CPU's default precision
    grown = saved["predicted"]["h200@llama-350m"]
    assert [row["pattern"] for row in grown] == ["SAMD", "SMSAMS"]
    assert grown[0]["at_target"].count("A") == 1 and grown[0]["n_layers"] > 4  # kept, grown to 350M
    for row in grown:  # the model grown to llama-350m, its figures the cost model's for the h200 after 4,096 tokens
        arch = script.model_at(row["entry"], "llama-350m")[2]
        assert (arch.pattern, row["n_layers"], row["context"]) == (row["at_target"], arch.n_layers, 4096)
        assert row["train_tokens_per_s"] == pytest.approx(predict_train(arch, "h200").tokens_per_s, rel=1e-9)
        for batch in ("1", "64"):
            assert row["decode_ms_per_token"][batch] == pytest.approx(
                predict_decode(arch, "h200", context=4096, batch=int(batch)).ms_per_token, rel=1e-9)
        assert row["decode_ms_per_token"]["1"] < row["decode_ms_per_token"]["64"]
    # one attention layer kept (SAMD) against nemotron-h's repeated ones: less cache at 32K, for a like size
    kept, nemotron = grown
    assert kept["cache_bytes_32k"] < nemotron["cache_bytes_32k"]
    assert kept["params"] == pytest.approx(nemotron["params"], rel=0.15)


def test_a_bad_prediction_target_is_a_usage_error(tmp_path, capsys, load_benchmark):
    script = load_benchmark("finalist_costs")
    assert script.main(["--no-measure", "AMAM", "--predict", "tpu@llama-350m", "--out", str(tmp_path)]) == 2
    assert "--predict takes DEVICE@PRESET" in capsys.readouterr().err


@pytest.mark.parametrize("entry", ["nobody:AMAM"])
def test_an_unknown_family_is_a_usage_error(tmp_path, capsys, load_benchmark, entry):
    script = load_benchmark("finalist_costs")
    assert script.main(["--no-measure", entry, "--out", str(tmp_path)]) == 2
    assert "not a published family" in capsys.readouterr().err


def test_it_times_in_the_precision_a_search_trains_in(tmp_path, load_benchmark):
    script = load_benchmark("finalist_costs")
    assert script.main(["--target", "tiny", "--seq-len", "16", "--train-batch", "2", "--precision", "bf16", "AMSM",
                        "--out", str(tmp_path)]) == 0
    measured = json.loads((tmp_path / "finalist_costs.json").read_text())["rows"][0]["measured"]
    assert measured["dtype"] == "bf16" and measured["train_dtype"] == "bf16 autocast, fp32 weights"
