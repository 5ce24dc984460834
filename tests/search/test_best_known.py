"""search.best_known: one best known layout per answer, read by the cost limits, the ratios, the standing and the
verdict alike."""

from __future__ import annotations

from search.cost.front import cost_standing
from search.cost.limits import CostLimits, eligible_at_known_cost
from search.cost.measured import add_ratios
from search.verdict import compare_with_known
from tests.search.records import recorded


def measured(decode: float, train: float) -> dict:
    def figure(median):
        return {"median": median, "min": median, "max": median, "repeats": 5, "spread": 0.0}

    return {"device": "cpu", "device_name": "test", "threads": 1, "train_tokens_per_s": figure(train),
            "prefill_tokens_per_s": figure(train), "decode_ms_per_token": {"1": {"1024": figure(decode)}},
            "peak_memory_bytes": {"train": 1, "decode": 1}}


def row(pattern, score, decode, known=None, costed=True):
    said = {"pattern": pattern, "score": score, "known": known, "target_pattern": pattern,
            "cost": {"cache_bytes": {"32768": 1e6}, "measured": measured(decode, 1000.0)}}
    if costed:
        said["limit_cost"] = {"decode_ms": decode, "train_tokens_per_s": 1000.0, "source": "x"}
    return recorded(said)


def names_everywhere(rows, eligible):
    """The best known layout's name as the cost limits, the verdict, the ratios and the standing each take it."""
    eligible, limits = eligible_at_known_cost(rows, eligible, CostLimits("known"))
    comparison = compare_with_known(eligible if eligible is not None else rows, maximize=False)
    add_ratios(rows, comparison.as_dict()["best_known"])
    standing = cost_standing(rows, comparison.as_dict())
    ratios = {one["cost"]["vs_best_known"]["name"] for one in rows if "vs_best_known" in one["cost"]}
    return {"cost limits": limits["best_known"]["name"], "verdict": comparison.best_known.name,
            "ratios": ratios.pop() if len(ratios) == 1 else ratios, "standing": standing["known"]}


def test_one_best_known_layout_where_min_recall_leaves_the_best_loss_out():
    """The equal-cost search of 2026-11-29: --min-recall dropped Nemotron-H, the best known loss, from the rows
    the answer may come from; its cost limits held the finalists to Nemotron-H while its verdict compared with
    linear-7to1."""
    rows = [row("SADDDD", 1.0, 2.0), row("SMSAMS", 1.1, 3.0, "nemotron-h"), row("DMDMAM", 1.2, 2.5, "linear-7to1"),
            row("SDDMSM", 1.3, 2.2)]
    eligible = [rows[0], rows[2], rows[3]]  # SMSAMS misses the recall bar
    said = names_everywhere(rows, eligible)
    assert set(said.values()) == {"linear-7to1"}, said


def test_one_best_known_layout_where_the_best_one_has_no_cost_figures():
    """The cost limits took the first known layout *with figures*, the verdict the first known layout."""
    rows = [row("SADDDD", 1.0, 2.0), row("SMSAMS", 1.1, 3.0, "nemotron-h", costed=False),
            row("DMDMAM", 1.2, 2.5, "linear-7to1")]
    eligible, limits = eligible_at_known_cost(rows, None, CostLimits("known"))
    assert compare_with_known(rows, maximize=False).best_known.name == "nemotron-h"
    assert limits["best_known"]["name"] == "nemotron-h" and limits["best_known"].get("decode_ms") is None
    assert eligible is None, "the best known layout has no figures: nothing is held to another layout's"
