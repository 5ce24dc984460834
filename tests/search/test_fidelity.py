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

import numpy as np
import optuna
import pytest

from composer.errors import ConfigError
from search.config import SearchConfig
from search.fidelity import LADDERS, Ladder, Rung, get_ladder, promote, rung_budget
from search.forecast import NO_INTERVAL
from search.growth import Growth
from search.lm import LanguageModelEvaluator, get_lm_budget
from search.run import run_search, summary_text
from tests.search.records import check_answer

SMOKE = {"evaluator": "lm", "strategy": "successive-halving", "budget": "smoke", "widths": "tiny",
         "primitives": "AM", "sampler": "random", "trials": 3, "precision": "fp32", "wandb": "off"}


def test_promotion_keeps_the_best_and_the_best_known_layout():
    rows = [{"pattern": "MMAMAM", "known": None}, {"pattern": "AMMAMM", "known": None},
            {"pattern": "AMAMAM", "known": "llama"}, {"pattern": "AAMMMM", "known": "composer-paper"}]
    assert [r["pattern"] for r in promote(rows, 2)] == ["MMAMAM", "AMMAMM", "AMAMAM"]
    assert [r["pattern"] for r in promote(rows, 3)] == ["MMAMAM", "AMMAMM", "AMAMAM"]
    assert [r["pattern"] for r in promote(rows[:2], 5)] == ["MMAMAM", "AMMAMM"]
    # every known layout goes on under known="all" (the ladders' rungs: each family reaches the target, issue 37)
    assert [r["pattern"] for r in promote(rows, 1, known="all")] == ["MMAMAM", "AMAMAM", "AAMMMM"]
    assert [r["pattern"] for r in promote(rows, 3, known="all")] == ["MMAMAM", "AMMAMM", "AMAMAM", "AAMMMM"]
    assert all(rung.known == "all" for ladder in LADDERS.values() for rung in ladder.rungs[1:])


def test_under_min_recall_the_patterns_that_can_recall_are_promoted_as_deep_as_the_best():
    from search.strategies.successive_halving import recall_pool

    # the AMSD search's rung 1, promoted by loss alone, sent 1 pattern with attention of 6 to rung 2
    rows = [{"pattern": p, "known": None} for p in ("SDDMDM", "SMDDDM", "SDDMDA", "SDMDDS", "SDDDAM", "SDDMAS")]
    rows.append({"pattern": "SMSAMS", "known": "nemotron-h"})

    def attention(row):
        return "A" in row["pattern"]

    assert [r["pattern"] for r in promote(rows, 2)] == ["SDDMDM", "SMDDDM", "SMSAMS"]
    assert [r["pattern"] for r in promote(rows, 2, pool=attention)] == ["SDDMDM", "SMDDDM", "SDDMDA", "SDDDAM",
                                                                        "SMSAMS"]
    # those already among the best count towards the pool's keep
    assert [r["pattern"] for r in promote(rows, 3, pool=attention)] == ["SDDMDM", "SMDDDM", "SDDMDA", "SDDDAM",
                                                                        "SDDMAS", "SMSAMS"]
    assert recall_pool(SearchConfig(primitives="AMSD")) is None  # recall not asked for: loss alone
    assert recall_pool(SearchConfig(primitives="AMSD", objectives=["score", "recall"])) is not None
    pool = recall_pool(SearchConfig(primitives="AMSDW", min_recall="known"))
    assert pool({"pattern": "SDDMAS"}) and not pool({"pattern": "SDDMDM"})
    assert pool({"pattern": "SDDMWS"})  # W's 4,096-token window at demo-4m keeps the probe's 1,024
    stacked = {"layout": "SMSMSMSMSMSMSMSM", "widths": "demo-4m", "by": "parameters"}
    assert not pool({"pattern": "SMSAMS", "grown": stacked})  # judged on the model at the target
    assert not pool({"pattern": "SMSAMS", "target_pattern": stacked["layout"]})  # as a study before it stored it


def test_two_patterns_grown_to_one_model_take_one_place_and_train_once():
    """The AMSD search with its attention kept trained ``SADDSM`` and ``SDDASM`` at rung 1 and promoted both to
    rung 2: at demo-4m both are ``SDDSMSDDSMASDDSMSDDSM``, so one model took two of the rung's 8 places."""
    from search.fidelity import distinct_models
    from search.strategies.successive_halving import same_model_at

    grown = LanguageModelEvaluator("rung-cpu-2", growth=Growth("keep"))
    assert grown.model_key("SADDSM") == grown.model_key("SDDASM") == "SDDSMSDDSMASDDSMSDDSM"
    assert LanguageModelEvaluator("rung-cpu-0").model_key("SADDSM") == "SADDSM"  # not grown: itself
    config = SearchConfig(primitives="AMSD", attention_at_target="keep", budget="cpu")
    model_of = same_model_at(config, "rung-cpu-2@demo-4m")
    assert same_model_at(config, "rung-cpu-0") is None
    rows = [{"pattern": p, "known": None, "trial": i} for i, p in enumerate(("SDDDDM", "SADDSM", "SDDASM", "SDDADM"))]
    rows.append({"pattern": "SMSAMS", "known": "nemotron-h", "trial": 4})
    assert [r["pattern"] for r in promote(rows, 3)] == ["SDDDDM", "SADDSM", "SDDASM", "SMSAMS"]
    assert [r["pattern"] for r in promote(rows, 3, model_of=model_of)] == ["SDDDDM", "SADDSM", "SDDADM", "SMSAMS"]
    # a known layout stands for its model wherever it ranks: a new pattern that is the same model is left out
    same_as_known = {"SDDDDM": "X", "SADDSM": "Y", "SDDASM": "Z", "SDDADM": "X", "SMSAMS": "Y"}
    assert [r["pattern"] for r in distinct_models(rows, lambda row: same_as_known[row["pattern"]])] == [
        "SDDDDM", "SDDASM", "SMSAMS"]


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


def test_the_cpu_ladders_middle_rung_trains_at_the_targets_shape_and_follows_target():
    """Rung 1 ranks at the target's shape on a quarter of its tokens (the 6-layer proxy's ranking did not carry:
    docs/search.md); a search with --target moves it there along with the last rung, never rung 0."""
    cpu = LADDERS["cpu"]
    middle, last = get_lm_budget(cpu.rungs[1].budget), get_lm_budget(cpu.rungs[-1].budget)
    assert middle.extrapolate_to == last.extrapolate_to == "demo-4m"
    assert middle.tokens * 4 == last.tokens
    assert [rung_budget(cpu, i, None) for i in range(3)] == ["rung-cpu-0", "rung-cpu-1", "rung-cpu-2"]
    assert [rung_budget(cpu, i, "tiny") for i in range(3)] == ["rung-cpu-0", "rung-cpu-1@tiny", "rung-cpu-2@tiny"]
    assert get_lm_budget(rung_budget(cpu, 1, "tiny")).extrapolate_to == "tiny"
    gpu = LADDERS["gpu"]
    assert get_lm_budget(gpu.rungs[1].budget).tokens * 4 == get_lm_budget(gpu.rungs[-1].budget).tokens


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
    # wall time covers the rung's training (rung 0's was once timed from its end: 0.0 s in the 2026-11-26 run)
    assert all(r["wall_seconds"] >= r["seconds"] > 0 for r in rungs)
    expected = {row["pattern"] for row in promote(rungs[0]["leaderboard"], 2, known="all")}
    assert {row["pattern"] for row in rungs[1]["leaderboard"]} == expected
    final = json.loads((out / "leaderboard.json").read_text())
    assert {row["pattern"] for row in final} == expected and all(row["rung"] == 1 for row in final)
    grown = {row["pattern"]: LanguageModelEvaluator("rung-smoke-1").grown(row["pattern"]).layout for row in final}
    assert any(grown[p] != p for p in grown), "the last rung should train patterns at the target's size"
    for row in final:  # trained at the last rung's target (tiny's size), at the better of two rates
        assert row["details"]["grown"]["layout"] == grown[row["pattern"]]
        assert set(row["details"]["lr_sweep"]) == {"0.001", "0.003"} and row["lr"] in (1e-3, 3e-3)
    best_known = json.loads((out / "best.json").read_text())["vs_known"]["best_known"]
    for row in final:  # the serving cost of the finalists and known layouts, on their models at the target, measured
        cost = row["cost"]
        assert cost["pattern"] == row["grown"]["layout"] == grown[row["pattern"]]
        assert cost["cache_bytes"]["32768"] >= cost["cache_bytes"]["4096"] > 0
        measured = cost["measured"]  # at the last rung's shape: 8 x 64 tokens, decode after 64 and 512
        assert measured["train_tokens_per_s"]["seq_len"] == 64 and measured["train_tokens_per_s"]["median"] > 0
        assert {b: sorted(c, key=int) for b, c in measured["decode_ms_per_token"].items()} == {
            "1": ["64", "512"], "64": ["64", "512"]}
        assert cost["vs_best_known"]["pattern"] == best_known["pattern"]
        assert "decode" not in cost  # the old figure, kept readable for searches written before
    assert json.loads((out / "measured_cost.json").read_text()).keys() == {f"tiny:{row['grown']['layout']}"
                                                                            for row in final}
    # the last rung measured each finalist's trained model (issue 48): per seed, and the seed-averaged figure, the
    # random copy gain at the longest distance of its 64-token context over rung-smoke-1's 4 held-out sequences
    for row in final:
        figure, per_seed = row["trained_recall"], row["details"]["recall"]
        assert set(per_seed) == {"0"} and figure["seeds"] == [0] and figure == row["details"]["trained_recall"]
        assert figure["kind"] == "random" and figure["seq_len"] == 64 and figure["distance"] == 32
        assert figure["sequences"] == 4 and len(per_seed["0"]["random_gains"]) == 4
        assert figure["value"] == pytest.approx(np.mean(per_seed["0"]["random_gains"]))
        assert figure["ci"][0] <= figure["value"] <= figure["ci"][1] and figure["seconds"] > 0
        assert {(r["kind"], r["distance"]) for r in per_seed["0"]["copy"]} == {(k, d) for k in ("text", "random")
                                                                                for d in (16, 32)}
        assert "repeat_gain" in per_seed["0"]["ar_slice"]
    assert not any("trained_recall" in row or "recall" in row["details"] for row in rungs[0]["leaderboard"])
    assert all(row["trained_recall"] == final_row["trained_recall"] for row in rungs[1]["leaderboard"]
               for final_row in final if final_row["pattern"] == row["pattern"])
    text = summary_text(finished)
    assert "trained recall (random copy gain at 32 tokens of 64, nats per token" in text
    assert "; recall (random copy gain at 32 tokens) " in text  # the best row's clause
    best = json.loads((out / "best.json").read_text())
    assert best["strategy"] == "successive-halving" and best["study"].endswith("-rung1")
    assert any(row["known"] for row in final)
    check_answer(best["vs_known"], final)  # the answer its interval reads, at the last rung's setting, over its seeds
    assert best["answer"] == best["vs_known"]["answer"] and best["vs_known"]["setting"]["budget"] == "rung-smoke-1"
    assert best["vs_known"]["new_seeds"] == best["vs_known"]["known_seeds"] == [0]


def test_a_finished_search_run_again_trains_nothing(finished, monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a finished rung was trained again")

    def measure_again(*args, **kwargs):
        raise AssertionError("a finished search's cost was measured again")

    monkeypatch.setattr(LanguageModelEvaluator, "train_once", refuse)
    monkeypatch.setattr("search.cost.measured.measure_row", measure_again)
    again = run_search(SearchConfig(**SMOKE, out=finished["out"]), echo=lambda _: None)
    assert [(r["pattern"], r["score"]) for r in again["leaderboard"]] == \
        [(r["pattern"], r["score"]) for r in finished["leaderboard"]]
    assert [r["cost"]["measured"] for r in again["leaderboard"]] == \
        [r["cost"]["measured"] for r in finished["leaderboard"]]


def test_a_finished_search_run_again_with_min_recall_reads_the_trained_recall_and_trains_no_probe(finished,
                                                                                                  monkeypatch):
    """Where the last rung measured the trained models' recall, --min-recall known and the recall objective read it:
    nothing is trained again, not even the probe (issue 48)."""
    from search.recall import RecallEvaluator

    def refuse(*args, **kwargs):
        raise AssertionError("trained again: a finished rung, or the probe")

    monkeypatch.setattr(LanguageModelEvaluator, "train_once", refuse)
    monkeypatch.setattr(RecallEvaluator, "_evaluate", refuse)
    lines = []
    said = run_search(SearchConfig(**SMOKE, out=finished["out"], min_recall="known", objectives="score,recall,kv"),
                      echo=lines.append)
    assert not any(line.startswith("recall probe") for line in lines) and "recall_probe" not in said
    constraint, rows = said["min_recall"], said["leaderboard"]
    assert constraint["source"] == "trained" and said["front"]["recall_source"] == "trained"
    assert all(row["recall"] == row["trained_recall"]["value"] and row["recall_source"] == "trained" for row in rows)
    best = max((row for row in rows if row.get("known") and "A" in row["pattern"]), key=lambda row: row["recall"])
    assert constraint["threshold"] == pytest.approx(best["trained_recall"]["ci"][0])
    for row in rows:
        assert (row["pattern"] in constraint["eligible"]) == (row["trained_recall"]["ci"][1] >= constraint["threshold"])
        assert constraint["recall"][row["pattern"]]["value"] == row["trained_recall"]["value"]
    written = json.loads((Path(finished["out"]) / "best.json").read_text())
    assert written["min_recall"]["source"] == "trained" and written["min_recall"]["recall"] == constraint["recall"]
    assert (Path(finished["out"]) / "loss_vs_recall.png").stat().st_size > 0
    assert "--min-recall known: " in summary_text(said)


def test_a_finished_search_run_again_with_min_recall_probes_its_finalists_without_retraining(finished, monkeypatch):
    """--min-recall and the recall objective change no rung: the same --out trains only the probe (issue 37), where
    the last rung measures no trained recall (a budget without recall_sequences: the probe, as before issue 48)."""
    import dataclasses

    from search.lm import LM_BUDGETS

    def refuse(*args, **kwargs):
        raise AssertionError("a finished rung was trained again")

    monkeypatch.setattr(LanguageModelEvaluator, "train_once", refuse)
    monkeypatch.setitem(LM_BUDGETS, "rung-smoke-1", dataclasses.replace(LM_BUDGETS["rung-smoke-1"],
                                                                       recall_sequences=0))
    lines = []
    probed = run_search(SearchConfig(**SMOKE, out=finished["out"], min_recall="known", objectives="score,recall,kv",
                                     recall_budget="probe-smoke"), echo=lines.append)
    rows = probed["leaderboard"]
    assert [(r["pattern"], r["score"]) for r in rows] == [(r["pattern"], r["score"]) for r in finished["leaderboard"]]
    assert all(0.0 <= row["recall"] <= 1.0 and row["recall_length"] == 128 for row in rows)
    assert all(row["recall_details"]["mixers"] == row["pattern"].replace("M", "") for row in rows)
    constraint = probed["min_recall"]
    assert constraint["why"].startswith("--min-recall known: ")
    from composer.statistics import clustered_proportion_interval

    def interval(row):  # the recall's 95% interval over its test sequences, from the statistics module itself
        return clustered_proportion_interval(row["recall"], row["recall_queries"], row["recall_sequences"],
                                             row.get("recall_sequence_sd"))["ci"]

    # known: the known layout with attention that has the best loss sets the bar at the low end of its interval; a
    # finalist whose own interval reaches it is eligible (the two are even), and so is every one that recalls as much
    best = min((row for row in rows if row.get("known") and "A" in row["pattern"]),
               key=lambda row: (row["score"], -row["recall"]))
    assert constraint["threshold"] == pytest.approx(interval(best)[0])
    for row in rows:
        assert (row["pattern"] in constraint["eligible"]) == (interval(row)[1] >= constraint["threshold"]), row
        assert row["recall"] < best["recall"] or row["pattern"] in constraint["eligible"], row
    assert [p for p in constraint["eligible"]] == [row["pattern"] for row in rows if row["pattern"] in
                                                   constraint["eligible"]]  # in the leaderboard's order
    assert probed["vs_known"]["recommended"] in constraint["eligible"] and constraint["source"] == "probe"
    assert set(probed["front"]["patterns"]) <= {row["pattern"] for row in rows} and probed["front"]["patterns"]
    assert (Path(finished["out"]) / "loss_vs_recall.png").stat().st_size > 0
    text = summary_text(probed)
    assert "recall at 128 tokens (probe-smoke probe, mixers alone)" in text and "front on score, recall, kv" in text
    assert any(line.startswith("recall probe: ") for line in lines)


def _complete_trials(db: Path, study_suffix: str) -> int:
    try:
        with sqlite3.connect(db, timeout=1) as connection:
            return connection.execute(
                "SELECT COUNT(*) FROM trials JOIN studies USING (study_id) WHERE studies.study_name LIKE ? "
                "AND trials.state = 'COMPLETE'", (f"%{study_suffix}",)).fetchone()[0]
    except sqlite3.Error:
        return 0


def _search(out: Path) -> subprocess.Popen:
    """The smoke search as a user runs it, in its own process (one thread), to be killed."""
    flags = [f"--{key.replace('_', '-')}={value}" for key, value in SMOKE.items()]
    command = [sys.executable, "-m", "composer", "search", *flags, f"--out={out}"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _finished_trials(out: Path, last_rung: bool) -> list[tuple]:
    """(number, pattern, value, completed at) of every complete trial of rung 0 or of the last rung."""
    storage = f"sqlite:///{out / 'study.db'}"
    rows = []
    for summary in optuna.get_all_study_summaries(storage):
        if summary.study_name.endswith("-rung1") == last_rung:
            study = optuna.load_study(study_name=summary.study_name, storage=storage)
            rows += [(t.number, t.user_attrs.get("pattern"), t.value, t.datetime_complete)
                     for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))]
    return sorted(rows)


@pytest.mark.slow
def test_a_search_killed_in_its_last_rung_resumes_without_retraining_a_finished_rung(tmp_path, finished):
    """kill -9 in the last rung, then the same search again: no finished trial of either rung trains again, and the
    ranking is the unkilled search's (``finished``, the module's search of the same settings: no second reference
    search; the resume runs in this process as that one did, ~10 s of imports less than a second process)."""
    out = tmp_path / "killed"
    process = _search(out)
    deadline = time.time() + 300
    while _complete_trials(out / "study.db", "-rung1") < 1 and process.poll() is None and time.time() < deadline:
        time.sleep(0.2)
    assert process.poll() is None, "the search ended before its last rung could be killed"
    process.send_signal(signal.SIGKILL)
    process.wait()
    rung0, rung1 = _finished_trials(out, last_rung=False), _finished_trials(out, last_rung=True)
    assert len(rung0) == 3 and rung1

    run_search(SearchConfig(**SMOKE, out=str(out)), echo=lambda _: None)
    assert _finished_trials(out, last_rung=False) == rung0, "rung 0 was trained again"
    last = _finished_trials(out, last_rung=True)
    assert set(rung1) <= set(last), "a finished trial of the last rung was trained again"
    patterns = [pattern for _, pattern, _, _ in last]
    assert len(patterns) == len(set(patterns)), "a pattern of the last rung was trained twice"
    ours, theirs = json.loads((out / "leaderboard.json").read_text()), finished["leaderboard"]
    assert [r["pattern"] for r in ours] == [r["pattern"] for r in theirs]
    # the killed process trained on one thread, the reference here on this process's: equal to float rounding
    assert [r["score"] for r in ours] == pytest.approx([r["score"] for r in theirs], abs=1e-4)


def curve_row(pattern: str, trial: int, E: float, A: float, alpha: float, known: str | None = None) -> dict:
    """A leaderboard row whose curve follows E + A t^-alpha to a 100K-token trunk (scored at 125K)."""
    from composer.pattern import attention_share

    tokens = [12_288 * 1.35 ** i for i in range(8)]
    curve = [{"tokens": t, "loss": E + A * t ** -alpha} for t in tokens if t <= 100_352]
    score = E + A * 125_000 ** -alpha
    return {"pattern": pattern, "score": score, "trial": trial, "known": known, "attention_share":
            attention_share(pattern), "details": {"curve": curve, "trunk_tokens": 100_352}}


def test_promotion_by_forecast_takes_the_late_learner_the_snapshot_drops():
    """Issue 36: a pattern that trails at the rung but learns on (lower E) is promoted by its forecast at the
    target's tokens where the snapshot keeps the fast starter; the floor is still added; each chosen row carries
    its forecast. Red when promote ranked by score whatever ``by`` said."""
    fast = curve_row("MMMMAM", 0, E=2.0, A=40.0, alpha=0.7)
    slow = curve_row("AMAMAM", 1, E=1.8, A=9.0, alpha=0.3)
    middle = curve_row("MMAMMA", 2, E=2.2, A=30.0, alpha=0.6)
    known = curve_row("AAMMMM", 3, E=2.4, A=30.0, alpha=0.6, known="composer-paper")
    rows = sorted([fast, slow, middle, known], key=lambda row: row["score"])
    assert rows[0]["pattern"] == "MMMMAM" and rows.index(slow) > 0  # the snapshot ranks the fast one first
    by_score = promote(rows, 1)
    assert [row["pattern"] for row in by_score] == ["MMMMAM", "AAMMMM"]
    by_forecast = promote(rows, 1, "forecast", 500_000, 400_384)
    assert by_forecast[0]["pattern"] == "AMAMAM" and by_forecast[-1]["pattern"] == "AAMMMM"
    assert by_forecast[0]["forecast"]["mean"] < by_forecast[0]["score"]
    assert "MMMMAM" not in [row["pattern"] for row in by_forecast[:1]]


def test_the_hedge_adds_the_best_of_the_highest_attention_share():
    fast = curve_row("MMMMMM", 0, E=1.9, A=40.0, alpha=0.7)
    second = curve_row("MMMMMA", 1, E=1.95, A=40.0, alpha=0.7)
    late = curve_row("AAAAMA", 2, E=2.5, A=8.0, alpha=0.3)
    rows = sorted([fast, second, late], key=lambda row: row["score"])
    plain = [row["pattern"] for row in promote(rows, 1, "forecast", 500_000, 400_384)]
    hedged = [row["pattern"] for row in promote(rows, 1, "forecast", 500_000, 400_384, hedge=1)]
    assert "AAAAMA" not in plain and hedged[-1] == "AAAAMA"
    by_score = [row["pattern"] for row in promote(rows, 1, hedge=2)]  # the hedge works on scores too
    assert by_score == ["MMMMMM", "AAAAMA", "MMMMMA"]


# the cpu ladder's rung 1: 61 steps of 2,048 tokens, curve points at these steps, the cooldown from step 49
RUNG1_STEPS, RUNG1_TRUNK = (6, 8, 12, 16, 23, 31, 44, 61), 49 * 2_048


def noisy_row(pattern: str, trial: int, E: float, seed: int, noise: float = 0.01, lost: int = 0) -> dict:
    """A rung-1 row whose curve follows E + 9 t^-0.3 with seeded noise of sd ``noise`` on each point, as a
    single-seed loss on a small slice has; ``lost``: that many of its last trunk points missing (a point whose
    validation failed), which leaves the fit past a quarter of the trunk (the ladder's) 3 points instead of 4."""
    from composer.pattern import attention_share

    rng = np.random.default_rng(seed)
    tokens = [step * 2_048 for step in RUNG1_STEPS]
    losses = [E + 9.0 * t ** -0.3 + rng.normal(0.0, noise) for t in tokens]
    trunk = [i for i, t in enumerate(tokens) if t <= RUNG1_TRUNK]
    missing = set(trunk[len(trunk) - lost:]) if lost else set()
    curve = [{"tokens": t, "loss": None if i in missing else loss} for i, (t, loss) in enumerate(zip(tokens, losses))]
    return {"pattern": pattern, "score": E + 9.0 * 125_000 ** -0.3 - 0.05 + rng.normal(0.0, noise), "trial": trial,
            "known": None, "attention_share": attention_share(pattern),
            "details": {"curve": curve, "trunk_tokens": RUNG1_TRUNK}}


CLEARLY_WORSE = ("MMMMMM", "MMMMMA", "MMMMAA")  # 0.5 above the best: about ten sds of a forecast's difference


@pytest.mark.parametrize("lost", [0, 1], ids=["4 points", "the best two with 3 points"])
def test_promotion_by_forecast_on_noisy_curves_keeps_a_tie_and_drops_the_clearly_worse(lost):
    """Issue 47: the forecast was tested on noiseless curves only. Rung-1 curves with 4 points past a quarter of the
    trunk, noise 0.01 on each point, 12 seeded draws: a candidate 0.005 behind the best (a tie: the forecasts' sd
    is about 0.05) could still be best at z sds of the difference about as often as z says (two sds: 95%), and
    one 0.5 behind never. Red for the 3-point curves before the fix (8 of 12 kept at two sds): they were fitted
    exactly, given an sd of ~1e-8 and dropped as certainly worse; they now get the noise the rung's other curves
    measure (``search.forecast.curve_noise``). The rates are seeded, so the test is deterministic."""
    from search.forecast import could_be_best, forecast_rung

    tie_kept = {1.0: 0, 2.0: 0}
    for seed in range(12):
        rows = [noisy_row("AMAMAM", 0, 1.800, 10 * seed, lost=lost),
                noisy_row("AMMAMA", 1, 1.805, 10 * seed + 1, lost=lost)]
        rows += [noisy_row(p, 2 + i, 2.3, 10 * seed + 2 + i) for i, p in enumerate(CLEARLY_WORSE)]
        forecasts = forecast_rung(rows, 500_000, 400_384, fit_from=0.25)
        assert all(fc.known for fc in forecasts.values())
        for z in tie_kept:
            kept = could_be_best(forecasts, z)
            assert not set(kept) & set(CLEARLY_WORSE), (seed, z, kept)
            tie_kept[z] += {"AMAMAM", "AMMAMA"} <= set(kept)
    assert tie_kept[2.0] >= 10 and tie_kept[1.0] >= 6, tie_kept
    # promote ranks by the same forecasts: the best by forecast and the tie go on, the clearly worse do not
    rows.sort(key=lambda row: row["score"])
    promoted = promote(rows, 1, "forecast", 500_000, 400_384, z=2.0, fit_from=0.25)
    assert {row["pattern"] for row in promoted} == {"AMAMAM", "AMMAMA"}
    assert all(row["forecast"]["sd"] > 0.02 for row in promoted)


def test_without_a_curve_with_a_point_to_spare_every_forecast_could_be_best():
    """No curve of the rung has more points than parameters: nothing measures their noise, so no forecast rules
    another out and the rung keeps as many more as it promotes (by forecast), rather than trusting an exact fit."""
    rows = [noisy_row("AMAMAM", 0, 1.800, 0, lost=1), noisy_row("AMMAMA", 1, 1.805, 1, lost=1)]
    rows += [noisy_row(p, 2 + i, 2.3, 2 + i, lost=1) for i, p in enumerate(CLEARLY_WORSE)]
    promoted = promote(sorted(rows, key=lambda row: row["score"]), 2, "forecast", 500_000, 400_384, fit_from=0.25)
    assert len(promoted) == 4 and {"AMAMAM", "AMMAMA"} <= {row["pattern"] for row in promoted}  # 2 + 2 more
    assert all(row["forecast"]["sd"] is None and row["forecast"]["method"] == NO_INTERVAL for row in promoted)


def test_a_ladder_refuses_an_unknown_ranking():
    with pytest.raises(ConfigError, match="promote_by"):
        Ladder("bad", (Rung("rung-smoke-0", None), Rung("rung-smoke-1", 2, promote_by="magic")), "")
