"""benchmarks/equal_cost_search.py: a search's answer paired with the families only where both trained the same.

The search directory is rebuilt from the committed result (the files a finished search writes, with the fields the
script reads), so the test runs in a second and checks the script against figures a real search produced."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from composer.statistics import paired_difference

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results"


def write_search(out: Path, reference_drift: float = 0.0) -> dict:
    """A finished search's best.json, leaderboard.json and config.json, from equal_cost_search-2026-12-07.json."""
    data = json.loads((RESULTS / "equal_cost_search-2026-12-07.json").read_text())
    search = data["search"]
    rows = []
    for row in search["finalists"]:
        losses = dict(row["losses"])
        if row["known"] == "nemotron-h":
            losses["1"] += reference_drift
        rows.append({"pattern": row["pattern"], "known": row["known"], "target_pattern": row["trained_as"],
                     "target_widths": row["widths"], "lr": row["lr"], "evidence": {"scores": losses},
                     "trained_recall": {"value": row["trained_recall"]},
                     "cost": {"non_embedding_params": row["non_embedding_params"], "params": row["params"],
                              "measured": {"train_tokens_per_s": {"median": 1.0}}}})
    best = {"vs_known": {"recommended": search["answer"], "verdict": search["verdict"],
                         "held_out": search["held_out"]},
            "best_known": {"pattern": "SMSAMS", "name": "nemotron-h"},
            "min_recall": {**search["min_recall"], "recall": {}}, "equal_cost": search["rule"],
            "rungs": search["rungs"]}
    config = {"primitives": "AMSD", "attention_at_target": "keep", "max_kv": "10MiB@32K", "min_recall": "known",
              "confirm_seeds": 3, "precision": "fp32", "workers": 2, "equal_cost": "nemotron-h",
              "deployed_at": "llama-3.2-1b", "cost_device": "cpu"}
    out = out / "search"
    out.mkdir()
    for name, content in (("best.json", best), ("leaderboard.json", rows), ("config.json", config)):
        (out / name).write_text(json.dumps(content))
    return data


def test_the_answer_pairs_with_every_family_seed_by_seed(tmp_path, load_benchmark):
    bench = load_benchmark("equal_cost_search")
    data = write_search(tmp_path)
    result = bench.compare(tmp_path / "search", RESULTS / "equal_cost_families-2026-12-07.json")
    families = json.loads((RESULTS / "equal_cost_families-2026-12-07.json").read_text())["arms"]
    answer = next(row for row in data["search"]["finalists"] if row["pattern"] == "SADDMM")["losses"]
    assert [row["b"] for row in result["differences"]] == list(families)
    for row in result["differences"]:
        expected = paired_difference(answer, families[row["b"]]["losses"])
        assert row["mean"] == pytest.approx(expected["mean"]) and row["verdict"] == expected["verdict"]
    # the answer regrown by the families' rule is the model the search trained, within Nemotron-H's cpu cost
    assert result["answer_model"]["layout"] == "SDDMMSDDMAMSDDMMDM"
    assert max(result["answer_model"]["deployed"]["ratio"].values()) <= 1.0


def test_a_search_that_trained_otherwise_is_refused(tmp_path, load_benchmark):
    bench = load_benchmark("equal_cost_search")
    write_search(tmp_path, reference_drift=1e-3)
    with pytest.raises(SystemExit, match="did not train the same"):
        bench.compare(tmp_path / "search", RESULTS / "equal_cost_families-2026-12-07.json")
