"""``benchmarks/finalist_costs.py``: the serving cost of finalists on their models at the target, and the stored
figures of docs/search.md recomputed with the accounting."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results"


def test_the_stored_costs_are_the_accountings(load_benchmark):
    script = load_benchmark("finalist_costs")
    stored = json.loads((RESULTS / "answer_trust-2026-11-27.json").read_text())["costs"]
    entries = [f"{row['name']}:{row['pattern']}" if row["name"] else row["pattern"] for row in stored["rows"]]
    again = script.measure(entries, stored["target"], decode=False)
    keys = ("at_target", "n_layers", "params", "kv_bytes_per_token", "state_bytes", "cache_bytes")
    assert [{k: row[k] for k in keys} for row in again] == [{k: row[k] for k in keys} for row in stored["rows"]]


def test_it_prints_a_table_and_writes_json_with_decode_speed(tmp_path, capsys, load_benchmark):
    script = load_benchmark("finalist_costs")
    assert script.main(["--target", "tiny", "AMSM", "nemotron-h:SMSAMS", "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("| pattern | at the target") and "(nemotron-h)" in printed
    rows = json.loads((tmp_path / "finalist_costs.json").read_text())["rows"]
    assert [row["pattern"] for row in rows] == ["AMSM", "SMSAMS"]
    assert all(row["decode"]["decode_tokens_per_s"] > 0 for row in rows)
    assert rows[1]["how"].startswith("nemotron-h's own layout")


@pytest.mark.parametrize("entry", ["nobody:AMAM"])
def test_an_unknown_family_is_a_usage_error(tmp_path, capsys, load_benchmark, entry):
    script = load_benchmark("finalist_costs")
    assert script.main(["--no-decode", entry, "--out", str(tmp_path)]) == 2
    assert "not a published family" in capsys.readouterr().err
