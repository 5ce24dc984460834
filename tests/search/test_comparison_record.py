"""best.json's ``vs_known`` as one typed record (search.comparison_record): the verdict writes it, the search adds
to it, best.json holds it and the summary reads it back, all through the same fields."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from search.comparison_record import Comparison, Side
from search.verdict import compare_with_known
from tests.search.records import recorded

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results"


def rows(new_losses, known_losses):
    return [recorded({"pattern": "SMSMSM", "score": 1.5, "known": None, "details": {"losses": new_losses}}),
            recorded({"pattern": "AMAMAM", "score": 1.6, "known": "llama", "details": {"losses": known_losses}})]


@pytest.mark.parametrize("name", ["equal_cost_search-2026-11-29.json", "amsd_constrained_search-2026-11-28.json"])
def test_a_written_vs_known_reads_back_as_the_same_record(name):
    """The searches' own best.json: read as a record and written again, the same JSON to the key."""
    said = json.loads((RESULTS / name).read_text())["best"]["vs_known"]
    record = Comparison.from_dict(said)
    assert json.loads(json.dumps(record.as_dict())) == said
    assert record.best_new.pattern == said["best_new"]["pattern"] and record.answer == said["answer"]


def test_the_verdict_is_a_record_that_reads_like_its_json():
    said = compare_with_known(rows({"0": 1.49, "1": 1.50, "2": 1.51}, {"0": 1.51, "1": 1.52, "2": 1.53}), False)
    assert isinstance(said, Comparison) and isinstance(said.best_new, Side)
    assert said.answer == said["answer"] == "new" and said.best_known.name == "llama"
    assert said.best_new.seeds == [0, 1, 2] and said["best_new"]["mean"] == pytest.approx(1.50)
    written = json.loads(json.dumps(said.as_dict()))
    assert Comparison.from_dict(written).as_dict() == written
    assert {"difference", "ci", "interval", "held_out"} <= set(written) and "note" not in written


def test_a_comparison_without_a_known_layout_holds_only_its_note():
    said = compare_with_known(rows({"0": 1.5}, {"0": 1.6})[:1], False)
    assert said.as_dict() == {"answer": "new", "best_known": None, "best_new": {"pattern": "SMSMSM", "score": 1.5},
                              "recommended": "SMSMSM", "note": "no known layout was scored"}
