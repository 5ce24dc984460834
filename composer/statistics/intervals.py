"""One architecture's figure with its interval: a mean over seeds, a proportion, a clustered one."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from composer.statistics._numbers import as_float, check_confidence, plain, scipy_stats, t_interval


def seed_summary(values: Sequence[float | None], confidence: float = 0.95) -> dict[str, Any]:
    """Mean, spread and a Student-t interval of the mean over one architecture's per-seed losses.

    Why: with a handful of seeds the mean alone hides how much it would move under another draw of seeds;
    the t interval (not a normal one, which is too narrow for n of 2 to 5) is what two architectures' means
    should be judged against. A seed whose run diverged or never finished (``None`` or NaN, also +-inf) is
    dropped rather than poisoning the mean, and counted in ``"dropped"`` so the report says so.

    Returns ``{"n", "mean", "std", "ci", "values", "dropped"}``: ``n`` counts the finite values only, ``std``
    is the sample standard deviation (ddof=1), ``ci`` is ``[lo, hi]``. ``std`` and ``ci`` are ``None`` for
    fewer than two values (one seed gives no estimate of the noise); ``mean`` is ``None`` for none.
    """
    check_confidence(confidence)
    raw = [as_float(v) for v in values]
    kept = [v for v in raw if math.isfinite(v)]
    n = len(kept)
    mean = float(np.mean(kept)) if n else None
    std = float(np.std(kept, ddof=1)) if n >= 2 else None
    ci = t_interval(mean, std, n, confidence) if n >= 2 else None
    return {
        "n": n,
        "mean": plain(mean),
        "std": plain(std),
        "ci": plain(ci),
        "values": plain(kept),
        "dropped": len(raw) - n,
    }


def proportion_interval(successes: int, trials: int, confidence: float = 0.95) -> list[float] | None:
    """Wilson score interval of an accuracy measured on ``trials`` independent test items.

    Why: a single training seed gives no spread to build a t interval from, but its test accuracy still has
    sampling noise from the finite test set; Wilson's interval stays inside [0, 1] and is honest near 0 and 1,
    where the normal approximation is not. It covers the test sample only, not another training seed.
    """
    check_confidence(confidence)
    if trials <= 0:
        return None
    if not 0 <= successes <= trials:
        raise ValueError(f"successes must lie in [0, trials={trials}], got {successes}")
    return _wilson(successes / trials, trials, confidence)


def _wilson(p: float, n: float, confidence: float) -> list[float]:
    """Wilson's interval of a proportion ``p`` over ``n`` independent items (``n`` need not be a whole number)."""
    z = float(scipy_stats().norm.ppf(0.5 + confidence / 2))
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    # at p = 0 (1) the low (high) end is exactly 0 (1): said so, not left to rounding
    return [0.0 if p <= 0 else max(0.0, centre - half), 1.0 if p >= 1 else min(1.0, centre + half)]


def cluster_spread(successes: Sequence[float], trials: Sequence[float]) -> dict[str, Any]:
    """How much a proportion varies between the clusters its items come in: ``successes[i]`` of ``trials[i]`` in
    cluster ``i`` (the queries of one test sequence, say).

    Returns ``{"clusters", "trials", "proportion", "cluster_sd"}``: ``cluster_sd`` is the standard deviation (ddof
    1) of the per-cluster proportions when the clusters are of one size, in general ``sqrt(clusters)`` times the
    ratio estimator's standard error of the pooled proportion, ``sqrt(k / (k - 1) * sum((s_i - p t_i)^2)) / N``;
    None for fewer than two clusters. What :func:`clustered_proportion_interval` needs, in a few JSON numbers
    rather than one count per cluster.
    """
    s = np.asarray([as_float(v) for v in successes], dtype=float)
    t = np.asarray([as_float(v) for v in trials], dtype=float)
    if s.shape != t.shape:
        raise ValueError(f"one count of trials per cluster: {s.size} successes, {t.size} trials")
    if np.any(t <= 0) or np.any(s < 0) or np.any(s > t) or not np.all(np.isfinite(s)):
        raise ValueError("successes must lie in [0, trials] of their cluster, with trials positive")
    k, total = int(s.size), float(t.sum())
    p = float(s.sum()) / total if k else math.nan
    sd = None
    if k >= 2:
        se = math.sqrt(k / (k - 1) * float(np.sum((s - p * t) ** 2))) / total
        sd = se * math.sqrt(k)
    return {"clusters": k, "trials": plain(total if not total.is_integer() else int(total)),
            "proportion": plain(p), "cluster_sd": plain(sd)}


def _packed_sd(p: float, clusters: int) -> float:
    """The largest sd of ``clusters`` per-cluster proportions (ddof 1) whose mean is ``p``: all 0 or 1 but one."""
    if clusters < 2:
        return 0.0
    failed = (1.0 - p) * clusters
    whole = min(int(failed), clusters - 1)
    values = np.ones(clusters)
    values[:whole] = 0.0
    values[whole] = 1.0 - (failed - whole)
    return float(np.std(values, ddof=1))


def clustered_proportion_interval(proportion: float, trials: int, clusters: int, cluster_sd: float | None = None,
                                  confidence: float = 0.95) -> dict[str, Any]:
    """Wilson's interval of a proportion measured on ``trials`` items that come in ``clusters`` equal clusters,
    over the number of *independent* items they are worth.

    Why: items of one cluster are not independent. The queries of one MQAR test sequence share its keys, its
    query distances and the model's state along it, so a model that fails a sequence tends to fail several of its
    queries; :func:`proportion_interval` over the queries then treats 16,384 queries from 256 sequences as 16,384
    independent trials and calls a difference the sequences drawn could explain. The design effect ``deff``, the
    variance of the proportion over clusters (``cluster_sd**2 / clusters``, :func:`cluster_spread`) over the
    binomial one (``p (1 - p) / trials``), says how many items one independent item is worth; Wilson's interval
    over ``trials / deff`` items follows. ``deff`` is kept within ``[1, trials / clusters]``: from independent
    items (less spread than that is not taken as more information) to whole clusters standing or falling together.

    Without ``cluster_sd`` (a record that kept only the number of clusters), the spread is the largest the
    proportion allows: its misses packed into as few clusters as they fill (every cluster all right or all wrong
    but one), so the interval is at least as wide as any spread consistent with the record would give (6 misses
    of 16,384 queries in 256 clusters: ``deff`` about 6, where one miss per cluster would give 1). At a proportion
    of 0 or 1 no spread can show how the items hang together (every cluster's is 0 whatever the correlation), and
    ``deff`` is its worst case, ``trials / clusters``: Wilson's interval over the clusters (all 256 sequences right
    is as consistent with a sequence failing now and then as with a query failing now and then). It covers the
    sampling of the test items only, not another training seed of the model that was tested.

    Returns ``{"proportion", "trials", "clusters", "design_effect", "effective_trials", "ci"}`` (``ci`` None for
    no trials).
    """
    check_confidence(confidence)
    p = as_float(proportion)
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"proportion must lie in [0, 1], got {proportion}")
    if trials <= 0:
        return {"proportion": plain(p), "trials": trials, "clusters": clusters, "design_effect": None,
                "effective_trials": None, "ci": None}
    if not 1 <= clusters <= trials:
        raise ValueError(f"clusters must lie in [1, trials={trials}], got {clusters}")
    most = trials / clusters
    binomial = p * (1.0 - p) / trials
    if cluster_sd is None or not math.isfinite(as_float(cluster_sd)):
        cluster_sd = _packed_sd(p, clusters)
    if binomial <= 0:
        deff = most
    else:
        deff = min(max(float(cluster_sd) ** 2 / clusters / binomial, 1.0), most)
    effective = trials / deff
    return {"proportion": plain(p), "trials": trials, "clusters": clusters, "design_effect": plain(deff),
            "effective_trials": plain(effective), "ci": plain(_wilson(p, effective, confidence))}


def format_interval(ci: Sequence[float | None] | None, digits: int = 4) -> str:
    """``[lo, hi]`` as ``"[-0.0123, +0.0045]"`` (signs always shown, so a Markdown table reads at a glance
    whether the interval straddles 0), or ``"n/a"`` for a missing or undefined interval."""
    if ci is None or len(ci) != 2:
        return "n/a"
    lo, hi = (as_float(v) for v in ci)
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return "n/a"
    return f"[{lo:+.{digits}f}, {hi:+.{digits}f}]"
