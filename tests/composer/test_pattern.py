from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from composer.errors import PatternError
from composer.pattern import (
    attention_share,
    branches,
    compact_pattern,
    counts,
    layers,
    n_layers,
    parse_pattern,
    runs,
)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("AAMMMM", "AAMMMM"),
        ("2A4M", "AAMMMM"),
        ("(AM)x16", "AM" * 16),
        ("(AM)*3", "AMAMAM"),
        ("2(AM)x2", "AM" * 4),
        ("((AM)x2M)x3", "AMAMM" * 3),
        ("(AAMMMM)x4 AMM", "AAMMMM" * 4 + "AMM"),
        ("(2A4M)x2 + A2M", "AAMMMM" * 2 + "AMM"),
        (" A M ", "AM"),
        ("12M", "M" * 12),
    ],
)
def test_grammar(text, expected):
    assert parse_pattern(text) == expected


@pytest.mark.parametrize(
    "text, fragments",
    [
        ("AQM", ["unknown primitive 'Q'", "position 1", "A (attention), M (mlp)"]),
        ("aamm", ["unknown primitive 'a'", "upper-case"]),
        ("(AM", ["unclosed '('", "position 0", "add a matching ')'"]),
        ("AM)", ["unmatched ')'", "position 2"]),
        ("(AM)x", ["'x' without a repeat count", "position 4"]),
        ("0A", ["repeat count 0", "at least 1"]),
        ("3", ["count 3 without a primitive"]),
        ("()", ["empty group"]),
        ("", ["empty pattern"]),
        ("   ", ["empty pattern"]),
        ("(A)x100000", ["more than 10000 layers"]),
    ],
)
def test_errors_name_the_problem_and_the_fix(text, fragments):
    with pytest.raises(PatternError) as info:
        parse_pattern(text)
    message = str(info.value)
    assert "\n" not in message
    for fragment in fragments:
        assert fragment in message


def test_allowed_restricts_symbols():
    assert parse_pattern("AM", allowed="AM") == "AM"
    with pytest.raises(PatternError, match=r"allowed: M \(mlp\)$"):
        parse_pattern("AM", allowed="M")


def test_runs_and_counts():
    assert runs("AAMMMMA") == [("A", 2), ("M", 4), ("A", 1)]
    assert counts("AAMMMMA") == {"A": 3, "M": 4}


@pytest.mark.parametrize(
    "pattern, compact",
    [("AM" * 16, "(AM)x16"), ("AAMMMM", "AA4M"), ("AAMMMM" * 4 + "AMM", "(AA4M)x4 AMM"), ("A", "A")],
)
def test_compact_form(pattern, compact):
    assert compact_pattern(pattern) == compact


@given(st.text(alphabet="AM", min_size=1, max_size=80))
def test_compact_round_trips(pattern):
    assert parse_pattern(compact_pattern(pattern)) == pattern
    # the greedy writes a unit repeated twice as "(AM)x2 ", longer than "AMAM": at most 7 characters for 4 layers
    assert len(compact_pattern(pattern)) <= 2 * len(pattern)


# ------------------------------------------------------------------------------------------ parallel layers


@given(st.lists(st.sampled_from(["A", "M", "[AS]", "[WS]"]), min_size=1, max_size=60))
def test_compact_round_trips_with_parallel_layers(tokens):
    pattern = "".join(tokens)
    assert parse_pattern(compact_pattern(pattern)) == pattern and layers(pattern) == tokens


@pytest.mark.parametrize("text, canonical, compact", [
    ("[AS]M[AS]M", "[AS]M[AS]M", "([AS]M)x2"),
    ("[SA]M", "[AS]M", "[AS]M"),  # branch order fixed: attention first, then registry order
    ("[SW]", "[WS]", "[WS]"),
    ("[DA]", "[AD]", "[AD]"),
    ("3[AS] 2M", "[AS][AS][AS]MM", "3[AS]MM"),
    ("([AS]M)x2 (AM)x2", "[AS]M[AS]MAMAM", "([AS]M)x2 (AM)x2"),
    ("([WS]MAM)x3", "[WS]MAM" * 3, "([WS]MAM)x3"),
])
def test_parallel_layers_parse_to_one_unique_token_per_layer_and_compact_round_trips(text, canonical, compact):
    assert parse_pattern(text) == canonical
    assert compact_pattern(canonical) == compact and parse_pattern(compact) == canonical
    tokens = layers(canonical)
    assert "".join(tokens) == canonical and n_layers(canonical) == len(tokens)
    assert all(len(branches(t)) == (len(t) - 2 if t.startswith("[") else 1) for t in tokens)


def test_tokens_count_and_run_as_layers():
    assert counts("[AS]M[AS]MM") == {"[AS]": 2, "M": 3}
    assert runs("[AS][AS]MA") == [("[AS]", 2), ("M", 1), ("A", 1)]
    assert layers("AMAM") == list("AMAM") and n_layers("AMAM") == 4


@pytest.mark.parametrize("text, message", [
    ("[A]", "needs two or more primitives"),
    ("[]", "needs two or more primitives"),
    ("[AA]", "primitives must differ"),
    ("[AW]", "at most one attention primitive"),
    ("[AS", "must be closed with ']'"),
    ("[A[S]]", "holds primitive symbols only"),
    ("[(AS)]", "holds primitive symbols only"),
    ("[2AS]", "holds primitive symbols only"),
    ("AS]", "unmatched ']'"),
    ("[AX]", "unknown primitive 'X'"),
])
def test_bad_parallel_layers_name_the_problem(text, message):
    with pytest.raises(PatternError, match=re.escape(message)):
        parse_pattern(text)


def test_allowed_symbols_apply_to_branches():
    assert parse_pattern("[AS]M", allowed="ASM") == "[AS]M"
    with pytest.raises(PatternError, match="unknown primitive 'S'"):
        parse_pattern("[AS]M", allowed="AM")


def test_attention_share_counts_softmax_layers():
    assert attention_share("AMAMAM") == 0.5
    assert attention_share("MMMMMM") == 0.0
    assert attention_share("WMMAMM") == pytest.approx(1 / 3)
    assert attention_share("(AM)x2") == 0.5  # compact forms are expanded first
    assert attention_share("2A4M") == pytest.approx(1 / 3)
    assert attention_share("[AS]M") == 0.5  # a parallel layer with attention is an attention layer
