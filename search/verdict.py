"""Whether a search's answer is a new pattern, a known layout, or a tie: only an interval may declare a winner.

Why: a search's best new finalist is the minimum of several noisy scores, so it lands below its true value by
chance (three finalists of equal quality: about 0.85 seed standard deviations, ~0.02 at the ``cpu`` ladder's
target). The one-shot search's answer ``SSSSMS`` led Nemotron-H's layout by 0.015 at one seed and trailed it by
0.022 [0.002, 0.041] over 3 seeds (issue 37). So the answer names a winner only when the interval of
``new - known`` lies wholly on one side of 0, taken between the two finalists' evidence records
(``search.evidence_record``: per-seed scores at one budget, preset and corpus, at the rate each was scored at):

* **paired over seeds**, when both records hold 2 or more common seeds (a confirmation's, or the ``gpu`` ladder's
  last rung's 3): the t interval of the per-seed differences;
* else **each side's mean, with the seed spread measured at that setting** standing in for the seeds not trained
  (``SeedNoise``, an ``lm`` budget's ``seed_noise``, measured at its own preset on the default corpus): the
  difference of two means of ``n`` and ``m`` seeds has standard deviation ``sd * sqrt(1/n + 1/m)``;
* else there is **no interval**, and the answer is a tie.

The best new finalist was picked, and each finalist's rate chosen, on the seeds of the rung it comes from, so its
score there reads low by chance (the winner's curse). The verdict is therefore also given over the seeds that
chose nothing (``held_out``: a confirmation's further seeds), beside the one over all seeds; the answer is the
one over all seeds, and the summary says when the held-out seeds disagree.

``new`` when the interval is wholly on the better side of 0, ``known`` when wholly on the worse side, ``tie``
otherwise. A tie recommends the known layout: it is the published, better-understood choice at equal evidence.
"""

from __future__ import annotations

from typing import Any

from search.best_known import best_known
from search.comparison_record import Comparison, Side
from search.evidence_record import Evidence, SeedNoise, difference, held_out_seeds, of

ANSWERS = ("new", "known", "tie")


def difference_interval(new: dict, known: dict, noise: SeedNoise | None, confidence: float = 0.95,
                        seeds: list[int] | None = None) -> dict[str, Any]:
    """The interval of ``new - known`` between two leaderboard rows' evidence records (``search.evidence_record``
    ``difference``): ``{"difference", "ci", "method", "seeds", "new_seeds", "known_seeds", "setting", "noise"}``."""
    return difference(of(new), of(known), noise, confidence, seeds)


def decide(difference_ci: list[float] | None, maximize: bool) -> str:
    """``new`` / ``known`` / ``tie`` from the interval of ``new - known`` (an interval touching 0 is a tie)."""
    if difference_ci is None:
        return "tie"
    low, high = difference_ci
    new_better, known_better = (low > 0, high < 0) if maximize else (high < 0, low > 0)
    return "new" if new_better else "known" if known_better else "tie"


def said(interval: dict[str, Any]) -> str:
    """``+0.0123 [-0.0045, +0.0291]`` (or the difference alone where there is no interval)."""
    ci = interval["ci"]
    if interval["difference"] is None:
        return "no common evidence"
    return f"{interval['difference']:+.4f}" + ("" if ci is None else f" [{ci[0]:+.4f}, {ci[1]:+.4f}]")


def explain(answer: str, new: dict, known: dict, interval: dict) -> str:
    """One sentence: which pattern the answer recommends, and why."""
    ci = interval["ci"]
    name = f"{known.get('known') or 'known'} {known['pattern']}"
    if answer == "new":
        return f"new: {new['pattern']} beats {name} by {said(interval)}, the interval wholly on its side of 0"
    if answer == "known":
        return (f"known: {name} beats {new['pattern']} ({said(interval)} for the new one), the interval wholly on "
                "its side")
    why = "no interval" if ci is None else "the interval holds 0"
    return (f"tie: {new['pattern']} against {name} {said(interval)}, {why}; recommending the known layout "
            f"{known['pattern']} (train more seeds of both to separate them)")


def held_out_verdict(new: Evidence, known: Evidence, noise: SeedNoise | None, maximize: bool) -> dict[str, Any]:
    """The verdict over the seeds on which neither finalist was chosen nor had its rate chosen (the winner's curse
    left out): ``{"seeds", "answer", "difference", "ci", "method"}``; ``answer`` None when no seed is held out."""
    seeds = held_out_seeds(new, known)
    if not seeds:
        return {"seeds": [], "answer": None, "difference": None, "ci": None,
                "method": "no seed held out: every seed both have chose a finalist or its rate"}
    interval = difference(new, known, noise, seeds=seeds)
    return {"seeds": seeds, "answer": decide(interval["ci"], maximize), "difference": interval["difference"],
            "ci": interval["ci"], "method": interval["method"]}


def compare_with_known(rows: list[dict], maximize: bool, noise: SeedNoise | None = None,
                       known: dict | None = None) -> Comparison:
    """The search's answer: its best new pattern against its best known layout, ``new``, ``known`` or ``tie``.

    ``rows``: a leaderboard, best first, whose rows carry ``known`` (a layout name or None) and ``evidence`` (their
    records, ``search.evidence_record.attach``). The difference is ``new - known`` in the score's units, over the
    records' seeds (see the module docstring); ``noise`` stands in only at the setting it was measured at.
    ``recommended`` is the pattern to pretrain: the new one only when it wins, the known layout on a tie.
    ``known``: the best known layout's row (``search.best_known``, computed once per answer and read by the cost
    limits and the cost standing too); where not given, the same rule over ``rows``.
    Returns best.json's ``vs_known`` as its record (``search.comparison_record.Comparison``).
    """
    known = known if known is not None else best_known(rows)
    new = next((row for row in rows if not row.get("known")), None)
    result = Comparison(answer="known" if rows and rows[0].get("known") else "new" if rows else None,
                        recommended=rows[0]["pattern"] if rows else None,
                        best_known=None if known is None else Side(known["pattern"], known["score"], known["known"]),
                        best_new=None if new is None else Side(new["pattern"], new["score"]))
    if known is None or new is None:
        result.note = "no known layout was scored" if known is None else "every scored pattern is a known layout"
        return result
    new_record, known_record = of(new), of(known)
    interval = difference(new_record, known_record, noise)
    result.compared = True
    result.interval, result.setting = interval["method"], interval["setting"]
    result.new_seeds, result.known_seeds = interval["new_seeds"], interval["known_seeds"]
    if interval["difference"] is None:  # a side without one finite score: no interval, said in words
        empty = [row["pattern"] for row, record in ((new, new_record), (known, known_record)) if not record.scores]
        result.answer, result.recommended = "tie", known["pattern"]
        result.verdict = (f"tie: no interval, {' and '.join(empty)} scored no finite loss on any seed; "
                          f"recommending the known layout {known['pattern']}")
        return result
    answer = decide(interval["ci"], maximize)
    # each side's mean over the seeds the difference used: the paired ones where it pairs, else all of its own
    # (a side's seeds left out of the pairing are kept beside, so the summary can say so)
    for side, record in ((result.best_new, new_record), (result.best_known, known_record)):
        used = record.only(interval["seeds"]) if interval["seeds"] else record
        side.mean, side.seeds = used.mean, used.seeds
        if used.seeds != record.seeds:
            side.mean_all, side.all_seeds = record.mean, record.seeds
    result.answer, result.difference, result.ci = answer, interval["difference"], interval["ci"]
    result.new_is_better = interval["difference"] > 0 if maximize else interval["difference"] < 0
    result.recommended = new["pattern"] if answer == "new" else known["pattern"]
    result.verdict = explain(answer, new, known, interval)
    result.seeds = interval["seeds"]
    result.selected_on = sorted(new_record.selected_on | known_record.selected_on)
    result.held_out = held_out_verdict(new_record, known_record, noise, maximize)
    result.noise_source = interval["noise"]
    if noise is not None:
        result.seed_noise = {**noise.as_dict(), "used": interval["noise"] is not None}
    return result


__all__ = ["ANSWERS", "Comparison", "SeedNoise", "Side", "compare_with_known", "decide", "difference_interval", "explain",
           "held_out_verdict"]
