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
    assert space.violation("AAMMMM", 2000) == "2,000 params > --max-params 1,000"  # whole in a progress line


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



@pytest.mark.parametrize(
    "shares",
    [
        {"min_share": {"A": 0.9}, "max_share": {"A": 0.1}},
        {"min_share": {"A": 0.6, "M": 0.6}},
        {"max_share": {"A": 0.2, "M": 0.5}},
        {"min_share": {"A": 0.5}},
        {"max_share": {"A": 0.34}},
        {"min_share": {"A": 0.5}, "max_share": {"A": 0.5}},
        {"min_share": {"A": 0.55}, "max_share": {"A": 0.6}},  # 3.3 .. 3.6 of 6 layers: no whole count fits
    ],
)
def test_infeasible_constraints_are_refused_up_front_exactly_when_no_pattern_satisfies_them(shares):
    """Issue 13: the up-front check agrees with enumerating the space and checking every pattern."""
    every_pattern = SearchSpace(6, "AM").enumerate()
    probe = object.__new__(SearchSpace)  # the violation rule without the constructor's check
    for name, value in {"min_share": {}, "max_share": {}, "max_params": None, **shares}.items():
        object.__setattr__(probe, name, value)
    any_satisfies = any(probe.violation(p) is None for p in every_pattern)
    if any_satisfies:
        SearchSpace(6, "AM", **shares)
    else:
        with pytest.raises(ComposerUsageError, match="no pattern satisfies the constraints"):
            SearchSpace(6, "AM", **shares)


def test_parallel_layers_are_choices_like_any_primitive():
    space = SearchSpace(n_layers=3, primitives="AM[AS]", min_share={"[AS]": 0.3})
    assert space.choices == ["A", "M", "[AS]"] and space.size == 27
    patterns = space.enumerate()
    assert len(patterns) == 27 and "[AS]M[AS]" in patterns
    assert space.violation("AMM") == "[AS] share 0.00 is below the minimum 0.30"
    assert space.violation("[AS]MA") is None
    assert space.params_of("[AS]MA") == {"layer_0": "[AS]", "layer_1": "M", "layer_2": "A"}
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    pattern = space.suggest(study.ask())
    assert space.params_of(pattern) and len(space.params_of(pattern)) == 3
