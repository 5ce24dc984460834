"""benchmarks/equal_cost_families.py: every arm grown to Nemotron-H's cost at the deployed size, trained through the
search's stages (training faked: plumbing, not learning) at the widths its growth gives, paired by seed."""

from __future__ import annotations

import pytest

from scaling.equal_cost import budget_of, costs_of
from search.lm import LanguageModelEvaluator
from tests.search.test_bookkeeping import FakeTraining


@pytest.fixture
def fake(monkeypatch) -> FakeTraining:
    training = FakeTraining()
    trained_at = {}

    def train_once(evaluator, pattern, lr, seed):
        trained_at[pattern] = evaluator.widths_of(pattern)
        return training(evaluator, pattern, lr, seed)

    monkeypatch.setattr(LanguageModelEvaluator, "train_once", train_once)
    training.trained_at = trained_at
    return training


def test_every_arm_is_within_nemotron_h_cost_where_it_is_deployed(tmp_path, load_benchmark):
    bench = load_benchmark("equal_cost_families")
    records = {name: bench.arm_record(arm, tmp_path) for name, arm in bench.ARMS.items()}
    assert set(records) == {"nemotron-h", "nemotron-flash", "linear-3to1", "smmmad", "answer-mlp"}
    assert records["nemotron-h"]["deployed"]["ratio"] == {"decode": 1.0, "train": 1.0}
    for name, record in records.items():
        assert all(ratio <= 1.0 for ratio in record["deployed"]["ratio"].values()), name
        assert record["losses"] is None and record["h200"]["assumed_constants"], name
    assert records["nemotron-flash"]["layout"][0::2] == "DSASDS"  # its own layout, scaled down from 24 layers
    rows = {row["a"]: row for row in bench.differences(records)}
    assert rows["answer-mlp"]["verdict"] == "not trained yet"
    budget = budget_of(bench.RULE, bench.DEPLOYED)
    grown = bench.ARMS["answer-mlp"].grown().cost
    assert grown["budget"] == budget and grown["costs"] != costs_of(bench.ARMS["nemotron-h"].grown().arch, bench.RULE)


def test_an_arm_trains_at_the_widths_its_growth_gives_and_once(tmp_path, fake, load_benchmark, monkeypatch):
    bench = load_benchmark("equal_cost_families")
    smoke = bench.control_config()
    monkeypatch.setattr(bench, "control_config",
                        lambda: type(smoke)(**{**smoke.to_dict(), "budget": "smoke", "widths": "tiny"}))
    arm = bench.ARMS["answer-mlp"]
    monkeypatch.setattr(bench, "TARGET", "tiny")
    record = bench.train_arm(arm, tmp_path, threads=1)
    assert set(record["stages"]) == {"rung1", "confirmation"}
    grown = arm.grown()
    assert set(fake.trained) == {grown.layout} and fake.trained_at[grown.layout] == grown.widths
    runs = len(fake.trained)
    bench.train_arm(arm, tmp_path, threads=1)
    assert len(fake.trained) == runs, "a rerun trained the arm again"
