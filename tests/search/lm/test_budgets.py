"""The lm budgets' warmup rule (issue 71): every rung that produces figures warms up for at least Adam's
second-moment horizon, 1 / (1 - beta2) steps of the training default. At the cpu rungs' former 5-6 steps a 14-layer
AAMMMM at demo-4m spiked early and plateaued 0.3 behind Llama's alternation on one seed of three."""

from __future__ import annotations

from composer.training import TrainConfig
from search.lm.budgets import ADAM_WARMUP_STEPS, LM_BUDGETS


def test_the_warmup_constant_is_adams_horizon_at_the_training_default():
    assert ADAM_WARMUP_STEPS == round(1 / (1 - TrainConfig().beta2))


def test_every_rung_that_produces_figures_warms_up_at_least_that_long():
    short = {name: budget.warmup for name, budget in LM_BUDGETS.items()
             if budget.schedule == "wsd" and not name.startswith("rung-smoke")
             and (budget.warmup is None or budget.warmup < ADAM_WARMUP_STEPS)}
    assert not short, f"warmup below {ADAM_WARMUP_STEPS} steps: {short}"
    # and a rung still leaves itself steps at the peak rate before its cooldown starts
    from composer.training.schedule import ScheduleConfig, decay_start

    for name, budget in LM_BUDGETS.items():
        if budget.schedule == "wsd" and not name.startswith("rung-smoke"):
            steps = budget.tokens // (budget.seq_len * budget.batch_size)
            assert decay_start(ScheduleConfig("wsd", int(budget.warmup), steps)) > budget.warmup, name
