"""Whether a search's answer is a new pattern, a known layout, or a tie: only an interval may declare a winner.

Why: a search's best new finalist is the minimum of several noisy scores, so it lands below its true value by
chance (three finalists of equal quality: about 0.85 seed standard deviations, ~0.02 at the ``cpu`` ladder's
target). The one-shot search's answer ``SSSSMS`` led Nemotron-H's layout by 0.015 at one seed and trailed it by
0.022 [0.002, 0.041] over 3 seeds (issue 37). So the answer names a winner only when the interval of
``new - known`` lies wholly on one side of 0:

* **paired over seeds**, when both scores were trained on 2 or more common seeds (``details["losses"]``, the
  ``gpu`` ladder's last rung trains 3): the t interval of the per-seed differences
  (``composer.evidence.paired_difference``);
* else from **the seed spread measured at that budget** (``SeedNoise``, an ``lm`` budget's ``seed_sd``): the
  difference of two means of ``n`` and ``m`` seeds has standard deviation ``sd * sqrt(1/n + 1/m)``, and a t
  interval with the measurement's degrees of freedom. It treats the two sides as independent (conservative:
  runs on the same seed share their data order, which a paired estimate would credit);
* else there is **no interval** (one seed, no measured spread): the answer is a tie, and the summary says the
  difference is a single draw.

``new`` when the interval is wholly on the better side of 0, ``known`` when wholly on the worse side, ``tie``
otherwise. A tie recommends the known layout: it is the published, better-understood choice at equal evidence.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

ANSWERS = ("new", "known", "tie")


@dataclass(frozen=True)
class SeedNoise:
    """A seed standard deviation of one run's score, measured at a budget, standing in for seeds not trained."""

    sd: float  # standard deviation of one run's score across training seeds
    dof: int  # degrees of freedom of that estimate (runs - patterns, pooled)
    source: str  # where it was measured (a doc section or results file)

    def as_dict(self) -> dict[str, Any]:
        return {"sd": self.sd, "dof": self.dof, "source": self.source}


def seed_losses(row: dict) -> dict[str, float]:
    """A leaderboard row's score per training seed (``details["losses"]``), or its one score at an unnamed seed."""
    losses = (row.get("details") or {}).get("losses") or {}
    return {str(seed): float(loss) for seed, loss in losses.items() if loss is not None}


def difference_interval(new: dict, known: dict, noise: SeedNoise | None,
                        confidence: float = 0.95) -> dict[str, Any]:
    """The interval of ``new["score"] - known["score"]`` and how it was obtained (see the module docstring).

    Returns ``{"difference", "ci", "method", "seeds"}``; ``ci`` is None when there is no interval."""
    from scipy import stats

    from composer.evidence import paired_difference

    difference = new["score"] - known["score"]
    new_seeds, known_seeds = seed_losses(new), seed_losses(known)
    common = sorted(set(new_seeds) & set(known_seeds), key=lambda s: (len(s), s))
    if len(common) >= 2:
        paired = paired_difference({s: new_seeds[s] for s in common}, {s: known_seeds[s] for s in common},
                                   confidence)
        # the mean over the common seeds, the centre of its interval (a score may rest on fewer seeds: a
        # confirmation adds seeds to the last rung's one)
        return {"difference": paired["mean"], "ci": paired["ci"], "seeds": common,
                "method": f"paired over seeds {', '.join(common)} (t interval of the per-seed differences)"}
    if noise is not None and noise.sd > 0 and noise.dof >= 1:
        n, m = max(1, len(new_seeds)), max(1, len(known_seeds))
        half = float(stats.t.ppf((1 + confidence) / 2, noise.dof)) * noise.sd * math.sqrt(1 / n + 1 / m)
        return {"difference": difference, "ci": [difference - half, difference + half], "seeds": common,
                "method": (f"{n} seed(s) against {m}: the seed sd measured at this budget ({noise.sd:.4f}, "
                           f"{noise.dof} dof; {noise.source}) stands in for seeds not trained")}
    return {"difference": difference, "ci": None, "seeds": common,
            "method": "one seed per pattern and no seed spread measured at this budget: no interval, the "
                      "difference is a single draw"}


def decide(difference_ci: list[float] | None, maximize: bool) -> str:
    """``new`` / ``known`` / ``tie`` from the interval of ``new - known`` (an interval touching 0 is a tie)."""
    if difference_ci is None:
        return "tie"
    low, high = difference_ci
    new_better, known_better = (low > 0, high < 0) if maximize else (high < 0, low > 0)
    return "new" if new_better else "known" if known_better else "tie"


def explain(answer: str, new: dict, known: dict, interval: dict) -> str:
    """One sentence: which pattern the answer recommends, and why."""
    ci = interval["ci"]
    said = (f"{interval['difference']:+.4f}" + ("" if ci is None else f" [{ci[0]:+.4f}, {ci[1]:+.4f}]"))
    name = f"{known.get('known') or 'known'} {known['pattern']}"
    if answer == "new":
        return f"new: {new['pattern']} beats {name} by {said}, the interval wholly on its side of 0"
    if answer == "known":
        return f"known: {name} beats {new['pattern']} ({said} for the new one), the interval wholly on its side"
    why = "no interval" if ci is None else "the interval holds 0"
    return (f"tie: {new['pattern']} against {name} {said}, {why}; recommending the known layout {known['pattern']} "
            "(train more seeds of both to separate them)")


__all__ = ["ANSWERS", "SeedNoise", "decide", "difference_interval", "explain", "seed_losses"]
