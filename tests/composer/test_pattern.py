from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from composer.errors import PatternError
from composer.pattern import compact_pattern, counts, parse_pattern, runs


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
    assert len(compact_pattern(pattern)) <= len(pattern) + 8
