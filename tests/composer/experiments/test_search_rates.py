"""composer/experiments/search_rates.py: which rate a model starts at (sweep > explicit lr > search > shared) and the notes."""

from __future__ import annotations

from composer.experiments.search_rates import (
    SearchRate,
    StartingRate,
    lookup,
    per_model,
    rate_notes,
    starting_rates,
)

RATES = {"AAMMMM": 1e-3, "AMAMAM": 3e-3}
SWEEP = {"rates": [1e-3, 6e-3], "fraction": 0.25, "tokens": 1000, "seed": 0,
         "models": {"AAMMMM": {"chosen_lr": 6e-3, "at_edge": None}, "MMMMMM": {"chosen_lr": 1e-3, "at_edge": None}}}


def found() -> dict[str, SearchRate | None]:
    return {"AAMMMM": lookup(RATES, "AAMMMM"), "MMMMMM": lookup(RATES, "MMMMMM")}


def test_lookup_takes_the_first_pattern_with_a_rate():
    assert lookup(RATES, "MMMMMM", None, "AMAMAM", "AAMMMM") == SearchRate(3e-3, "AMAMAM")
    assert lookup(RATES, "MMMMMM") is None and lookup({}, "AAMMMM") is None


def test_the_search_rate_is_the_start_unless_the_user_chose_a_rate_or_a_sweep():
    rates = starting_rates(found(), 2e-3)
    assert rates == {"AAMMMM": StartingRate(1e-3, "search", SearchRate(1e-3, "AAMMMM")),
                     "MMMMMM": StartingRate(2e-3, "shared")}
    assert per_model(rates) == {"AAMMMM": {"lr": 1e-3}, "MMMMMM": {"lr": 2e-3}}
    explicit = starting_rates(found(), 5e-4, explicit_lr=True)
    assert {name: (r.lr, r.source) for name, r in explicit.items()} == {"AAMMMM": (5e-4, "shared"),
                                                                      "MMMMMM": (5e-4, "shared")}
    assert explicit["AAMMMM"].to_dict()["search_lr"] == 1e-3, "the search's rate is still recorded"
    swept = starting_rates(found(), 2e-3, explicit_lr=True, sweep=SWEEP)
    assert {name: (r.lr, r.source) for name, r in swept.items()} == {"AAMMMM": (6e-3, "sweep"),
                                                                   "MMMMMM": (1e-3, "sweep")}
    assert swept["AAMMMM"].to_dict() == {"lr": 6e-3, "lr_source": "sweep", "search_lr": 1e-3,
                                         "search_lr_pattern": "AAMMMM"}


def test_notes_say_where_the_rates_came_from_and_that_a_search_rate_is_only_a_start():
    notes = rate_notes(starting_rates(found(), 2e-3), 2e-3)
    assert "from the search for AAMMMM" in notes[0] and "MMMMMM at the shared 0.002" in notes[0]
    assert "a starting point, not a rate tuned at the target" in notes[1]
    explicit = rate_notes(starting_rates(found(), 5e-4, explicit_lr=True), 5e-4, explicit_lr=True)
    assert "shared one learning rate (0.0005)" in explicit[0] and "train.lr (0.0005) was given" in explicit[1]
    swept = rate_notes(starting_rates(found(), 2e-3, sweep=SWEEP), 2e-3, SWEEP)
    assert "learning rate per architecture" in swept[0] and "recorded beside the swept ones" in swept[-1]
    none = {"MMMMMM": None}
    assert rate_notes(starting_rates(none, 2e-3), 2e-3) == [
        ("all architectures shared one learning rate (0.002); a rate that suits one can handicap another: sweep it "
         "per architecture with train.lr_sweep (or --lr-sweep)")]
