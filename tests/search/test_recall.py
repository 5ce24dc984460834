"""The recall-at-length evaluator: MQAR over lengths, pairs scaled with length, usable by composer search."""

from __future__ import annotations

import json
import re

import pytest

from composer.cli import main
from composer.errors import ConfigError
from search.evaluators import make_evaluator
from search.mad.evaluate import CandidateFailed
from search.recall import RECALL_BUDGETS, RecallBudget, RecallEvaluator, lowest_final_loss, parse_lengths


def test_budgets_scale_the_pairs_with_the_length_and_keep_tokens_per_step():
    cpu = RECALL_BUDGETS["cpu"]
    assert cpu.lengths == (64, 256, 1024) and max(cpu.lengths) >= 1024
    assert [cpu.kv_pairs(n) for n in cpu.lengths] == [4, 16, 64]
    assert {cpu.batch_size(n) * n for n in cpu.lengths} == {cpu.tokens_per_step}
    task = cpu.task(1024)
    assert task.seq_len == 1024 and task.num_kv_pairs == 64
    assert task.num_train_examples >= cpu.steps * cpu.batch_size(1024)


@pytest.mark.parametrize("changes, message", [
    ({"lengths": (64, 63)}, "even integers"),
    ({"kv_ratio": 2}, "kv_ratio must be an integer >= 4"),
    ({"lengths": (8,), "kv_ratio": 16}, "holds no key-value pair"),
    ({"lengths": (4096,), "vocab_size": 256}, "raise vocab_size"),
    ({"lrs": ()}, "distinct positive learning rates"),
    ({"lrs": (1e-3, -1e-3)}, "distinct positive learning rates"),
    ({"lrs": (1e-3, 1e-3)}, "distinct positive learning rates"),
    ({"lrs": ("fast",)}, "a list of learning rates"),
    ({"shift_stem": True, "mixture": False}, "mixture protocol only"),
    ({"rate_scales": (("S", 0.1),), "mixture": False}, "mixture protocol only"),
    ({"rate_scales": (("S", -1.0),)}, "positive multiple of the rate"),
    ({"rate_scales": (("S", "slow"),)}, r"positive multiple of the rate\) pairs"),
    ({"rate_scales": ("S",)}, r"positive multiple of the rate\) pairs"),
])
def test_bad_budgets_name_the_problem(changes, message):
    with pytest.raises(ConfigError, match=message):
        RecallBudget("x", **{"lengths": (64,), **changes})


def test_lengths_parse_and_unknown_budgets_are_refused():
    assert parse_lengths("64, 128,256") == (64, 128, 256)
    with pytest.raises(ConfigError, match="comma-separated integers"):
        parse_lengths("64,long")
    with pytest.raises(ConfigError, match="unknown recall budget 'huge'"):
        RecallEvaluator("huge")


@pytest.mark.parametrize("mixture", [True, False], ids=["mixture", "per-length"])
def test_the_evaluator_reports_accuracy_per_length_and_their_mean(mixture):
    budget = RECALL_BUDGETS["smoke"].replace(lengths=(32, 64), steps=4, train_examples=64, test_examples=16,
                                             kv_ratio=8, mixture=mixture)
    evaluator = make_evaluator("recall", "smoke", "tiny")
    assert evaluator.name == "recall" and evaluator.direction == "maximize"
    evaluator.spec = budget
    reports = []
    result = evaluator("AM", 0, lambda index, value: reports.append((index, value)))
    by_length = result.details["accuracy_by_length"]
    assert set(by_length) == {"32", "64"} and result.details["kv_pairs"] == {"32": 4, "64": 8}
    assert all(0.0 <= v <= 1.0 for v in by_length.values())
    assert result.score == pytest.approx(sum(by_length.values()) / 2)
    assert result.details["protocol"] == ("mixture" if mixture else "per-length")
    if mixture:  # each accuracy's denominator, for --min-recall known's interval
        assert result.details["test_queries"] == {"32": 16 * 4, "64": 16 * 8}
        # the queries come in 16 test sequences per length, and the interval is over those (issue 47)
        assert result.details["test_sequences"] == {"32": 16, "64": 16}
        spread = result.details["sequence_accuracy_sd"]
        assert set(spread) == {"32", "64"} and all(0.0 <= sd <= 0.6 for sd in spread.values())
    assert [i for i, _ in reports] == ([0] if mixture else [0, 1]) and reports[-1][1] == pytest.approx(result.score)
    again = RecallEvaluator(budget, "tiny")("AM", 0, lambda *a: None)
    assert again.details["accuracy_by_length"] == by_length, "same seed, same data and training"


def test_the_probe_counts_each_test_sequences_queries_and_their_spread():
    """The interval of a recall is over test sequences, not queries (issue 47): the probe keeps, per length, how
    many sequences were tested and how much their accuracies vary (``composer.statistics.cluster_spread``)."""
    import torch

    from search.mad.tasks import IGNORE_INDEX
    from search.recall_mixture import sequence_accuracy

    x = IGNORE_INDEX
    targets = torch.tensor([[x, 5, x, 6], [7, x, 8, x], [9, x, x, 3]])
    predictions = torch.tensor([[0, 5, 0, 1], [7, 0, 8, 0], [9, 0, 0, 3]])
    said = sequence_accuracy(predictions, targets)
    assert said["accuracy"] == pytest.approx(5 / 6) and said["sequences"] == 3 and said["queries"] == 6
    assert said["sequence_sd"] == pytest.approx(float(torch.tensor([0.5, 1.0, 1.0]).std()))


def test_the_rate_is_the_lowest_final_training_loss_and_never_a_diverged_one():
    assert lowest_final_loss({1e-3: 4.1, 3e-3: 3.2, 1e-2: 4.9}) == 3e-3
    assert lowest_final_loss({1e-2: float("nan"), 3e-3: float("inf"), 1e-3: 4.8}) == 1e-3
    assert lowest_final_loss({1e-2: float("nan"), 3e-3: float("inf")}) == 1e-2  # all diverged: the first


def test_a_candidate_keeps_the_rate_it_trains_best_at_and_a_diverged_rate_is_recorded_not_fatal():
    evaluator = RecallEvaluator(RecallBudget("t", lengths=(16, 32), kv_ratio=16, vocab_size=32, steps=20,
                                             tokens_per_step=256, test_examples=16, lrs=(float("inf"), 1e-2, 1e-3)),
                                "tiny")
    reports = []
    result = evaluator("AA", 0, lambda index, value: reports.append(value))
    sweep = result.details["lr_sweep"]
    assert set(sweep) == {"inf", "0.01", "0.001"} and "loss is nan" in sweep["inf"]["failed"]
    losses = {rate: point["train_loss"] for rate, point in sweep.items() if "train_loss" in point}
    chosen = min(losses, key=losses.get)
    assert f"{result.details['lr']:g}" == chosen and result.details["train_loss"] == losses[chosen]
    assert result.score == pytest.approx(sweep[chosen]["score"]) and reports == [result.score]
    single = RecallEvaluator(evaluator.spec.replace(lrs=(result.details["lr"],)), "tiny")("AA", 0, None)
    assert single.score == result.score and "lr_sweep" not in single.details, "a sweep point is the plain run"


def test_a_candidate_diverging_at_every_rate_fails_naming_them():
    evaluator = RecallEvaluator(RecallBudget("t", lengths=(16,), kv_ratio=16, vocab_size=32, steps=3,
                                             tokens_per_step=64, test_examples=8, lrs=(float("inf"), 1e30)), "tiny")
    with pytest.raises(CandidateFailed, match=r"AA: recall mixture at lr inf: .*\(lr 1e\+30 failed too\)$"):
        evaluator("AA", 0, None)


@pytest.mark.slow
def test_composer_search_with_the_recall_evaluator_runs_at_the_smoke_budget(tmp_path, capsys):
    out = tmp_path / "search"
    assert main(["search", "--evaluator", "recall", "--budget", "smoke", "--layers", "2", "--trials", "2",
                 "--preset", "tiny", "--objectives", "score,kv", "--out", str(out)]) == 0
    rows = json.loads((out / "leaderboard.json").read_text())
    assert rows and all(0.0 <= row["score"] <= 1.0 for row in rows)
    assert set(rows[0]["details"]["accuracy_by_length"]) == {"64", "128"}
    lines = [line for line in capsys.readouterr().err.splitlines() if " tokens" in line and "tok/s" in line]
    assert lines, "the probe's training shows progress lines (pattern, run and rate, tokens, tokens/s)"
    assert re.search(r"\[  \d/2\] \w+  run 1/1 lr [\d.e-]+  [\d,]+/[\d,]+ tokens", lines[0]), lines[0]


def test_the_probe_reports_its_tokens_as_it_trains():
    """The AMSD search's probe of 8 finalists ran 80 minutes without a line: the evaluator now reports like a
    training run, each step's tokens against the mixture's total, for the search's progress lines."""
    reports = []
    evaluator = RecallEvaluator("probe-smoke", widths="tiny")
    evaluator.heartbeat = reports.append
    evaluator("SDMMAM", 0, None)
    assert {r["pattern"] for r in reports} == {"SDA"} and {r["run"] for r in reports} == {1}
    tokens = [r["tokens"] for r in reports]
    assert tokens == sorted(tokens) and tokens[-1] == reports[-1]["total_tokens"] > tokens[0] > 0
    assert len(reports) == 2 * 30  # one per step: 30 at each of its 2 lengths


def test_the_probe_trains_a_patterns_mixers_alone_so_patterns_that_differ_only_in_their_mlps_share_a_model():
    from search.recall import mixer_stack

    assert mixer_stack("SDMMSD") == "SDSD" and mixer_stack("SMWMAE") == "SWA"  # MLP and MoE layers keep nothing
    assert mixer_stack("MMMM") == ""
    probe = RecallEvaluator("probe")
    assert probe.model_key("SDDMDM") == probe.model_key("SMDDDM") == "SDDD"  # one model: probed once
    assert probe.model_key("SDDMAS") != probe.model_key("SDDMDM")
    assert RecallEvaluator("cpu").model_key("SDMMSD") == "SDMMSD"  # the whole pattern trains: its own model
