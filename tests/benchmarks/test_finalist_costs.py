"""``benchmarks/finalist_costs.py``: the serving cost of finalists on their models at the target (analytic,
measured, and the cost model's prediction beside it), the stored figures of docs/search.md recomputed with the
accounting, and the predictions at other devices and sizes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

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
    for row in rows:
        measured, predicted = row["measured"], row["predicted_here"]
        assert measured["train_tokens_per_s"]["median"] > 0 and predicted["train_tokens_per_s"] > 0
        assert set(predicted["decode_ms_per_token"]) == set(measured["decode_ms_per_token"]) == {"1", "64"}
        assert set(predicted["decode_ms_per_token"]["1"]) == {"32", "256"}
    assert all(row["measured"]["dtype"] == "fp32" for row in rows)  # the CPU's default precision
    grown = saved["predicted"]["h200@llama-350m"]
    assert [row["pattern"] for row in grown] == ["SAMD", "SMSAMS"]
    assert grown[0]["at_target"].count("A") == 1 and grown[0]["n_layers"] > 4  # kept, grown to 350M
    assert all(row["decode_ms_per_token"]["64"] > 0 for row in grown)


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
