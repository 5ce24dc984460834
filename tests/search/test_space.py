from __future__ import annotations

import optuna
import pytest

from composer.errors import ComposerUsageError
from search.space import SearchSpace


def test_suggest_builds_the_pattern_with_frozen_head_and_tail():
    space = SearchSpace(n_layers=3, primitives="AM", head="AA", tail="M")
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    trial = study.ask()
    pattern = space.suggest(trial)
    assert len(pattern) == 6 and pattern.startswith("AA") and pattern.endswith("M")
    assert space.pattern_of(trial.params) == pattern
    assert space.params_of(pattern) == trial.params


def test_enumerate_and_size():
    space = SearchSpace(n_layers=4, primitives="AM")
    patterns = space.enumerate()
    assert len(patterns) == space.size == 16 and len(set(patterns)) == 16


def test_violations_name_the_constraint():
    space = SearchSpace(n_layers=6, min_share={"A": 0.25}, max_share={"A": 0.5}, max_params=1000)
    assert space.violation("AAMMMM", 500) is None
    assert "below the minimum" in space.violation("AMMMMM", 500)
    assert "above the maximum" in space.violation("AAAAMM", 500)
    assert "exceed the maximum" in space.violation("AAMMMM", 2000)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"n_layers": 0}, "layers must be a positive integer"),
        ({"primitives": "AA"}, "repeats a symbol"),
        ({"primitives": "AQ"}, "unknown primitive 'Q'"),
        ({"max_share": {"S": 0.5}}, "not among the primitives"),
        ({"min_share": {"A": 1.5}}, "between 0 and 1"),
    ],
)
def test_bad_spaces(kwargs, message):
    with pytest.raises(ComposerUsageError, match=message):
        SearchSpace(**kwargs)
