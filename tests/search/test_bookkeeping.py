"""The search's bookkeeping (issue 34): a study is its settings, a rung trains exactly its promotions whatever the
resumes and deadlines, a transient failure gets a retry, and the KV-cache objective measures the model trained.

The successive-halving tests run the real engine and ladder with the ``lm`` evaluator's training replaced by a
deterministic fake (``FakeTraining``): bookkeeping, not learning, is under test, and each search takes seconds."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import types
from pathlib import Path

import optuna
import pytest

from composer.accounting import analyze
from composer.errors import ConfigError
from composer.presets import get_preset
from search import engine
from search.cost import measured as measured_cost
from search import run as search_run
from search.config import SCORE_SETTINGS_DIGESTED, SearchConfig, budget_definition_digest
from search.engine import Stage, make_objective, open_study
from search.growth import grow
from search.evaluators import make_evaluator
from search.fidelity import promote
from search.lm import LM_BUDGETS, LanguageModelEvaluator, confirm_budget, get_lm_budget
from search.recall import get_recall_budget
from search.run import run_search, summary_text
from search.space import SearchSpace

SMOKE = {"evaluator": "lm", "strategy": "successive-halving", "budget": "smoke", "widths": "tiny",
         "primitives": "AM", "sampler": "random", "trials": 3, "precision": "fp32", "wandb": "off"}


class FakeTraining:
    """Stands in for ``LanguageModelEvaluator.train_once``: a loss from (pattern, rate, data, seed), lower for
    every later run when ``improving`` (so a resumed search's new candidates beat the old), failures on demand
    (``fail[pattern]``: exceptions raised by its next runs), a log of what trained, and a clock that advances
    ``seconds_per_run`` per run (patched into the engine and the rung loop)."""

    def __init__(self, improving: bool = False, seconds_per_run: float = 0.0) -> None:
        self.improving = improving
        self.seconds_per_run = seconds_per_run
        self.fail: dict[str, list[Exception]] = {}
        self.trained: list[str] = []
        self.now = 1_000_000.0

    def __call__(self, evaluator: LanguageModelEvaluator, pattern: str, lr: float, seed: int):
        self.now += self.seconds_per_run
        self.trained.append(pattern)
        pending = self.fail.get(pattern)
        if pending:
            raise pending.pop(0)
        # the corpus by its file name, not its temporary directory: with the directory every run drew other losses,
        # and the second corpus's search promoted another number of patterns 1 run in a few (a flaky 2x count)
        data = Path(evaluator.data).name if evaluator.data else None
        digest = hashlib.sha256(f"{pattern}|{lr}|{data}|{seed}".encode()).digest()
        loss = 3.0 + digest[0] / 255 + digest[1] / 255**2  # the second byte: two settings tied 1 time in 256
        if self.improving:
            loss -= len(self.trained)
        return loss, 1000.0


@pytest.fixture
def fake(monkeypatch) -> FakeTraining:
    training = FakeTraining()

    def train_once(evaluator, pattern, lr, seed):
        return training(evaluator, pattern, lr, seed)

    monkeypatch.setattr(LanguageModelEvaluator, "train_once", train_once)
    clock = types.SimpleNamespace(time=lambda: training.now, perf_counter=lambda: training.now,
                                  sleep=lambda _: None)
    monkeypatch.setattr(engine, "time", clock)
    monkeypatch.setattr(search_run, "time", clock)
    # timing real models after the last rung takes tenths of a second each, and bookkeeping needs none of it
    # (tests/search/test_measured_cost.py and test_fidelity.py measure)
    monkeypatch.setattr(measured_cost, "measure_row", lambda pattern, target, grid: {"error": "training is faked"})
    return training


def halving(tmp_path: Path, **kwargs) -> SearchConfig:
    return SearchConfig(**{**SMOKE, "out": str(tmp_path / "out"), **kwargs})


def rungs_of(out: str | Path) -> list[dict]:
    return json.loads((Path(out) / "rungs.json").read_text())


# -- 1. a study is its settings ---------------------------------------------------------------------------------


@pytest.mark.parametrize("setting", SCORE_SETTINGS_DIGESTED)
def test_every_setting_that_changes_a_score_changes_the_study_name(setting):
    other = {"widths": "tiny", "target": "llama-350m", "data": "other.jsonl", "tokenizer": "gpt2",
             "min_share": {"A": 0.2}, "max_share": {"A": 0.5}, "max_params": 10**6, "max_kv": "64MiB@32K", "known": False,
             "prune": False, "compile": True, "depth": 12, "attention_at_target": "keep", "text_field": "body",
             "depth_at_target": 16, "max_latency": "5", "min_throughput": "known", "cost_device": "h200",
             "equal_cost": "nemotron-h", "deployed_at": "llama-3.2-1b", "equal_cost_figure": "decode"}
    assert set(other) == set(SCORE_SETTINGS_DIGESTED)
    base = {"data": "other.jsonl"} if setting == "text_field" else {}  # a text field is one of --data's
    if setting == "cost_device":  # says where the limits are costed: one of them with it
        base = {"max_latency": "5"}
    if setting in ("deployed_at", "equal_cost_figure"):  # say where and on what --equal-cost holds cost equal
        base = {"equal_cost": "nemotron-h"}
    default = SearchConfig(precision="fp32", **base)
    assert SearchConfig(precision="fp32", **base, **{setting: other[setting]}).study_name != default.study_name


def test_a_search_at_equal_cost_trains_every_model_at_its_widest_shape_and_says_so(tmp_path, fake, monkeypatch):
    """--equal-cost: the rung at the target trains each model at the widths its growth gives (a scaled preset), a
    layout too deep for the budget at any width is skipped with the reason, and best.json and the summary name the
    reference, the device, the deployed size and that the figures are modeled."""
    from scaling.equal_cost import EqualCost

    config = halving(tmp_path, primitives="AMSD", equal_cost="nemotron-h", trials=6)
    rule = EqualCost("nemotron-h")
    trained_at: dict[str, str] = {}  # trained layout -> the preset it trained at

    def train_once(evaluator, pattern, lr, seed):
        trained_at[pattern] = evaluator.widths_of(pattern)
        return fake(evaluator, pattern, lr, seed)

    monkeypatch.setattr(LanguageModelEvaluator, "train_once", train_once)
    result = run_search(config, echo=lambda _: None)
    best = json.loads((tmp_path / "out" / "best.json").read_text())
    assert best["equal_cost"]["reference"] == "nemotron-h" and best["equal_cost"]["modeled"] is True
    assert "grown to equal cost" in summary_text(result) and "modeled on cpu" in summary_text(result)
    at_target = {row["pattern"]: row for row in result["leaderboard"]}
    for pattern, row in at_target.items():
        grown = grow(pattern, "tiny", row.get("known"), "repeat", equal_cost=rule)
        assert trained_at[grown.layout] == grown.widths, pattern
    assert any(widths != "tiny" for widths in trained_at.values()), "every model trained at the target's widths"
    storage = f"sqlite:///{tmp_path / 'out' / 'study.db'}"
    first = optuna.load_study(study_name=result["rungs"][0]["study"], storage=storage)
    skipped = {t.user_attrs["pattern"]: t.user_attrs["skip_reason"] for t in first.get_trials()
               if "skip_reason" in t.user_attrs}
    assert "costs more than nemotron-h at tiny" in skipped["DMSMAM"], skipped  # Nemotron-Flash: too deep there


def test_a_default_search_keeps_the_study_name_it_had():
    """Studies of default runs written before the digest existed still resume; those written before the ladders
    moved to wsd (issue 36) do not: the same budget names now score under another schedule, so the name says it.
    Red before: a default search resumed in an old --out reused its cosine scores."""
    assert SearchConfig(precision="fp32").study_name == "lm-cpu-successive-halving-6L-AM-gp-score-seed0-wsd"
    assert SearchConfig(precision="fp32", strategy="one-shot").study_name == "lm-cpu-one-shot-6L-AM-gp-score-seed0"


def test_a_second_run_with_other_data_in_the_same_out_trains_again(tmp_path, fake):
    corpus = tmp_path / "other.jsonl"
    corpus.write_text('{"text": "x"}\n')
    first = run_search(halving(tmp_path), echo=lambda _: None)
    trained_first = len(fake.trained)
    second = run_search(halving(tmp_path, data=str(corpus)), echo=lambda _: None)
    assert len(fake.trained) == 2 * trained_first, "the second corpus reused the first one's scores"
    assert second["study"] != first["study"]
    first_scores = {row["pattern"]: row["score"] for row in first["rungs"][0]["leaderboard"]}
    second_scores = {row["pattern"]: row["score"] for row in second["rungs"][0]["leaderboard"]}
    common = set(first_scores) & set(second_scores)
    assert common and all(first_scores[p] != second_scores[p] for p in common)


def test_a_named_study_run_with_other_settings_stops_with_one_line(tmp_path, fake):
    corpus = tmp_path / "other.jsonl"
    corpus.write_text('{"text": "x"}\n')
    run_search(halving(tmp_path, study="mine"), echo=lambda _: None)
    trained = len(fake.trained)
    with pytest.raises(ConfigError, match=r"study 'mine' in .* was run with data=None \(now '.*other.jsonl'\)") as err:
        run_search(halving(tmp_path, study="mine", data=str(corpus)), echo=lambda _: None)
    assert "\n" not in str(err.value) and "another --out or --study" in str(err.value)
    assert len(fake.trained) == trained



def test_a_study_scored_under_another_definition_of_its_budget_is_refused(tmp_path, fake, monkeypatch):
    """A budget redefined under its name (the recall probe's ``probe`` was, in issue 37) must not resume the scores
    of its old definition; its prose may change freely. Red before: the second search reused rung 0's scores."""
    run_search(halving(tmp_path), echo=lambda _: None)
    trained = len(fake.trained)
    rung0 = LM_BUDGETS["rung-smoke-0"]
    monkeypatch.setitem(LM_BUDGETS, "rung-smoke-0", dataclasses.replace(rung0, description="reworded"))
    run_search(halving(tmp_path), echo=lambda _: None)
    assert len(fake.trained) == trained, "a reworded description trained again"

    monkeypatch.setitem(LM_BUDGETS, "rung-smoke-0", dataclasses.replace(rung0, tokens=2 * rung0.tokens))
    with pytest.raises(ConfigError, match=r"was scored under another definition of budget 'rung-smoke-0'") as err:
        run_search(halving(tmp_path), echo=lambda _: None)
    assert "\n" not in str(err.value) and "another --out or --study" in str(err.value)
    assert len(fake.trained) == trained


def test_a_budget_definition_digest_covers_a_ladders_rungs_and_the_probe():
    ladder = budget_definition_digest("lm", "smoke", "successive-halving")
    assert ladder and ladder != budget_definition_digest("lm", "rung-smoke-0")
    probe = get_recall_budget("probe")
    assert budget_definition_digest("recall", "probe") == budget_definition_digest("recall", probe)
    assert budget_definition_digest("recall", dataclasses.replace(probe, steps=4000)) != \
        budget_definition_digest("recall", "probe")
    assert budget_definition_digest("my_module:Evaluator", "cpu") is None
    # a field at its default is left out: one added later (LMBudget.confirms was) leaves the digests as they were
    rung = LM_BUDGETS["rung-cpu-2"]
    assert budget_definition_digest("lm", dataclasses.replace(rung, confirms=False)) == \
        budget_definition_digest("lm", "rung-cpu-2")
    assert budget_definition_digest("lm", dataclasses.replace(rung, confirms=True)) != \
        budget_definition_digest("lm", "rung-cpu-2")


def test_confirm_seeds_pair_the_answer_over_seeds_and_a_resume_trains_nothing_again(tmp_path, fake):
    """--confirm-seeds 3: the best new and the best known finalist train seeds 1 and 2 at the last rung's budget, and
    the answer's interval is paired over seeds 0-2 instead of resting on a seed spread measured elsewhere."""
    result = run_search(halving(tmp_path, confirm_seeds=3), echo=lambda _: None)
    said = result["vs_known"]
    confirmed = result["confirmation"]
    assert sorted(confirmed["patterns"]) == sorted([said["best_new"]["pattern"], said["best_known"]["pattern"]])
    assert confirmed["study"].endswith("-confirm3") and confirmed["failures"] == []
    assert said["seeds"] == [0, 1, 2] and said["interval"].startswith("paired over seeds 0, 1, 2")
    rows = {row["pattern"]: row for row in result["leaderboard"]}
    losses = rows[said["best_new"]["pattern"]]["evidence"]["scores"]
    assert losses["0"] == rows[said["best_new"]["pattern"]]["score"] and len(set(losses.values())) == 3
    text = summary_text(result)
    assert "confirmation (3 seeds each, seed(s) 1, 2 added)" in text and "over seed(s) 0, 1, 2 vs best known" in text
    trained = len(fake.trained)
    again = run_search(halving(tmp_path, confirm_seeds=3), echo=lambda _: None)
    assert len(fake.trained) == trained and again["vs_known"]["ci"] == said["ci"]
    plain = run_search(halving(tmp_path), echo=lambda _: None)  # the same rungs, no confirmation: nothing trains
    assert len(fake.trained) == trained and "confirmation" not in plain and plain["vs_known"]["seeds"] == []


def test_a_confirmation_trains_at_the_rate_the_rungs_kept(monkeypatch):
    """Seeds 1 and 2 of a confirmation start afresh at the rate whose trunk an earlier rung kept at seed 0, so they
    pair with the last rung's run; without a kept trunk they choose among the budget's rates."""
    from search.trunks import TrunkStore

    budget = get_lm_budget(confirm_budget("rung-cpu-2@demo-4m", 2))
    assert (budget.seeds, budget.continues, budget.keeps_trunk, budget.confirms) == (2, False, False, True)
    assert budget_definition_digest("lm", budget.name) != budget_definition_digest("lm", "rung-cpu-2@demo-4m")
    runs = []
    monkeypatch.setattr(LanguageModelEvaluator, "train_once",
                        lambda self, pattern, lr, seed: runs.append((lr, seed)) or (3.0 + seed / 100, 1000.0))
    asked = []
    monkeypatch.setattr(TrunkStore, "rates", lambda self, key: asked.append(key["seed"]) or [2e-3])
    evaluation = LanguageModelEvaluator(budget=budget.name, widths="tiny")("AMAMAM", 1, None)
    assert asked == [0] and runs == [(2e-3, 1), (2e-3, 2)]
    assert evaluation.details["losses"] == {"1": 3.01, "2": 3.02}
    monkeypatch.setattr(TrunkStore, "rates", lambda self, key: [])
    runs.clear()
    LanguageModelEvaluator(budget=budget.name, widths="tiny")("AMAMAM", 1, None)
    assert sorted(lr for lr, seed in runs if seed == 1) == sorted(budget.lrs)
    runs.clear()  # the rate recorded with the promotion needs no trunk
    LanguageModelEvaluator(budget=budget.name, widths="tiny", chosen_rates={"AMAMAM": 1e-3})("AMAMAM", 1, None)
    assert runs == [(1e-3, 1), (1e-3, 2)]


def test_the_front_weighs_the_confirmed_seeds_as_the_verdict_does(tmp_path, fake, monkeypatch):
    """The front and each known layout's place were weighed before the confirmation's seeds reached the rows, so the
    AMSD search's front called the answer's loss "even" with the 7:1 family's where its verdict, paired over 3
    seeds, said better (2026-11-27)."""
    from search.strategies import halving_answer

    seen = {}
    weigh = halving_answer.weigh_front

    def spy(config, answer, noise=None):
        seen.update({row["pattern"]: len(row["evidence"]["scores"]) for row in answer.rows})
        return weigh(config, answer, noise)

    monkeypatch.setattr(halving_answer, "weigh_front", spy)
    result = run_search(halving(tmp_path, confirm_seeds=3, objectives=["score", "kv"]), echo=lambda _: None)
    confirmed = result["confirmation"]["patterns"]
    assert len(confirmed) == 2 and all(seen[pattern] == 3 for pattern in confirmed), seen


def test_a_confirmation_without_the_trunks_trains_each_finalist_at_its_scored_rate(tmp_path, fake):
    """The promotion carries the rate each finalist was scored at, so a confirmation whose trunks are gone (the
    fake training keeps none; a user may delete them) trains 2 runs per finalist, not a new choice of rate (3)."""
    plain = run_search(halving(tmp_path), echo=lambda _: None)
    trained = len(fake.trained)
    confirmed = run_search(halving(tmp_path, confirm_seeds=3), echo=lambda _: None)
    assert len(fake.trained) - trained == 4
    rows = {row["pattern"]: row for row in plain["leaderboard"]}
    for pattern in confirmed["confirmation"]["patterns"]:
        assert fake.trained[trained:].count(rows[pattern]["grown"]["layout"]) == 2


def test_confirm_seeds_2_pairs_the_answer_over_2_seeds(tmp_path, fake):
    """Red before (issue 47, item 4): the confirmation's budget trains one seed, whose loss the evaluator wrote only
    for 2 or more, so --confirm-seeds 2 confirmed nothing and the answer stayed on one seed."""
    result = run_search(halving(tmp_path, confirm_seeds=2), echo=lambda _: None)
    said, confirmed = result["vs_known"], result["confirmation"]
    assert sorted(confirmed["patterns"]) == sorted([said["best_new"]["pattern"], said["best_known"]["pattern"]])
    assert confirmed["further_seeds"] == [1] and confirmed["refused"] == []
    assert said["seeds"] == [0, 1] and said["interval"].startswith("paired over seeds 0, 1") and said["ci"]
    best = json.loads((Path(result["out"]) / "best.json").read_text())["vs_known"]
    assert best["setting"] == {"evaluator": "lm", "budget": "rung-smoke-1", "preset": "tiny", "data": None,
                               "tokenizer": None, "precision": "fp32", "device": "cpu"}
    assert best["new_seeds"] == best["known_seeds"] == [0, 1] and best["noise_source"] is None
    assert best["held_out"]["seeds"] == [1] and "single draw" in best["held_out"]["method"]


def test_a_gpu_ladder_confirmation_trains_only_seeds_its_last_rung_did_not(tmp_path, fake):
    """Red before (item 2): rung-gpu-2 trains seeds 0-2, the confirmation trained 1 and 2 again, and the 3-seed mean
    was written as seed 0. Now --confirm-seeds 5 adds seeds 3 and 4, each finalist's record holds the 5 losses as
    trained, and the verdict over the seeds that chose nothing is theirs."""
    seeds_seen = []
    train = LanguageModelEvaluator.train_once

    def spy(evaluator, pattern, lr, seed):
        seeds_seen.append((evaluator.spec.name, seed))
        return train(evaluator, pattern, lr, seed)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(LanguageModelEvaluator, "train_once", spy)
        result = run_search(halving(tmp_path, budget="gpu", target="tiny", confirm_seeds=5), echo=lambda _: None)
    confirming = {seed for name, seed in seeds_seen if name.startswith("confirm")}
    assert confirming == {3, 4}
    assert {seed for name, seed in seeds_seen if name.startswith("rung-gpu-2")} == {0, 1, 2}
    said = result["vs_known"]
    assert said["seeds"] == [0, 1, 2, 3, 4] and said["held_out"]["seeds"] == [3, 4]
    rows = {row["pattern"]: row for row in result["leaderboard"]}
    new = rows[said["best_new"]["pattern"]]
    assert {k: new["evidence"]["scores"][k] for k in ("0", "1", "2")} == new["details"]["losses"]
    assert said["best_new"]["mean"] == pytest.approx(sum(new["evidence"]["scores"].values()) / 5)
    with pytest.raises(ConfigError, match="already trains 3 seeds of every finalist; pass --confirm-seeds 4"):
        run_search(halving(tmp_path / "again", budget="gpu", target="tiny", confirm_seeds=3), echo=lambda _: None)
    assert not (tmp_path / "again").exists()


def test_a_last_rung_that_scored_nothing_is_not_confirmed_and_no_timeout_is_blamed(tmp_path, fake):
    """Red before (item 3): every promotion of the last rung diverged; the confirmation then trained rung 0's pair at
    the target's budget and paired their 6-layer losses with the target model's, and the summary blamed a --timeout
    that was never given."""
    train = LanguageModelEvaluator.train_once

    def diverge_at_the_last_rung(evaluator, pattern, lr, seed):
        if evaluator.spec.name.startswith(("rung-smoke-1", "confirm")):
            return None, None
        return train(evaluator, pattern, lr, seed)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(LanguageModelEvaluator, "train_once", diverge_at_the_last_rung)
        result = run_search(halving(tmp_path, confirm_seeds=3), echo=lambda _: None)
    assert "confirmation" not in result
    assert all(row.get("rung", 0) == 0 for row in result["leaderboard"])
    early = result["vs_known"]["stopped_early"]
    assert "--timeout" not in early["why"] and "rung 1 scored no candidate" in early["why"]
    assert result["vs_known"]["setting"]["budget"] == "rung-smoke-0"


def test_a_finalist_whose_trunk_is_gone_trains_at_the_rate_the_rung_below_chose(monkeypatch):
    """Red before (item 6): at a rung that continues the rung below's trunks, a candidate without one trained every
    rate from scratch and kept the lower loss on the tokens that score it, another procedure beside the continued
    candidates' one rate. Now it trains that rung's rate from scratch, and says so."""
    from search.trunks import TrunkStore

    runs = []
    monkeypatch.setattr(LanguageModelEvaluator, "train_once",
                        lambda self, pattern, lr, seed: runs.append((lr, seed)) or (3.0 + lr, 1000.0))
    monkeypatch.setattr(TrunkStore, "rates", lambda self, key: [])
    evaluation = LanguageModelEvaluator(budget="rung-cpu-2@tiny", widths="tiny",
                                        chosen_rates={"AMAMAM": 2e-3})("AMAMAM", 0, None)
    assert runs == [(2e-3, 0)] and evaluation.details["lr"] == 2e-3
    assert evaluation.details["trunk_missing"].startswith("trained from scratch at the rate the rung below chose")
    assert "lr_sweep" not in evaluation.details


def test_a_continuing_rungs_promotions_carry_the_rate_they_were_scored_at():
    """The promotions into a rung that continues trunks (the cpu ladder's rung 2) carry each finalist's rate, which
    the evaluator trains at where the trunk is gone; a rung that starts afresh (rung 1) chooses its own."""
    from search.engine import Stage
    from search.strategies.base import StageRun, make_space
    from search.strategies.successive_halving import SuccessiveHalving, rung_config

    config = SearchConfig(precision="fp32", wandb="off")
    space = make_space(config, config.layers)
    below = [{"pattern": p, "score": s, "trial": i, "lr": lr, "known": k}
             for i, (p, s, lr, k) in enumerate([("AAMMMM", 1.5, 2e-3, "composer-paper"), ("AMMAMM", 1.6, 1e-3, None),
                                                ("AMAMAM", 1.7, 1e-3, "llama")])]
    done = [StageRun(rung_config(config, i), Stage(i, space, 3, f"s{i}", ()), None, below, 0.0, 0.0) for i in (0, 1)]
    plan = SuccessiveHalving().next_stage(config, done, lambda _: None)
    assert {pattern: attrs.get("chosen_lr") for pattern, attrs in plan.stage.first} == \
        {"AAMMMM": 2e-3, "AMMAMM": 1e-3, "AMAMAM": 1e-3}
    rung1 = SuccessiveHalving().next_stage(config, done[:1], lambda _: None)
    assert not any("chosen_lr" in attrs for _, attrs in rung1.stage.first)


def test_confirm_seeds_need_successive_halving():
    with pytest.raises(ConfigError, match="--confirm-seeds trains successive halving's finalists"):
        SearchConfig(strategy="one-shot", confirm_seeds=3)
    with pytest.raises(ConfigError, match="confirm_seeds must be a whole number"):
        SearchConfig(confirm_seeds=0)


def test_no_finalist_meeting_min_recall_is_no_answer_and_no_recommendation(tmp_path, fake):
    """Red before: the summary said "no answer" and then "recommended <best score>", and "no floor" although the
    known layouts were scored (none met --min-recall, so none was in the ranking the answer comes from)."""
    result = run_search(halving(tmp_path, min_recall=1.0, recall_budget="probe-smoke"), echo=lambda _: None)
    text = summary_text(result)
    assert result["vs_known"]["recommended"] is None and "no answer: no finalist meets --min-recall" in text
    assert "recommended none (no answer, above)" in text and "no floor" not in text

# -- 2. a resumed rung trains its promotions and ranks only them ------------------------------------------------


def test_a_resumed_search_with_more_trials_trains_the_new_promotions_and_ranks_only_them(tmp_path, fake):
    fake.improving = True  # the second run's new candidates beat every old one, so rung 1's promotions change
    run_search(halving(tmp_path), echo=lambda _: None)
    old_finalists = {row["pattern"] for row in rungs_of(tmp_path / "out")[1]["leaderboard"]}
    result = run_search(halving(tmp_path, trials=6), echo=lambda _: None)
    rungs = rungs_of(result["out"])
    promoted = {row["pattern"] for row in promote(rungs[0]["leaderboard"], 2, known="all")}
    assert promoted != old_finalists, "the test needs rung 0's leaderboard to have changed"
    assert {row["pattern"] for row in rungs[1]["leaderboard"]} == promoted
    assert {row["pattern"] for row in result["leaderboard"]} == promoted
    assert rungs[1]["missing"] == []


# -- 3. a deadline keeps the floor, or says what is missing -----------------------------------------------------


def test_a_deadline_inside_the_last_rung_keeps_the_known_layout_and_says_what_is_missing(tmp_path, fake):
    """Rung 0 trains 3 candidates at one rate (3 runs); the last rung trains each promotion at two rates. The
    deadline falls after rung 0 and the first promotion of rung 1: that one is the known layout (the floor)."""
    fake.seconds_per_run = 100.0
    lines: list[str] = []
    result = run_search(halving(tmp_path, timeout=450), echo=lines.append)
    rungs = rungs_of(result["out"])
    assert [r["rung"] for r in rungs] == [0, 1]
    assert len(rungs[1]["leaderboard"]) == 1 and rungs[1]["leaderboard"][0]["known"]
    assert rungs[1]["missing"] and all("--timeout" in m["reason"] for m in rungs[1]["missing"])
    early = result["vs_known"]["stopped_early"]
    assert early["rung"] == 1 and {m["pattern"] for m in early["missing"]} == {m["pattern"] for m in rungs[1]["missing"]}
    text = summary_text(result)
    assert "stopped early" in text and all(m["pattern"] in text for m in early["missing"])
    best = json.loads((Path(result["out"]) / "best.json").read_text())
    assert best["vs_known"]["stopped_early"]["rung"] == 1


def test_a_deadline_before_the_recall_probe_names_the_probe_in_plain_words(tmp_path, fake):
    """The summary and the progress line name the stage that did not start without its label's colon (they read
    "--timeout passed before recall probe:" before)."""
    fake.seconds_per_run = 100.0
    lines: list[str] = []
    result = run_search(halving(tmp_path, timeout=450, min_recall=0.5, recall_budget="probe-smoke"),
                        echo=lines.append)
    assert "timeout: recall probe not started; the answer is the ranking before it" in lines
    assert "recall probe not run: --timeout passed before recall probe\n" in summary_text(result) + "\n"


def test_no_rung_starts_after_the_deadline(tmp_path, fake):
    fake.seconds_per_run = 100.0
    result = run_search(halving(tmp_path, timeout=250), echo=lambda _: None)
    trained = len(fake.trained)
    assert [r["rung"] for r in rungs_of(result["out"])] == [0]
    assert result["vs_known"]["stopped_early"]["rung"] == 0
    assert trained == 3, "a trial was started after the deadline"


# -- 4. workers racing for a rung's queue -----------------------------------------------------------------------


def test_a_trial_a_rung_did_not_enqueue_trains_nothing(tmp_path, monkeypatch):
    """A worker that asks after another took the last waiting promotion gets a fresh trial from Optuna; it must
    not sample and train a pattern nobody promoted."""
    config = dataclasses.replace(halving(tmp_path), study="rung", budget="rung-smoke-0", strategy="one-shot")
    space = SearchSpace(6, "AM")
    stage = Stage(1, space, 1, "rung", (("AMAMAM", {"promoted_from": 0}),), only_first=True)
    evaluator = make_evaluator("lm", "rung-smoke-0", "tiny", None, None, "fp32", False)
    calls = []
    monkeypatch.setattr(evaluator.__class__, "__call__", lambda *args: calls.append(args))
    study = open_study(config, stage, evaluator)
    trial = study.ask()  # nothing waiting: a new trial, as a racing worker gets
    with pytest.raises(optuna.TrialPruned):
        make_objective(config, stage, evaluator, study)(trial)
    assert calls == [] and trial.params == {}
    assert "another worker" in study.trials[-1].user_attrs["skip_reason"]


# -- 5. a transient failure gets its retry; the same failure twice is deterministic -----------------------------


def test_a_known_layout_that_failed_once_is_retried_and_keeps_the_floor(tmp_path, fake):
    fake.fail["AMAMAM"] = [RuntimeError("OutOfMemoryError: CUDA out of memory")]
    result = run_search(halving(tmp_path), echo=lambda _: None)
    rung0 = rungs_of(result["out"])[0]
    assert "AMAMAM" in {row["pattern"] for row in rung0["leaderboard"]}
    assert [f["pattern"] for f in rung0["failures"]] == ["AMAMAM"]  # failed once, then scored by its retry
    assert any(row.get("known") for row in result["leaderboard"])


def test_a_pattern_that_fails_the_same_way_twice_is_deterministic_and_never_trained_again(tmp_path, fake):
    fake.fail["AMAMAM"] = [RuntimeError("ValueError: bad shape")] * 5
    result = run_search(halving(tmp_path), echo=lambda _: None)
    assert fake.trained.count("AMAMAM") == 2
    reasons = [f["reason"] for f in rungs_of(result["out"])[0]["failures"] if f["pattern"] == "AMAMAM"]
    assert reasons == ["RuntimeError: ValueError: bad shape"] * 2
    run_search(halving(tmp_path), echo=lambda _: None)  # resumed: not tried a third time
    assert fake.trained.count("AMAMAM") == 2


# -- 6. the KV-cache objective measures the model the pattern becomes -------------------------------------------


def test_the_kv_objective_is_measured_on_the_stacked_model_at_the_target(tmp_path, monkeypatch):
    demo = get_preset("demo-4m").arch
    assert analyze(demo.with_pattern(grow("AMAMAM", "demo-4m").layout)).kv_cache_bytes_per_token == 2304
    llama = get_preset("llama-3.2-1b").arch
    ratio = (analyze(llama.with_pattern(grow("AMAMAM", "llama-3.2-1b").layout)).kv_cache_bytes_per_token
             / analyze(llama.with_pattern(grow("AMMMMM", "llama-3.2-1b").layout)).kv_cache_bytes_per_token)
    assert ratio == 4.5

    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    config = SearchConfig(evaluator="toy_evaluator:make", budget="smoke", wandb="off", out=str(tmp_path / "out"),
                          objectives=["score", "kv"], target="demo-4m", trials=4, sampler="random")
    result = run_search(config, echo=lambda _: None)
    for row in result["leaderboard"]:
        stacked = analyze(demo.with_pattern(grow(row["pattern"], "demo-4m").layout))
        assert row["kv_cache_bytes_per_token"] == stacked.kv_cache_bytes_per_token == row["objectives"][1]


def test_every_finalist_the_confirmation_study_holds_gets_its_seeds(tmp_path, fake):
    """A search run again under another --min-recall confirms another pair in the same study (the AMSD search: the
    7:1 family under `known`, Nemotron-H under 0.99): the front then weighed Nemotron-H on one seed against the
    stand-in spread and called the answer's loss "even" where its 3 confirmed seeds say better."""
    from search.strategies.base import Answer, StageRun
    from search.evidence_record import Evidence
    from search.lm import stage_setting
    from search.strategies.halving_answer import add_confirmed_seeds
    from search.strategies.successive_halving import rung_config

    result = run_search(halving(tmp_path, confirm_seeds=3), echo=lambda _: None)
    study = optuna.load_study(study_name=result["confirmation"]["study"],
                              storage=f"sqlite:///{tmp_path / 'out' / 'study.db'}")
    confirmed_before = set(result["confirmation"]["patterns"])
    other = next(row for row in result["leaderboard"] if row["pattern"] not in confirmed_before)
    losses = {"1": other["score"] + 0.01, "2": other["score"] + 0.02}  # an earlier run's pair, trained here
    study.add_trial(optuna.trial.create_trial(value=other["score"] + 0.015, user_attrs={
        "pattern": other["pattern"], "details": {"losses": losses, "lr": other["lr"]}}))
    config = halving(tmp_path, confirm_seeds=3)
    last = rung_config(config, 1)
    rows = [{**row, "evidence": Evidence.of_row(row, stage_setting(last), 0).as_dict()}  # the last rung's own
            for row in result["leaderboard"]]
    answer = Answer(study, rows)
    confirm = dataclasses.replace(last, budget=confirm_budget(last.budget, 2), seed=1)
    add_confirmed_seeds(config, answer, StageRun(confirm, None, study, [], 0.0, 0.0))
    assert set(answer.summary["confirmation"]["patterns"]) == confirmed_before | {other["pattern"]}
    row = next(row for row in rows if row["pattern"] == other["pattern"])
    assert row["evidence"]["scores"] == {"0": other["score"], **losses}


def test_a_halving_search_that_keeps_attention_trains_costs_and_says_the_kept_models(tmp_path, fake):
    """--attention-at-target keep: every rung at the target trains a new pattern's model with its attention kept
    (and records that model as its cost's), Llama's layout stays stacked, and the rung's line says so."""
    lines = []
    result = run_search(halving(tmp_path, target="demo-4m", attention_at_target="keep"), echo=lines.append)
    last = result["rungs"][-1]["leaderboard"]
    assert any(not row.get("known") and "A" in row["pattern"] for row in last)
    for row in last:
        kept = grow(row["pattern"], "demo-4m", row.get("known"), "keep").layout
        assert row["grown"]["layout"] == kept and kept in fake.trained
        if row.get("known"):  # Llama's and the paper's own rule is their stack
            assert kept == grow(row["pattern"], "demo-4m", row["known"]).layout
            assert row["known"] != "llama" or kept == "AM" * 9
        elif "A" in row["pattern"]:
            assert kept.count("A") == row["pattern"].count("A") < grow(row["pattern"], "demo-4m").layout.count("A")
    assert any("new patterns grown to demo-4m with their attention layers kept, not repeated" in line
               for line in lines)


def test_a_search_run_again_says_it_resumed_and_a_first_run_does_not(tmp_path, fake):
    first, again = [], []
    run_search(halving(tmp_path), echo=first.append)
    assert not any(line.startswith("resuming:") for line in first)
    trained = len(fake.trained)
    run_search(halving(tmp_path), echo=again.append)
    [said] = [line for line in again if line.startswith("resuming:")]
    assert "finished trial(s)" in said and "not trained again" in said and len(fake.trained) == trained


def test_the_leaderboard_sizes_the_model_each_score_was_trained_on_and_says_a_dropped_layer(tmp_path, fake):
    """Issue 61, item 4: under "ranked at the target" the leaderboard printed AAMMMM's 6 layers at the search's
    widths (238,016 parameters) while the last rung trained AAMMM (growth to tiny's size dropped an M layer) and
    said nothing of the drop. Now its size is the model search.growth.grow builds there, and the drop is said, at
    the rung that trains it and under the table (also from a leaderboard.json written before the key)."""
    from search.summary import format_table

    lines = []
    result = run_search(halving(tmp_path), echo=lines.append)
    grown = grow("AAMMMM", "tiny", "composer-paper")
    size = analyze(grown.arch).non_embedding_params
    assert grown.layout == "AAMMM" and size == 172_416 and "one layer (M) dropped to fit tiny's size" in grown.how
    paper = next(row for row in result["leaderboard"] if row["pattern"] == "AAMMMM")
    assert paper["scored_model"] == {"pattern": "AAMMM", "widths": "tiny", "params": analyze(grown.arch).params,
                                     "non_embedding_params": size, "attention_share": 0.4,
                                     "grown": "AAMMMM grows to AAMMM at tiny: one layer (M) dropped to fit tiny's "
                                              "size"}
    assert paper["non_embedding_params"] == 221_632  # the searched pattern at the search's widths, as before
    text = summary_text(result)
    [row_line] = [line for line in text.splitlines() if line.split()[1:2] == ["AAMMMM"]]
    assert row_line.split()[4:7] == ["AAMMM", "tiny", f"{size:,}"]
    assert "\n   AAMMMM grows to AAMMM at tiny: one layer (M) dropped to fit tiny's size\n" in text
    assert any(line.startswith("rung 1") and "promoting" in line and "AAMMMM grows to AAMMM at tiny" in line
               for line in lines)
    written = json.loads((tmp_path / "out" / "leaderboard.json").read_text())
    older = [{key: value for key, value in row.items() if key != "scored_model"} for row in written]
    assert format_table(older) == format_table(written) == format_table(result["leaderboard"])
    csv = (tmp_path / "out" / "leaderboard.csv").read_text()
    assert "scored_non_embedding_params" in csv.splitlines()[0] and ",AAMMM,tiny,172416," in csv
