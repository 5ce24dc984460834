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


def test_more_seeds_extend_the_pairing_over_every_seed_both_sides_have(tmp_path, load_benchmark):
    bench = load_benchmark("equal_cost_search")
    data = write_search(tmp_path)
    work = tmp_path / "work"
    extra = {"search-answer": {"3": 1.30, "4": 1.31}, "nemotron-flash": {"3": 1.32, "4": 1.33},
             "nemotron-h": {"3": 1.34}}  # Nemotron-H's seed 4 not trained yet: paired over 0-3 only
    for name, losses in extra.items():
        (work / name).mkdir(parents=True)
        (work / name / "family.json").write_text(json.dumps(
            {"stages": {"more_seeds": {"losses": losses, "lr": 0.002, "seconds": 60.0}},
             **({"edge": {"lr": 0.004, "loss": 1.9, "chosen_lr": 0.002, "chosen_loss": 1.8}}
                if name == "search-answer" else {})}))
    result = bench.compare(tmp_path / "search", RESULTS / "equal_cost_families-2026-12-07.json", work)
    families = json.loads((RESULTS / "equal_cost_families-2026-12-07.json").read_text())["arms"]
    answer = {**next(row for row in data["search"]["finalists"] if row["pattern"] == "SADDMM")["losses"],
              **extra["search-answer"]}
    rows = {row["b"]: row for row in result["more_seeds"]["differences"]}
    assert set(rows) == {"nemotron-flash", "nemotron-h"}  # the arms without more seeds keep their 3-seed rows only
    assert rows["nemotron-flash"]["seeds"] == ["0", "1", "2", "3", "4"]
    assert rows["nemotron-h"]["seeds"] == ["0", "1", "2", "3"]
    for name, row in rows.items():
        theirs = {**families[name]["losses"], **extra[name]}
        expected = paired_difference({s: answer[s] for s in row["seeds"]}, {s: theirs[s] for s in row["seeds"]})
        assert row["mean"] == pytest.approx(expected["mean"]) and row["ci"] == pytest.approx(expected["ci"])
    assert result["more_seeds"]["by_arm"]["search-answer"]["edge"]["lr"] == 0.004
    assert len(result["differences"]) == len(families)  # the 3-seed rows stand beside the longer ones
