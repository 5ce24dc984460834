"""The search, the aggregator and the extrapolator handle every registered primitive, not only A and M (issue 6)."""

from __future__ import annotations

import json
from pathlib import Path

from composer.cli import main
from primitives.registry import REGISTRY
from scaling.extrapolate import extrapolate
from search.aggregate import aggregate
from search.evaluators import MadEvaluator


def test_mad_scores_a_pattern_holding_every_primitive():
    """One candidate with one layer of each registered primitive trains on every smoke task without failing."""
    reports = []
    result = MadEvaluator("smoke", "tiny")(REGISTRY.symbols, 0, lambda step, value: reports.append(value))
    assert 0 < result.score <= 1 and len(reports) == len(result.details["accuracy"])


def test_mad_smoke_search_over_ams_then_aggregate_and_extrapolate(tmp_path, capsys):
    """Issue 6's `composer search --primitives AMS --budget smoke`, at 2 layers and the tiny widths."""
    out = tmp_path / "search"
    symbols = "AMS"
    argv = ["search", "--evaluator", "mad", "--primitives", symbols, "--layers", "2", "--trials", "3",
            "--sampler", "random", "--budget", "smoke", "--preset", "tiny", "--wandb", "off", "--out", str(out)]
    assert main(argv) == 0
    rows = json.loads((out / "leaderboard.json").read_text())
    assert rows and all(set(row["pattern"]) <= set(symbols) and 0 <= row["score"] <= 1 for row in rows)
    assert json.loads((out / "failures.json").read_text()) == [], "a primitive failed to train on MAD"

    result = aggregate(out)
    assert len(result.pattern) == 2
    grown = extrapolate(result.pattern + "SDWE", "llama-3.2-1b", method="stretch")  # any symbols extrapolate
    assert set(grown.pattern) == set(result.pattern + "SDWE")
    assert grown.non_embedding_params >= grown.target_non_embedding_params
    capsys.readouterr()


def test_search_cli_rejects_an_unknown_primitive_before_writing_anything(tmp_path, capsys):
    assert main(["search", "--primitives", "AMX", "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "X" in err and "S (mamba2)" in err
    assert not (tmp_path / "out").exists()
