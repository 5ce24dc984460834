"""Two architectures: the per-seed paired difference (or a difference of means) and its verdict in words."""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np

from composer.statistics._numbers import (
    as_float,
    check_confidence,
    plain,
    scipy_stats,
    sorted_seeds,
    t_interval,
)

# Verdicts of :func:`paired_difference`: the interval of the per-seed difference, read in words.
VERDICT_LOWER = "lower"
VERDICT_HIGHER = "higher"
VERDICT_WITHIN_NOISE = "within noise"
VERDICT_SINGLE_SEED = "single seed: no interval"
VERDICT_NO_COMMON_SEEDS = "no common seeds"


def paired_difference(
    values: Mapping[Hashable, float | None],
    reference: Mapping[Hashable, float | None],
    confidence: float = 0.95,
) -> dict[str, Any]:
    """Per-seed difference ``values[s] - reference[s]`` with a t interval and a verdict in words.

    Why paired: when two architectures are trained with the same seeds (same data order, same init stream),
    much of the seed-to-seed variation is shared, and the difference *per seed* is far less noisy than the
    difference of two independent means. Only seeds both sides have (with a finite value on both) are used,
    in sorted order, so a seed that only one side finished cannot bias the comparison.

    The verdict reads the interval of the mean difference: ``"lower"`` when the whole interval is below 0
    (``values`` is lower, i.e. better for a loss), ``"higher"`` when it is wholly above 0, ``"within noise"``
    when it contains 0 (an interval touching 0 counts as containing it): the seeds cannot tell the two apart,
    whatever the sign of the mean. One common seed gives ``"single seed: no interval"`` and none gives
    ``"no common seeds"``; those are not evidence either way.

    Returns ``{"seeds", "differences", "n", "mean", "std", "ci", "verdict"}`` (``std``/``ci`` ``None`` for
    ``n < 2``, ``mean`` ``None`` for ``n == 0``).
    """
    check_confidence(confidence)
    seeds, diffs = [], []
    for seed in sorted_seeds(set(values) & set(reference)):
        a, b = as_float(values[seed]), as_float(reference[seed])
        if math.isfinite(a) and math.isfinite(b):
            seeds.append(seed)
            diffs.append(a - b)
    n = len(diffs)
    mean = float(np.mean(diffs)) if n else None
    std = float(np.std(diffs, ddof=1)) if n >= 2 else None
    ci = t_interval(mean, std, n, confidence) if n >= 2 else None
    if n == 0:
        verdict = VERDICT_NO_COMMON_SEEDS
    elif n == 1:
        verdict = VERDICT_SINGLE_SEED
    elif ci[1] < 0.0:
        verdict = VERDICT_LOWER
    elif ci[0] > 0.0:
        verdict = VERDICT_HIGHER
    else:
        verdict = VERDICT_WITHIN_NOISE
    return {
        "seeds": plain(seeds),
        "differences": plain(diffs),
        "n": n,
        "mean": plain(mean),
        "std": plain(std),
        "ci": plain(ci),
        "verdict": verdict,
    }


def difference_of_means(
    values: Sequence[float],
    reference: Sequence[float],
    sd: float,
    dof: int,
    confidence: float = 0.95,
) -> dict[str, Any]:
    """``mean(values) - mean(reference)`` with a t interval from a seed spread ``sd`` measured elsewhere.

    Why: where two architectures do not share two or more seeds, :func:`paired_difference` has nothing to pair,
    but a seed standard deviation of one run's loss measured at the same budget, preset and corpus (``dof``
    degrees of freedom) still says how far two means of ``n`` and ``m`` seeds can differ by chance: the
    difference has standard deviation ``sd * sqrt(1/n + 1/m)`` and a t interval with the measurement's ``dof``.
    The interval is centred on the two means, each over its own seeds, never on one seed of a side whose width
    counts several: a side's extra seeds narrow the interval only where they also move its centre. The two sides
    are taken as independent, which is conservative for runs that share a seed's data order.

    Returns ``{"n", "m", "mean", "ci"}`` (``ci`` ``None`` when a side is empty, ``sd`` is not positive or ``dof``
    is below 1).
    """
    check_confidence(confidence)
    ours = [v for v in (as_float(x) for x in values) if math.isfinite(v)]
    theirs = [v for v in (as_float(x) for x in reference) if math.isfinite(v)]
    n, m = len(ours), len(theirs)
    if not n or not m:
        return {"n": n, "m": m, "mean": None, "ci": None}
    mean = float(np.mean(ours)) - float(np.mean(theirs))
    ci = None
    if sd > 0 and math.isfinite(sd) and dof >= 1:
        half = float(scipy_stats().t.ppf((1.0 + confidence) / 2.0, dof)) * sd * math.sqrt(1.0 / n + 1.0 / m)
        ci = [mean - half, mean + half]
    return {"n": n, "m": m, "mean": plain(mean), "ci": plain(ci)}
