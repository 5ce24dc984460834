"""The strategies' registry (``search.strategies``) and what each one plans, without training anything."""

from __future__ import annotations

import pytest

from composer.errors import ConfigError
from search.config import STRATEGIES, SearchConfig
from search.strategies import STRATEGIES as REGISTERED
from search.strategies import StageRun, get_strategy


def test_every_strategy_the_settings_accept_has_a_module_and_no_other():
    assert set(REGISTERED) == set(STRATEGIES)
    with pytest.raises(ConfigError, match="strategy must be one of"):
        get_strategy("hyperband")


def fake_run(plan, best: str) -> StageRun:
    rows = [{"pattern": best, "score": 1.0, "trial": 0, "known": None}]
    return StageRun(plan.config, plan.stage, study=None, rows=rows, started=0.0, finished=1.0)


@pytest.mark.parametrize(("strategy", "heads"), [("end-incremental", ["", "AMAMAM"]),
                                                 ("middle-incremental", ["", "AMA"])])
def test_the_incremental_strategies_freeze_the_best_pattern_around_the_new_layers(strategy, heads):
    config = SearchConfig(evaluator="mad", budget="smoke", strategy=strategy, layers=6, depth=12, trials=4,
                          known=False)
    chosen = get_strategy(strategy)
    done = []
    while (plan := chosen.next_stage(config, done, echo=lambda _: None)) is not None:
        assert plan.stage.space.head == heads[len(done)]
        assert plan.stage.study_name == f"{config.study_name}-stage{len(done)}"
        done.append(fake_run(plan, "AMAMAM" if not done else "AMAMAMAMAMAM"))
    assert [run.stage.trials for run in done] == [2, 2]
    assert chosen.label(config, 1) == "stage 1 of 0-1 "


def test_successive_halvings_later_rungs_train_only_their_promotions_known_layout_first():
    config = SearchConfig(evaluator="lm", strategy="successive-halving", budget="smoke", widths="tiny", trials=3,
                          precision="fp32")
    halving = get_strategy("successive-halving")
    rung0 = halving.next_stage(config, [], echo=lambda _: None)
    assert not rung0.stage.only_first and rung0.config.budget == "rung-smoke-0"
    rows = [{"pattern": "MMAMAM", "score": 1.0, "trial": 3, "known": None},
            {"pattern": "AMMAMM", "score": 2.0, "trial": 2, "known": None},
            {"pattern": "AMAMAM", "score": 3.0, "trial": 0, "known": "llama"}]
    done = [StageRun(rung0.config, rung0.stage, study=None, rows=rows, started=0.0, finished=1.0)]
    rung1 = halving.next_stage(config, done, echo=lambda _: None)
    assert rung1.stage.only_first and rung1.config.budget == "rung-smoke-1"
    assert [pattern for pattern, _ in rung1.stage.first] == ["AMAMAM", "MMAMAM", "AMMAMM"]
    assert rung1.stage.study_name == f"{config.study_name}-rung1"
    assert "rung 1 of 0-1: promoting 3 of 3" in rung1.announce
    done.append(StageRun(rung1.config, rung1.stage, study=None, rows=rows, started=1.0, finished=2.0))
    assert halving.next_stage(config, done, echo=lambda _: None) is None
