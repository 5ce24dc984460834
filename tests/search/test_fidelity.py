"""Successive halving: rungs of rising budgets, the best known layout always promoted, a killed search resumed."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest

from composer.errors import ConfigError
from search.config import SearchConfig
from search.fidelity import LADDERS, Ladder, Rung, get_ladder, promote
from search.lm import LanguageModelEvaluator
from search.run import run_search

SMOKE = {"evaluator": "lm", "strategy": "successive-halving", "budget": "smoke", "widths": "tiny",
         "primitives": "AM", "sampler": "random", "trials": 3, "precision": "fp32", "wandb": "off"}


def test_promotion_keeps_the_best_and_the_best_known_layout():
    rows = [{"pattern": "MMAMAM", "known": None}, {"pattern": "AMMAMM", "known": None},
            {"pattern": "AMAMAM", "known": "llama"}, {"pattern": "AAMMMM", "known": "composer-paper"}]
    assert [r["pattern"] for r in promote(rows, 2)] == ["MMAMAM", "AMMAMM", "AMAMAM"]
    assert [r["pattern"] for r in promote(rows, 3)] == ["MMAMAM", "AMMAMM", "AMAMAM"]
    assert [r["pattern"] for r in promote(rows[:2], 5)] == ["MMAMAM", "AMMAMM"]


def test_ladders_and_settings_are_checked_before_anything_trains():
    assert LADDERS["cpu"].rungs[-1].budget == "rung-cpu-2"
    with pytest.raises(ConfigError, match="rung 0 keeps every candidate"):
        Ladder("bad", (Rung("rung-cpu-0", 4),), "")
    with pytest.raises(ConfigError, match="unknown successive-halving budget"):
        get_ladder("huge")
    with pytest.raises(ConfigError, match="add --evaluator lm"):
        SearchConfig(strategy="successive-halving", evaluator="mad")
    with pytest.raises(ConfigError, match="unknown successive-halving budget"):
        SearchConfig(strategy="successive-halving", evaluator="lm", budget="paper")
    assert SearchConfig(strategy="successive-halving", evaluator="lm").report_target == "demo-4m"


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """One uninterrupted smoke search (3 candidates at tiny widths, the best 2 + the best known at the last rung)."""
    out = tmp_path_factory.mktemp("halving") / "out"
    return run_search(SearchConfig(**SMOKE, out=str(out)), echo=lambda _: None)


def test_rungs_train_the_promoted_patterns_and_the_last_ranks_them_at_the_target(finished):
    out = Path(finished["out"])
    rungs = json.loads((out / "rungs.json").read_text())
    assert [r["rung"] for r in rungs] == [0, 1]
    assert all(isinstance(r["failures"], list) for r in rungs)  # every rung's failures, not only the last's
    assert rungs[0]["candidates"] == 3 and rungs[0]["budget"] == "rung-smoke-0"
    expected = {row["pattern"] for row in promote(rungs[0]["leaderboard"], 2)}
    assert {row["pattern"] for row in rungs[1]["leaderboard"]} == expected
    final = json.loads((out / "leaderboard.json").read_text())
    assert {row["pattern"] for row in final} == expected and all(row["rung"] == 1 for row in final)
    grown = {row["pattern"]: LanguageModelEvaluator("rung-smoke-1").trained_pattern(row["pattern"]) for row in final}
    assert any(grown[p] != p for p in grown), "the last rung should train patterns at the target's size"
    for row in final:  # trained at the last rung's target (tiny's size), at the better of two rates
        assert row["details"].get("trained_pattern", row["pattern"]) == grown[row["pattern"]]
        assert set(row["details"]["lr_sweep"]) == {"0.001", "0.003"} and row["lr"] in (1e-3, 3e-3)
    best = json.loads((out / "best.json").read_text())
    assert best["strategy"] == "successive-halving" and best["study"].endswith("-rung1")
    assert best["answer"] in ("known", "new") and any(row["known"] for row in final)


def test_a_finished_search_run_again_trains_nothing(finished, monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a finished rung was trained again")

    monkeypatch.setattr(LanguageModelEvaluator, "train_once", refuse)
    again = run_search(SearchConfig(**SMOKE, out=finished["out"]), echo=lambda _: None)
    assert [(r["pattern"], r["score"]) for r in again["leaderboard"]] == \
        [(r["pattern"], r["score"]) for r in finished["leaderboard"]]


def _complete_trials(db: Path, study_suffix: str) -> int:
    try:
        with sqlite3.connect(db, timeout=1) as connection:
            return connection.execute(
                "SELECT COUNT(*) FROM trials JOIN studies USING (study_id) WHERE studies.study_name LIKE ? "
                "AND trials.state = 'COMPLETE'", (f"%{study_suffix}",)).fetchone()[0]
    except sqlite3.Error:
        return 0


@pytest.mark.slow
def test_a_search_killed_in_its_last_rung_resumes_without_retraining_a_finished_rung(finished, tmp_path, monkeypatch):
    out = tmp_path / "killed"
    flags = [f"--{key.replace('_', '-')}={value}" for key, value in SMOKE.items()]
    process = subprocess.Popen([sys.executable, "-m", "composer", "search", *flags, f"--out={out}"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ})
    deadline = time.time() + 300
    while _complete_trials(out / "study.db", "-rung1") < 1 and process.poll() is None and time.time() < deadline:
        time.sleep(0.2)
    assert process.poll() is None, "the search ended before its last rung could be killed"
    process.send_signal(signal.SIGKILL)
    process.wait()
    storage = f"sqlite:///{out / 'study.db'}"
    rung0 = optuna.load_study(study_name=finished["study"].removesuffix("-rung1"), storage=storage)
    assert len([t for t in rung0.get_trials() if t.state.is_finished()]) == 3
    done_before = _complete_trials(out / "study.db", "-rung1")

    trained = []
    original = LanguageModelEvaluator.train_once

    def counting(self, pattern, lr, seed):
        trained.append((self.budget, pattern))
        return original(self, pattern, lr, seed)

    monkeypatch.setattr(LanguageModelEvaluator, "train_once", counting)
    resumed = run_search(SearchConfig(**SMOKE, out=str(out)), echo=lambda _: None)
    assert all(budget == "rung-smoke-1" for budget, _ in trained), "rung 0 was trained again"
    left = len(finished["leaderboard"]) - done_before
    assert len(trained) <= 2 * left  # two rates per pattern not yet finished, nothing more
    assert [(r["pattern"], round(r["score"], 4)) for r in resumed["leaderboard"]] == \
        [(r["pattern"], round(r["score"], 4)) for r in finished["leaderboard"]]
