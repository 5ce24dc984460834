"""The ``lm`` evaluator: a learning rate per candidate, seeds at the chosen rate, training at the target's size."""

from __future__ import annotations

import dataclasses
import signal

import pytest

from composer.errors import ConfigError
from search.evaluation import best_rate as choose_rate
from search.growth import Growth
from search.lm import LM_BUDGETS, LanguageModelEvaluator, LMBudget
from search.mad import CandidateFailed

TINY = LMBudget("test", tokens=4_096, seq_len=32, batch_size=8, lrs=(1e-3, 1e-2), val_tokens=2_048)


def _no_report(step, value):
    raise AssertionError("the lm evaluator has no intermediate values to report")


def test_choose_rate_takes_the_lowest_finite_loss_and_the_lower_rate_on_a_tie():
    assert choose_rate({1e-3: 2.0, 3e-3: 1.5, 1e-2: None}) == 3e-3
    assert choose_rate({1e-3: 1.5, 3e-3: 1.5}) == 1e-3
    assert choose_rate({1e-3: float("nan"), 3e-3: None}) is None


def test_budgets_refuse_bad_rates_and_seeds():
    with pytest.raises(ConfigError, match="distinct positive"):
        LMBudget("bad", 4_096, 32, 8, (1e-3, 1e-3))
    with pytest.raises(ConfigError, match="seeds"):
        LMBudget("bad", 4_096, 32, 8, (1e-3,), seeds=0)
    with pytest.raises(ConfigError, match="unknown budget 'nope'; choose smoke, cpu or gpu \\("):
        LanguageModelEvaluator("nope")
    assert LM_BUDGETS["cpu"].lrs == (1e-3, 3e-3)


def test_every_rate_trains_and_the_score_is_the_best_rates_real_run():
    evaluator = LanguageModelEvaluator(TINY, widths="tiny", precision="fp32")
    result = evaluator("AMAM", 0, _no_report)
    sweep = result.details["lr_sweep"]
    assert set(sweep) == {"0.001", "0.01"}
    best_rate = min(sweep, key=sweep.get)
    assert result.details["lr"] == float(best_rate)
    assert result.score == pytest.approx(sweep[best_rate])
    assert sweep["0.001"] != sweep["0.01"]  # the rates really trained differently


def test_a_diverged_rate_is_recorded_and_never_chosen(monkeypatch):
    evaluator = LanguageModelEvaluator(TINY, widths="tiny", precision="fp32")
    losses = {1e-3: 2.5, 1e-2: None}
    monkeypatch.setattr(evaluator, "train_once", lambda pattern, lr, seed: (losses[lr], 100.0))
    result = evaluator("AMAM", 0, _no_report)
    assert result.details["lr"] == 1e-3 and result.score == 2.5
    assert result.details["lr_sweep"] == {"0.001": 2.5, "0.01": None}
    losses[1e-3] = None
    with pytest.raises(CandidateFailed, match="every learning rate"):
        evaluator("AMAM", 0, _no_report)


def test_further_seeds_train_at_the_chosen_rate_and_the_score_is_their_mean(monkeypatch):
    spec = LMBudget("seeded", 4_096, 32, 8, (1e-3, 1e-2), seeds=3)
    evaluator = LanguageModelEvaluator(spec, widths="tiny", precision="fp32")
    calls = []

    def fake(pattern, lr, seed):
        calls.append((lr, seed))
        return (1.0 + lr * 100 + seed * 0.1), 1.0

    monkeypatch.setattr(evaluator, "train_once", fake)
    result = evaluator("AMAM", 5, _no_report)
    assert calls == [(1e-3, 5), (1e-2, 5), (1e-3, 6), (1e-3, 7)]
    assert result.details["losses"] == {"5": pytest.approx(1.6), "6": pytest.approx(1.7), "7": pytest.approx(1.8)}
    assert result.score == pytest.approx(1.7)


def test_a_budget_with_a_target_trains_the_pattern_grown_to_the_targets_size(monkeypatch):
    spec = LMBudget("target", 4_096, 32, 8, (1e-3,), extrapolate_to="demo-4m")
    evaluator = LanguageModelEvaluator(spec, widths="search-1m", precision="fp32")
    assert evaluator.widths == "demo-4m"
    seen = []
    monkeypatch.setattr(evaluator, "train_once", lambda pattern, lr, seed: (seen.append(pattern), (2.0, 1.0))[1])
    result = evaluator("AAMMMM", 0, _no_report)
    from scaling.extrapolate import extrapolate

    grown = extrapolate("AAMMMM", "demo-4m", method="auto").pattern
    assert seen == [grown] and len(grown) > 6
    assert result.details["grown"]["layout"] == grown and result.details["grown"]["widths"] == "demo-4m"


def test_at_a_depth_every_model_trains_at_its_own_widths_and_the_trunk_key_says_them(monkeypatch):
    """--depth-at-target: the pattern laid out at N layers trains at the scaled preset its size asks for, and a trunk
    kept at one width is never continued at another."""
    spec = LMBudget("target", 4_096, 32, 8, (1e-3,), extrapolate_to="demo-4m")
    evaluator = LanguageModelEvaluator(spec, widths="search-1m", precision="fp32", growth=Growth("keep", 16))
    seen = []
    monkeypatch.setattr(evaluator, "train_once", lambda pattern, lr, seed: (seen.append(pattern), (2.0, 1.0))[1])
    result = evaluator("SADDDD", 0, _no_report)
    assert seen == ["SDDDDSDDADDSDDDD"]
    assert result.details["widths"] == "demo-4m:d280"
    assert evaluator.train_config(seen[0], 1e-3, 0, "/tmp/x").preset == "demo-4m:d280"
    assert evaluator.trunk_key(seen[0], 1e-3, 0)["widths"] == "demo-4m:d280"
    by_depth = LanguageModelEvaluator(spec, widths="search-1m", precision="fp32")
    assert by_depth.widths_of(by_depth.grown("SADDDD").layout) == "demo-4m"


@pytest.mark.parametrize("signum, status", [(signal.SIGTERM, 143), (signal.SIGINT, 1)], ids=["SIGTERM", "Ctrl-C"])
def test_a_stopped_candidate_says_how_to_resume_the_search_not_where_its_temporary_checkpoint_was(
        signum, status, monkeypatch, capsys):
    """Issue 34: SIGTERM during a candidate printed ``SIGTERM: saved /tmp/composer-lm-eval-.../step-*.ckpt; continue
    with --resume``: a file deleted with the candidate's directory and a flag ``composer search`` does not take."""
    from tests.composer.training.preempt import signal_at_step

    signal_at_step(monkeypatch, step=1, signum=signum)
    evaluator = LanguageModelEvaluator(TINY, widths="tiny", precision="fp32")
    with pytest.raises(SystemExit) as stopped:
        evaluator("AMAM", 0, _no_report)
    assert stopped.value.code == status  # a preemption still reads as one to a scheduler
    err = capsys.readouterr().err
    assert "stopped while training candidate AMAM;" in err and "re-run the same command with the same --out" in err
    assert "composer-lm-eval-" not in err and "--resume" not in err and "SIGTERM: saved" not in err
    # a search's next candidate can still be stopped with Ctrl-C (Lightning may ignore SIGINT after one)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_missing_local_data_path_is_refused_when_the_evaluator_is_built_and_a_hub_name_is_not(monkeypatch,
                                                                                                 tmp_path):
    """The up-front check of --data reads no corpus and asks no network: a Hugging Face dataset name passes
    offline (it is loaded when a candidate trains); a local-looking path that does not exist is a DataError."""
    from composer.data import DataError

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)  # the relative paths below name nothing
    assert LanguageModelEvaluator(TINY, data="roneneldan/TinyStories").data == "roneneldan/TinyStories"
    for missing in ("/nonexistent/corpus.jsonl", "corpus.txt", "./corpus"):
        with pytest.raises(DataError, match=f"dataset path {missing!r} does not exist"):
            LanguageModelEvaluator(TINY, data=missing)


SHORT = LMBudget("short", 16 * 256, 32, 8, (1e-3, 1e-2), val_tokens=1_024, schedule="wsd", warmup=2,
                 curve_points=4, curve_tokens=512, keeps_trunk=True)
LONG = LMBudget("long", 40 * 256, 32, 8, (1e-3, 1e-2), val_tokens=1_024, schedule="wsd", warmup=2,
                curve_points=4, curve_tokens=512, continues=True)


def test_a_rung_that_continues_trains_only_the_tokens_it_adds_and_equals_a_fresh_run(tmp_path):
    """Issue 36's freeze-thaw at the evaluator: the short rung keeps its chosen rate's trunk in the search's
    store; the long rung continues it at that rate only, trains 40 - 13 steps instead of 2 x 40, keeps the short
    rung's curve points, and scores exactly what a fresh run of the long budget at that rate scores."""
    short = LanguageModelEvaluator(SHORT, "tiny", trunks=tmp_path / "trunks")("AMSA", 0, _no_report)
    kept = short.details["lr"]
    assert short.details["trunk_tokens"] == 13 * 256 and short.details["trained_tokens"] == 2 * 16 * 256
    assert len(short.details["curve"]) >= 3
    longer = LanguageModelEvaluator(LONG, "tiny", trunks=tmp_path / "trunks")("AMSA", 0, _no_report)
    assert longer.details["lr"] == kept and "lr_sweep" not in longer.details  # the trunk's rate, not the grid
    assert longer.details["continued_from_tokens"] == 13 * 256
    assert longer.details["trained_tokens"] == (40 - 13) * 256
    earlier = {point["step"] for point in short.details["curve"] if point["tokens"] <= 13 * 256}
    assert earlier <= {point["step"] for point in longer.details["curve"]}
    fresh = LanguageModelEvaluator(dataclasses.replace(LONG, lrs=(kept,), continues=False), "tiny")
    assert longer.score == fresh("AMSA", 0, _no_report).score


def test_a_candidate_stopped_in_its_trunk_continues_it_when_the_search_runs_again(tmp_path, monkeypatch, capsys):
    """A search stopped during a candidate at a rung with trunks used to train it again from its start (the AMSD
    search lost 8 of a rung-2 run's 20 minutes to a SIGTERM). Its trunk now trains in the search's store with a
    checkpoint every eighth; run again, the candidate continues from the last one and scores what an unstopped
    run scores, and once scored it leaves no trunk in training behind."""
    import composer.training.continuation as continuation
    from tests.composer.training.preempt import signal_at_step

    trunks = tmp_path / "trunks"
    LanguageModelEvaluator(SHORT, "tiny", trunks=trunks)("AMSA", 0, _no_report)  # keeps its trunk at step 13
    with monkeypatch.context() as stopping:
        signal_at_step(stopping, step=22, signum=signal.SIGTERM)
        with pytest.raises(SystemExit):
            LanguageModelEvaluator(LONG, "tiny", trunks=trunks)("AMSA", 0, _no_report)
    assert "this one continues from its trunk's last checkpoint" in capsys.readouterr().err
    left = [path.name for path in trunks.glob("*/running/*/checkpoints/step-*.ckpt")]
    assert left == ["step-00000020.ckpt"]  # 32 trunk steps saved every 4; stopped after 22
    continued_from = []
    real = continuation.interrupted_trunk
    monkeypatch.setattr(continuation, "interrupted_trunk",
                        lambda *args: continued_from.append(real(*args)) or continued_from[-1])
    again = LanguageModelEvaluator(LONG, "tiny", trunks=trunks)("AMSA", 0, _no_report)
    assert [path.name for path in continued_from] == ["step-00000020.ckpt"]
    assert not list(trunks.glob("*/running")), "a scored candidate leaves no trunk in training"
    fresh = LanguageModelEvaluator(dataclasses.replace(LONG, lrs=(again.details["lr"],), continues=False), "tiny")
    assert again.score == fresh("AMSA", 0, _no_report).score


def test_a_rung_keeping_lower_trunks_lets_the_next_choose_the_rate_at_its_own_horizon(tmp_path, monkeypatch):
    """keeps_lower_trunks: the short rung keeps the chosen rate's trunk and every lower rate's; the long rung
    continues each (only the tokens it adds), scores each as a fresh run at that rate would, and chooses among them
    by its own losses. The default search's rung 1 chose 2e-3 where 1e-3 was better at rung 2's 4x tokens: red
    before, the long rung continued the short rung's choice alone."""
    import search.lm.evaluator as lm_evaluator

    highest = lambda losses: max(rate for rate, loss in losses.items() if loss is not None)  # noqa: E731
    short_budget = dataclasses.replace(SHORT, keeps_lower_trunks=True)
    with monkeypatch.context() as choosing:  # the short rung prefers the higher rate, as rung 1 did
        choosing.setattr(lm_evaluator, "best_rate", highest)
        short = LanguageModelEvaluator(short_budget, "tiny", trunks=tmp_path / "trunks")("AMSA", 0, _no_report)
    assert short.details["lr"] == 1e-2
    longer = LanguageModelEvaluator(LONG, "tiny", trunks=tmp_path / "trunks")("AMSA", 0, _no_report)
    sweep = {float(rate): loss for rate, loss in longer.details["lr_sweep"].items()}
    assert set(sweep) == {1e-3, 1e-2} and longer.details["continued_from_tokens"] == 13 * 256
    assert longer.details["trained_tokens"] == 2 * (40 - 13) * 256  # both continued, neither from scratch
    assert longer.details["lr"] == choose_rate(sweep) and longer.score == min(sweep.values())
    for rate, loss in sweep.items():
        fresh = LanguageModelEvaluator(dataclasses.replace(LONG, lrs=(rate,), continues=False), "tiny")
        assert loss == fresh("AMSA", 0, _no_report).score


def test_a_rung_keeping_lower_trunks_keeps_one_when_it_chose_its_lowest_rate(tmp_path, monkeypatch):
    import search.lm.evaluator as lm_evaluator

    monkeypatch.setattr(lm_evaluator, "best_rate", lambda losses: min(losses))
    budget = dataclasses.replace(SHORT, keeps_lower_trunks=True)
    evaluator = LanguageModelEvaluator(budget, "tiny", trunks=tmp_path / "trunks")
    assert evaluator("AMSA", 0, _no_report).details["lr"] == 1e-3
    assert evaluator.trunks.rates(evaluator.trunk_key("AMSA", 0.0, 0)) == [1e-3]
    assert evaluator._rates_to_keep(1e-2, {1e-3: None, 1e-2: 2.0}) == [1e-2]  # a diverged rate keeps nothing
    with pytest.raises(ConfigError, match="keeps_lower_trunks .* needs keeps_trunk"):
        dataclasses.replace(SHORT, keeps_trunk=False, keeps_lower_trunks=True)


def test_without_a_kept_trunk_a_continuing_rung_trains_its_whole_grid(tmp_path):
    """No store (an evaluator outside a search), or nothing kept for the pattern: every rate, from scratch."""
    result = LanguageModelEvaluator(LONG, "tiny", trunks=tmp_path / "empty")("AMSA", 0, _no_report)
    assert set(result.details["lr_sweep"]) == {"0.001", "0.01"}
    assert result.details["trained_tokens"] == 2 * 40 * 256 and "continued_from_tokens" not in result.details


def test_a_shared_trunk_needs_wsd_and_a_warmup_in_steps():
    with pytest.raises(ConfigError, match="warmup a number of steps"):
        LMBudget("bad", 4_096, 32, 8, (1e-3,), schedule="cosine", keeps_trunk=True)
    with pytest.raises(ConfigError, match="warmup a number of steps"):
        LMBudget("bad", 4_096, 32, 8, (1e-3,), schedule="wsd", warmup=0.05, continues=True)


@pytest.mark.parametrize("losses, tried, chosen", [
    ({1e-3: 2.0, 2e-3: 1.9, 4e-3: 1.8}, [1e-3, 2e-3, 4e-3], 4e-3),  # best at the top: one past it, and it wins
    ({5e-4: 1.7, 1e-3: 1.8, 2e-3: 1.9}, [1e-3, 2e-3, 5e-4], 5e-4),  # best at the bottom: half of it
    ({1e-3: 2.0, 2e-3: 1.9, 4e-3: None}, [1e-3, 2e-3, 4e-3], 2e-3),  # the extra rate diverged: the edge stays
])
def test_a_best_rate_at_the_grids_edge_tries_one_rate_past_it(monkeypatch, losses, tried, chosen):
    """Issue 36, item 4: with extend_edge a best rate at the edge of the grid gets one more run past it (flagged
    in details), taken only if it is better. Red without extend_edge: 2 runs, no lr_extended."""
    spec = LMBudget("edge", 4_096, 32, 8, (1e-3, 2e-3), extend_edge=True)
    evaluator = LanguageModelEvaluator(spec, "tiny")
    seen = []
    monkeypatch.setattr(evaluator, "train_once", lambda pattern, lr, seed: (seen.append(lr), (losses[lr], 1.0))[1])
    result = evaluator("AMAM", 0, _no_report)
    assert seen == tried and result.details["lr"] == chosen
    assert result.details["lr_extended"] == tried[-1] and len(result.details["lr_sweep"]) == 3
