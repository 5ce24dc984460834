from __future__ import annotations

import pytest

from composer.baselines import llama, random_pattern, sandwich, spread, striped
from composer.errors import ConfigError
from composer.pattern import counts


def test_llama_alternates():
    assert llama(32) == "AM" * 16
    assert llama(5) == "AMAMA"


def test_striped_1_to_r():
    assert striped(9, 2) == "AMMAMMAMM"
    assert striped(10, 4) == "AMMMMAMMMM"
    assert striped(7, 2) == "AMMAMMA"


def test_sandwich_moves_attention_down_and_keeps_the_ratio():
    assert sandwich(16) == "AAAA" + "AMAMAMAM" + "MMMM"
    pattern = sandwich(27, n_attention=9, k=3)
    assert counts(pattern) == {"A": 9, "M": 18}
    assert pattern.startswith("AAA") and pattern.endswith("MMM")
    assert sandwich(8, k=0) == llama(8)


def test_spread_is_even_and_leads_with_the_first_symbol():
    assert spread(2, 4) == "AMMAMM"
    assert spread(9, 18) == "AMM" * 9


def test_random_is_seeded_and_respects_counts():
    assert random_pattern(16, seed=3) == random_pattern(16, seed=3)
    assert random_pattern(16, seed=3) != random_pattern(16, seed=4)
    assert counts(random_pattern(27, seed=0, counts={"A": 9, "M": 18})) == {"A": 9, "M": 18}


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: llama(0), "n_layers must be a positive integer"),
        (lambda: striped(8, 0), "ratio must be a positive integer"),
        (lambda: sandwich(8, n_attention=4, k=5), "k must be between 0 and 4"),
        (lambda: random_pattern(4, 0, counts={"A": 1}), "sum to 1"),
    ],
)
def test_bad_arguments(call, message):
    with pytest.raises(ConfigError, match=message):
        call()
