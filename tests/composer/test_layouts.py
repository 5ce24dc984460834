from __future__ import annotations

import pytest

from composer.errors import ConfigError
from composer.layouts import llama, random_pattern, sandwich, spread, striped
from composer.pattern import counts, parse_pattern


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


# ------------------------------------------------------------------------------------------ published families

from composer.layouts import (  # noqa: E402
    FAMILIES,
    gdn_h1,
    jamba,
    linear_3to1,
    linear_7to1,
    nemotron_flash,
    nemotron_h,
    qwen3_next,
    samba,
)


def test_jamba_has_one_attention_per_eight_mixers_at_offset_4_and_moe_in_every_other_ffn():
    pattern = jamba(64)  # Jamba's 32 layers, mixer + FFN each
    mixers, ffns = pattern[0::2], pattern[1::2]
    assert mixers == ("SSSSASSS" * 4) and ffns == ("ME" * 16)


def test_samba_gdn_h1_qwen3_next_and_linear_7to1_repeat_their_published_period():
    assert samba(8) == "SMWMSMWM"
    assert gdn_h1(8) == "DMWMDMWM"
    assert qwen3_next(16)[0::2] == "DDDADDDA" and set(qwen3_next(16)[1::2]) == {"E"}
    assert linear_7to1(32)[0::2] == ("D" * 7 + "A") * 2 and set(linear_7to1(32)[1::2]) == {"M"}


def test_nemotron_h_at_8b_depth_is_24_mamba_24_mlp_4_attention_spread_evenly():
    pattern = nemotron_h(52)
    assert counts(pattern) == {"S": 24, "M": 24, "A": 4}
    positions = [i for i, symbol in enumerate(pattern) if symbol == "A"]
    assert [b - a for a, b in zip(positions, positions[1:])] == [13, 13, 13]
    assert "AA" not in nemotron_h(13) and counts(nemotron_h(13))["A"] == 1


def test_nemotron_flash_is_its_published_1b_and_3b_layouts():
    """HF nvidia/Nemotron-Flash-1B and -3B ``layer_types`` in this grammar: 12 and 18 mixers, each with an FFN."""
    assert nemotron_flash(24) == "DMSMAMSMDMSMAMSMDMSMDMSM"  # the 1B layout, symbol for symbol
    assert nemotron_flash(36)[0::2] == "DSASDSASDSASDSDSDS" and set(nemotron_flash(36)[1::2]) == {"M"}
    assert FAMILIES["nemotron-flash"].published == {"llama-3.2-1b": 24, "llama-3.2-3b": 36}
    assert counts(nemotron_flash(6)) == {"D": 1, "S": 1, "A": 1, "M": 3}  # one attention at least


def test_linear_3to1_is_three_delta_mixers_to_one_attention_each_with_an_mlp():
    assert linear_3to1(16)[0::2] == "DDDADDDA" and set(linear_3to1(16)[1::2]) == {"M"}


@pytest.mark.parametrize("family", FAMILIES.values(), ids=lambda f: f.name)
def test_every_family_is_canonical_cites_its_source_and_refuses_broken_pairs(family):
    assert family.source and family.fact and family.generator.__doc__
    for n in (family.period, 4 * family.period):
        pattern = family.pattern(n)
        assert len(pattern) == n and parse_pattern(pattern) == pattern
    if family.unit == 2:
        with pytest.raises(ConfigError, match="multiple of 2"):
            family.pattern(family.period + 1)
    with pytest.raises(ConfigError, match="needs a depth"):
        family.pattern(0)
