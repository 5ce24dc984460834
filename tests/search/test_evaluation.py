"""The project's one rate chooser (``search.evaluation.best_rate``): every place that picks a rate agrees."""

from __future__ import annotations

import math

import pytest

from composer.experiments.lr_sweep import choose
from search.evaluation import best_rate
from search.recall import lowest_final_loss

CASES = [
    ({1e-3: 2.0, 3e-3: 1.5, 1e-2: None}, 3e-3),
    ({3e-3: 1.5, 1e-3: 1.5}, 1e-3),  # a tie goes to the lower rate, whatever the order given
    ({1e-3: math.nan, 3e-3: math.inf, 1e-2: 4.0}, 1e-2),
]


@pytest.mark.parametrize(("losses", "rate"), CASES)
def test_the_evaluators_and_the_sweeps_choose_the_same_rate(losses, rate):
    assert best_rate(losses) == rate
    assert choose(losses)[0] == rate
    assert lowest_final_loss({lr: math.nan if loss is None else loss for lr, loss in losses.items()}) == rate


def test_no_rate_is_chosen_when_every_rate_diverged():
    assert best_rate({1e-3: math.nan, 3e-3: None}) is None
