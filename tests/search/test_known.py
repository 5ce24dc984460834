"""Known layouts: Llama and the published hybrids a search can express, enqueued first and named in its report."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import optuna
import pytest

from composer.layouts import FAMILIES
from search.config import SearchConfig
from search.known import family_at_depth, known_layouts, nearest_layout
from search.verdict import compare_with_known
from tests.search.records import recorded
from search.run import run_search

TOY = "toy_evaluator:make"


def test_only_families_the_primitives_express_enter_and_the_rest_say_why():
    chosen, left_out = known_layouts(6, ["A", "M", "S", "D"])
    names = [layout.name for layout in chosen]
    assert names[:2] == ["llama", "composer-paper"]
    assert {"nemotron-h", "linear-7to1"} <= set(names)
    assert "samba" not in names and "needs W" in left_out["samba"]
    assert "jamba" not in names and "needs E" in left_out["jamba"]
    for layout in chosen:
        assert len(layout.pattern) == 6 and set(layout.pattern) <= set("AMSD")


def test_a_family_enters_in_whole_periods_where_the_depth_allows():
    samba = family_at_depth("samba", 8)
    assert samba.pattern == "SMWMSMWM" and samba.fit == "whole periods"
    assert family_at_depth("linear-7to1", 16).pattern == FAMILIES["linear-7to1"].generator(16)


def test_otherwise_the_nearest_layout_keeps_the_composition_the_order_and_the_pairs():
    jamba = family_at_depth("jamba", 6)  # a period of 16 at 6 layers: 3 mixer + FFN pairs, one attention
    assert jamba.fit.startswith("nearest layout at 6 layers")
    assert jamba.pattern == "SMAMSE"
    pairs = [jamba.pattern[i:i + 2] for i in range(0, 6, 2)]
    assert all(pair[1] in "ME" for pair in pairs), "a mixer + FFN pair was split"
    seven_to_one = nearest_layout("DM" * 7 + "AM", 6, unit=2)
    assert seven_to_one == "DMDMAM"  # attention stays last, as in the period
    assert Counter(nearest_layout("AAMMMM", 9)) == Counter({"A": 3, "M": 6})


def test_a_nearest_layout_keeps_a_rare_symbol_while_there_is_room():
    assert "A" in nearest_layout("S" * 15 + "A", 4)
    assert len(nearest_layout("SMEA", 2)) == 2  # more distinct symbols than layers: the commonest kept


def test_the_search_enqueues_known_layouts_first_and_reports_the_answer(tmp_path):
    config = SearchConfig(evaluator=TOY, budget="smoke", wandb="off", out=str(tmp_path / "out"), sampler="random",
                          trials=6)
    result = run_search(config, echo=lambda _: None)
    study = optuna.load_study(study_name=result["study"], storage=result["storage"])
    first = sorted(study.get_trials(deepcopy=False), key=lambda t: t.number)[:2]
    assert [t.user_attrs.get("known") for t in first] == ["llama", "composer-paper"]
    assert [t.user_attrs["pattern"] for t in first] == ["AMAMAM", "AAMMMM"]
    best = json.loads((Path(result["out"]) / "best.json").read_text())
    assert best["pattern"] == "AAMMMM" and best["known"] == "composer-paper"  # the toy's optimum
    # the known layout scores best, but one seed and no measured spread give no interval: a tie, recommending it
    assert best["answer"] == "tie" and best["recommended"] == "AAMMMM"
    assert best["vs_known"]["best_known"]["name"] == "composer-paper"
    assert best["vs_known"]["new_is_better"] is False
    assert "single draw" in best["vs_known"]["interval"] and best["vs_known"]["verdict"].startswith("tie")
    assert [k["name"] for k in best["known_layouts"]] == ["llama", "composer-paper"]
    rows = json.loads((Path(result["out"]) / "leaderboard.json").read_text())
    assert all(row["known"] in (None, "llama", "composer-paper") for row in rows)
    # resuming enqueues nothing again
    again = run_search(config, echo=lambda _: None)
    reloaded = optuna.load_study(study_name=again["study"], storage=again["storage"])
    assert sum(t.user_attrs.get("known") == "composer-paper" for t in reloaded.get_trials()) == 1


def test_no_known_searches_without_them(tmp_path):
    config = SearchConfig(evaluator=TOY, budget="smoke", wandb="off", out=str(tmp_path / "out"), sampler="random",
                          trials=3, known=False, seed=3)
    result = run_search(config, echo=lambda _: None)
    study = optuna.load_study(study_name=result["study"], storage=result["storage"])
    assert not any("known" in t.user_attrs for t in study.get_trials())
    assert json.loads((Path(result["out"]) / "best.json").read_text())["known_layouts"] == []


def test_a_known_layout_outside_the_constraints_is_left_out_and_said(tmp_path):
    lines = []
    config = SearchConfig(evaluator=TOY, budget="smoke", wandb="off", out=str(tmp_path / "out"), sampler="random",
                          trials=3, max_share={"A": 0.4})
    result = run_search(config, echo=lines.append)
    study = optuna.load_study(study_name=result["study"], storage=result["storage"])
    assert not any(t.user_attrs.get("known") == "llama" for t in study.get_trials())  # AMAMAM is half attention
    assert any("llama (outside the constraints" in line for line in lines)


def test_the_comparison_gives_a_paired_interval_when_both_sides_have_seeds():
    rows = [recorded(row) for row in (
        {"pattern": "SMSMSM", "score": 1.50, "known": None, "details": {"losses": {"0": 1.49, "1": 1.50, "2": 1.51}}},
        {"pattern": "AMAMAM", "score": 1.60, "known": "llama", "details": {"losses": {"0": 1.60, "1": 1.61, "2": 1.59}}},
    )]
    said = compare_with_known(rows, maximize=False)
    assert said["answer"] == "new" and said["new_is_better"] is True
    assert said["difference"] == pytest.approx(-0.10)
    assert said["ci"][1] < 0 and said["verdict"].startswith("new: SMSMSM") and said["recommended"] == "SMSMSM"
    assert said["interval"].startswith("paired over seeds 0, 1, 2")


def test_a_score_cached_from_another_model_at_the_target_is_not_reused():
    from types import SimpleNamespace

    from search.engine import same_model
    from search.lm import LanguageModelEvaluator

    evaluator = LanguageModelEvaluator("rung-cpu-2", known={"SMSAMS": "nemotron-h"})
    stacked = SimpleNamespace(user_attrs={"details": {"trained_pattern": "SMSAMS" * 3}})  # as an older study held it
    own = SimpleNamespace(user_attrs={"details": {"grown": evaluator.grown("SMSAMS").record()}})
    own_before = SimpleNamespace(user_attrs={"details": {"trained_pattern": evaluator.grown("SMSAMS").layout}})
    assert not same_model(stacked, "SMSAMS", evaluator) and same_model(own, "SMSAMS", evaluator)
    assert same_model(own_before, "SMSAMS", evaluator)


def test_an_equal_cost_search_enters_the_families_designed_at_equal_latency_first():
    """At 6 layers the 3:1 and 7:1 linear ratios share DMDMAM: an equal-cost search enters it as linear-3to1 (Kimi
    Linear's and Qwen3-Next's ratio, its floor) and grows it in that layout; other searches keep linear-7to1."""
    layouts, left_out = known_layouts(6, list("AMSD"), equal_cost=True)
    names = {layout.pattern: layout.name for layout in layouts}
    assert names["DMDMAM"] == "linear-3to1" and names["DMSMAM"] == "nemotron-flash"
    assert left_out["linear-7to1"] == "same layout as linear-3to1 at this depth (DMDMAM)"
    assert {layout.pattern: layout.name for layout in known_layouts(6, list("AMSD"))[0]}["DMDMAM"] == "linear-7to1"
