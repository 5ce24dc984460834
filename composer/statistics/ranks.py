"""Rank agreement with the noise shown: Spearman and Kendall with bootstrap intervals, the seed noise ceiling,
whether a budget separates the architectures at all, and how optimistic a best-of-several score reads."""

from __future__ import annotations

import math
import warnings
from collections.abc import Hashable, Mapping, Sequence
from itertools import combinations
from typing import Any

import numpy as np

from composer.statistics._numbers import (
    as_float,
    check_confidence,
    percentile_interval,
    plain,
    scipy_stats,
    sorted_seeds,
)

# Power: below this between-seed agreement (mean pairwise Spearman of the architectures' losses across training
# seeds) the budget cannot rank the architectures, and no report names a winner. At 0.7 the mean of two seeds
# has Spearman-Brown reliability 2r/(1+r) = 0.82, so an error-free score could reach Spearman ~0.91 with it; at
# 0.5 that falls to 0.67 and 0.82, and one seed's ranking explains only a quarter of another's.
POWER_THRESHOLD = 0.7
UNDERPOWERED = "underpowered: raise --tokens or --seeds"

# Bound on the elements of one work array of the bootstrap, (replicates, K, K) for the vectorised Kendall
# tau and (replicates, K, seeds) for the seed resampling: replicates are processed in chunks of this size,
# which keeps the peak memory well under ~200 MB whatever K is.
CHUNK_ELEMENTS = 4_000_000


def _paired_arrays(x: Sequence[float], y: Sequence[float]) -> tuple[np.ndarray, np.ndarray] | None:
    """``x``, ``y`` as float arrays, or ``None`` when a rank correlation is undefined on them."""
    xa = np.asarray([as_float(v) for v in x], dtype=float)
    ya = np.asarray([as_float(v) for v in y], dtype=float)
    if xa.shape != ya.shape:
        raise ValueError(f"x and y must have the same length, got {xa.size} and {ya.size}")
    if xa.size < 3 or np.all(xa == xa[0]) or np.all(ya == ya[0]):
        return None
    return xa, ya


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman rank correlation of ``x`` and ``y`` (average ranks for ties), NaN when undefined.

    Undefined means fewer than 3 points (two points always correlate +-1, which says nothing) or a constant
    input (no ranking to agree with). A NaN in the data gives NaN. Thin wrapper over
    ``scipy.stats.spearmanr``.
    """
    arrays = _paired_arrays(x, y)
    if arrays is None:
        return math.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", scipy_stats().ConstantInputWarning)
        return float(scipy_stats().spearmanr(*arrays).statistic)


def kendall(x: Sequence[float], y: Sequence[float]) -> float:
    """Kendall's tau-b of ``x`` and ``y`` (tie-corrected), NaN when undefined (as for :func:`spearman`).

    Kendall's tau reads directly as "the fraction of pairs ranked the same way minus the fraction ranked the
    other way", which is the question a search asks of a pair of candidates. Wraps ``scipy.stats.kendalltau``.
    """
    arrays = _paired_arrays(x, y)
    if arrays is None:
        return math.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", scipy_stats().ConstantInputWarning)
        return float(scipy_stats().kendalltau(*arrays, variant="b").statistic)


def _rowwise_spearman(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Spearman per row of two ``(B, K)`` arrays: Pearson correlation of their average ranks."""
    rx = scipy_stats().rankdata(x, axis=1, method="average")
    ry = scipy_stats().rankdata(y, axis=1, method="average")
    rx -= rx.mean(axis=1, keepdims=True)
    ry -= ry.mean(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (rx * ry).sum(axis=1) / np.sqrt((rx * rx).sum(axis=1) * (ry * ry).sum(axis=1))


def _rowwise_kendall(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Kendall tau-b per row of two ``(B, K)`` arrays, from pairwise sign arrays of shape ``(B, K, K)``.

    With ``sx[i, j] = sign(x_i - x_j)``: concordant minus discordant pairs is ``sum(sx * sy) / 2`` and the
    pairs untied in x are ``sum(sx**2) / 2`` (the full matrix counts each pair twice, which cancels), so
    ``tau_b = sum(sx*sy) / sqrt(sum(sx^2) * sum(sy^2))``. Rows are processed in chunks so the ``(B, K, K)``
    work arrays stay small for large K.
    """
    rows, k = x.shape
    out = np.empty(rows, dtype=float)
    chunk = max(1, CHUNK_ELEMENTS // (k * k))
    for start in range(0, rows, chunk):
        xs, ys = x[start : start + chunk], y[start : start + chunk]
        sx = np.sign(xs[:, :, None] - xs[:, None, :]).astype(np.int8)
        sy = np.sign(ys[:, :, None] - ys[:, None, :]).astype(np.int8)
        both = np.einsum("bij,bij->b", sx, sy, dtype=np.int64)
        untied_x = np.einsum("bij,bij->b", sx, sx, dtype=np.int64)
        untied_y = np.einsum("bij,bij->b", sy, sy, dtype=np.int64)
        with np.errstate(invalid="ignore", divide="ignore"):
            out[start : start + chunk] = both / np.sqrt(untied_x.astype(float) * untied_y.astype(float))
    return out


def _finite_losses(per_seed_losses: Sequence[Sequence[float]], k: int) -> list[list[float]]:
    if len(per_seed_losses) != k:
        raise ValueError(f"{k} scores but {len(per_seed_losses)} per-seed loss lists")
    losses = []
    for index, row in enumerate(per_seed_losses):
        kept = [v for v in (as_float(x) for x in row) if math.isfinite(v)]
        if not kept:
            raise ValueError(f"pattern {index} has no finite target loss")
        losses.append(kept)
    return losses


def _resampled_mean_losses(losses: list[list[float]], n_boot: int, seed: int):
    """Hierarchical bootstrap replicates, in chunks: ``(patterns, mean_loss)``, both ``(B, K)``.

    ``patterns[b, j]`` is the pattern drawn into slot j of replicate b (with replacement) and
    ``mean_loss[b, j]`` its mean loss over a resample of its own seeds (one resample per pattern and
    replicate, shared by the copies of a pattern drawn twice; see :func:`bootstrap_rank_correlation`).
    The draws depend on ``seed``, K and the seed counts only, never on scores, so several score vectors
    judged on the same replicates are compared on the same draws (:func:`compare_rank_correlations`).
    """
    k = len(losses)
    # Losses padded into a (K, M) table; column m < n_k holds pattern k's m-th seed.
    counts = np.array([len(row) for row in losses])
    width = int(counts.max())
    table = np.zeros((k, width))
    for index, row in enumerate(losses):
        table[index, : len(row)] = row
    # Two independent streams, consumed in replicate order whatever the chunking (doubles only: one 64-bit
    # draw each), so the answer depends on `seed` and the data, not on memory bounds.
    pattern_rng, seed_rng = (np.random.default_rng(child) for child in np.random.SeedSequence(seed).spawn(2))
    chunk = max(1, CHUNK_ELEMENTS // (k * max(k, width)))
    for start in range(0, n_boot, chunk):
        rows = min(chunk, n_boot - start)
        patterns = np.floor(pattern_rng.random((rows, k)) * k).astype(np.int64)  # (B, K): pattern per slot
        # Per replicate every pattern's n_k seeds are resampled with replacement: `width` uniform indices
        # below n_k, of which only the first n_k count (the rest are masked out by `used`). A pattern drawn
        # twice in a replicate keeps one resampled mean: the same pattern, tied in score, is tied in loss.
        picks = np.floor(seed_rng.random((rows, k, width)) * counts[None, :, None]).astype(np.int64)
        used = np.arange(width)[None, None, :] < counts[None, :, None]
        values = table[np.arange(k)[None, :, None], picks]
        pattern_loss = np.where(used, values, 0.0).sum(axis=2) / counts  # (B, K): pattern k's resampled mean
        yield patterns, np.take_along_axis(pattern_loss, patterns, axis=1)


def bootstrap_rank_correlation(
    scores: Sequence[float],
    per_seed_losses: Sequence[Sequence[float]],
    n_boot: int = 10000,
    confidence: float = 0.95,
    seed: int = 0,
) -> dict[str, Any]:
    """Does a higher search score predict a lower target loss? Rank correlations, hierarchical bootstrap.

    For K patterns, ``scores[k]`` is the search (proxy) score of pattern k, higher is better, and
    ``per_seed_losses[k]`` its target losses, one per training seed (lengths may differ; each needs at least
    one finite value, non-finite ones are dropped). The point estimates are :func:`spearman` and
    :func:`kendall` between the scores and the *negated* mean loss, so +1 means the search ranks the
    patterns exactly as the target does, 0 means it is no better than chance and -1 exactly backwards.

    Why a hierarchical bootstrap: a rank correlation over a dozen patterns is uncertain for two reasons,
    which patterns happened to be evaluated and which seeds their target losses came from. Each replicate
    therefore resamples the K patterns with replacement *and*, inside each drawn pattern, that pattern's
    seeds with replacement before taking its mean loss, so the interval carries both. A pattern drawn more
    than once in a replicate gets one seed resample, shared by its copies: it is one pattern with one score,
    and giving the copies different mean losses would break their tie on the loss side only, pulling every
    replicate of a perfect ranking below +1 (and the interval below its own point estimate). A pattern with
    one seed contributes no seed noise (there is none to measure). Replicates whose correlation is undefined
    (all drawn scores, or all drawn mean losses, equal) are dropped; ``"n_boot"`` reports how many were
    used. Intervals are percentile intervals, deterministic given ``seed``.

    Reading the interval: the resampled seed means carry the seed noise a second time on top of the noise
    already in the observed means, which attenuates the replicates' correlations. When seed noise is small
    next to the spread between patterns this is negligible; when it is not, the interval sits low (it errs
    towards "the search agrees less"), and with many patterns and very noisy seeds it can even lie below
    the point estimate. A wide interval at K of about a dozen is the honest answer, not a defect.

    Returns ``{"spearman", "spearman_ci", "kendall", "kendall_ci", "n_patterns", "n_boot"}``; with fewer
    than 3 patterns or a constant input everything but the counts is ``None``.
    """
    check_confidence(confidence)
    if n_boot < 1:
        raise ValueError(f"n_boot must be at least 1, got {n_boot}")
    score_arr = np.asarray([as_float(s) for s in scores], dtype=float)
    k = score_arr.size
    losses = _finite_losses(per_seed_losses, k)
    if not np.all(np.isfinite(score_arr)):
        raise ValueError("every pattern needs a finite search score")
    mean_loss = np.array([np.mean(row) for row in losses])

    result: dict[str, Any] = {
        "spearman": plain(spearman(score_arr, -mean_loss)),
        "spearman_ci": None,
        "kendall": plain(kendall(score_arr, -mean_loss)),
        "kendall_ci": None,
        "n_patterns": k,
        "n_boot": 0,
    }
    if result["spearman"] is None:
        return result

    rhos, taus = [], []
    for patterns, boot_loss in _resampled_mean_losses(losses, n_boot, seed):
        boot_score = score_arr[patterns]
        constant_score = np.all(boot_score == boot_score[:, :1], axis=1)
        defined = ~constant_score & ~np.all(boot_loss == boot_loss[:, :1], axis=1)
        boot_score, boot_target = boot_score[defined], -boot_loss[defined]
        rhos.append(_rowwise_spearman(boot_score, boot_target))
        taus.append(_rowwise_kendall(boot_score, boot_target))
    rho, tau = np.concatenate(rhos), np.concatenate(taus)
    result["spearman_ci"] = plain(percentile_interval(rho, confidence))
    result["kendall_ci"] = plain(percentile_interval(tau, confidence))
    result["n_boot"] = int(rho.size)
    return result


def compare_rank_correlations(
    scores_by_proxy: Mapping[str, Sequence[float]],
    per_seed_losses: Sequence[Sequence[float]],
    reference: str,
    n_boot: int = 10000,
    confidence: float = 0.95,
    seed: int = 0,
) -> dict[str, dict[str, Any]]:
    """Several proxies' Spearman correlations with one target, each against ``reference``'s, paired.

    Why: twelve patterns give every proxy's correlation a wide interval, and two wide intervals overlapping
    says little about which proxy is better. Judged on the *same* bootstrap replicates (the same patterns and
    seeds drawn), the difference of two correlations is far less noisy than either, the paired comparison of
    :func:`paired_difference` applied to rank agreement. ``scores_by_proxy[name][k]`` is pattern k's score
    under that proxy, higher is better; ``per_seed_losses`` as in :func:`bootstrap_rank_correlation`.

    Returns ``{name: {"spearman", "spearman_ci", "diff_vs_reference", "diff_ci", "p_better"}}``:
    ``diff_vs_reference`` is ``spearman - spearman[reference]`` (point estimates), ``diff_ci`` its percentile
    interval over the replicates where both are defined, ``p_better`` the share of those replicates in which
    this proxy correlates better than the reference (0.5: indistinguishable).
    """
    check_confidence(confidence)
    if reference not in scores_by_proxy:
        raise ValueError(f"reference {reference!r} is not among the proxies {sorted(scores_by_proxy)}")
    names = list(scores_by_proxy)
    score_arrays = {name: np.asarray([as_float(v) for v in scores_by_proxy[name]], dtype=float) for name in names}
    k = len(per_seed_losses)
    for name, scores in score_arrays.items():
        if scores.size != k or not np.all(np.isfinite(scores)):
            raise ValueError(f"proxy {name!r} needs {k} finite scores")
    losses = _finite_losses(per_seed_losses, k)
    mean_loss = np.array([np.mean(row) for row in losses])
    samples: dict[str, list[np.ndarray]] = {name: [] for name in names}
    for patterns, boot_loss in _resampled_mean_losses(losses, n_boot, seed):
        constant_loss = np.all(boot_loss == boot_loss[:, :1], axis=1)
        for name in names:
            boot_score = score_arrays[name][patterns]
            rho = _rowwise_spearman(boot_score, -boot_loss)
            rho[constant_loss | np.all(boot_score == boot_score[:, :1], axis=1)] = np.nan
            samples[name].append(rho)
    drawn = {name: np.concatenate(chunks) for name, chunks in samples.items()}
    base = drawn[reference]
    point_reference = spearman(score_arrays[reference], -mean_loss)
    out = {}
    for name in names:
        point = spearman(score_arrays[name], -mean_loss)
        rho = drawn[name]
        both = np.isfinite(rho) & np.isfinite(base)
        diff = rho[both] - base[both]
        out[name] = {
            "spearman": plain(point),
            "spearman_ci": plain(percentile_interval(rho[np.isfinite(rho)], confidence)),
            "diff_vs_reference": plain(point - point_reference),
            "diff_ci": plain(percentile_interval(diff, confidence)),
            "p_better": plain(float(np.mean(diff > 0) + 0.5 * np.mean(diff == 0)) if diff.size else None),
        }
    return out


def noise_ceiling(per_seed_losses_by_seed: Mapping[Hashable, Sequence[float | None]]) -> dict[str, Any]:
    """How well the target agrees with itself across seeds: the ceiling for any search score's correlation.

    ``per_seed_losses_by_seed[s][k]`` is pattern k's target loss under training seed s; the lists are
    aligned by index, with ``None``/NaN (or a shorter list) for a pattern that seed lacks. For each pair of
    seeds the Spearman correlation of the patterns' losses is taken over the patterns both seeds have.

    Why: a search score cannot be expected to correlate with the mean target loss better than the target's
    own seeds agree with each other; if two seeds of the *same* training only reach rho = 0.6, a proxy at
    0.5 is close to as good as can be measured, not a failure. The mean pairwise value ``r`` is the
    reliability of one seed; the Spearman-Brown prediction ``n*r / (1 + (n-1)*r)`` (n = number of seeds, r
    clipped to [-1, 1]) is the reliability of the mean over all n seeds, the quantity the search is scored
    against; it is ``None`` where ``1 + (n-1)*r <= 0`` (the formula's pole, e.g. two seeds ranking exactly
    backwards). Under the classical true-score model even an error-free score correlates with that mean by at
    most ``sqrt(spearman_brown)``, reported as ``"ceiling"`` (``None`` when the reliability is negative).

    Returns ``{"pairs": [{"seeds": [a, b], "spearman": r}, ...], "mean", "spearman_brown", "ceiling"}``;
    ``mean`` is the plain average of the defined pairwise values (``None`` with fewer than 2 seeds or none
    defined), and the other two are ``None`` where undefined.
    """
    seeds = sorted_seeds(per_seed_losses_by_seed)
    width = max((len(per_seed_losses_by_seed[s]) for s in seeds), default=0)
    table = {}
    for s in seeds:
        row = [as_float(v) for v in per_seed_losses_by_seed[s]]
        table[s] = np.array(row + [math.nan] * (width - len(row)), dtype=float)
    pairs, defined = [], []
    for a, b in combinations(seeds, 2):
        both = np.isfinite(table[a]) & np.isfinite(table[b])
        r = spearman(table[a][both], table[b][both])
        pairs.append({"seeds": plain([a, b]), "spearman": plain(r)})
        if math.isfinite(r):
            defined.append(r)
    n = len(seeds)
    mean = float(np.mean(defined)) if n >= 2 and defined else None
    brown = ceiling = None
    if mean is not None:
        r = min(1.0, max(-1.0, mean))
        denominator = 1.0 + (n - 1) * r
        # With complete data the pairwise mean cannot fall below -1/(n-1) (the rank correlation matrix is
        # positive semi-definite); at that pole, or past it with missing patterns, the formula means nothing.
        if denominator > 1e-12:
            brown = n * r / denominator
            ceiling = math.sqrt(brown) if brown >= 0.0 else None
    return {"pairs": pairs, "mean": plain(mean), "spearman_brown": plain(brown), "ceiling": plain(ceiling)}


def seed_separation(losses: Mapping[Hashable, Mapping[Hashable, float | None]],
                    threshold: float = POWER_THRESHOLD) -> dict[str, Any]:
    """Can this budget tell the architectures apart? The seed spread within each against the spread between them.

    ``losses[model][seed]`` is a model's loss at a training seed (``None``/NaN for a diverged run). Returns:

    - ``within_seed_std``: the pooled seed standard deviation, ``sqrt(mean of the models' sample variances)``
      over models with two or more finite seeds: how much one architecture's loss moves with the seed;
    - ``between_model_std``: the standard deviation of the models' mean losses;
    - ``separation``: their ratio. Near or below 1 the architectures differ by about as much as reseeding one
      moves it, so no ranking of them can be trusted;
    - ``noise_ceiling`` / ``noise_ceiling_pairs`` / ``noise_ceiling_spearman_brown``: :func:`noise_ceiling`'s
      mean pairwise Spearman of the models' losses between seeds, its pairs and the reliability of the seeds'
      mean (defined from three models and two seeds);
    - ``underpowered`` and ``reason``: True when there are fewer than two seeds, or the ceiling is defined and
      below ``threshold``, or the separation is below 1; ``reason`` says which, in words.

    Why both measures: with three or four architectures (a pipeline) the rank agreement moves in steps of 0.2 to
    0.5, so the variance ratio is the finer measure there; with many (a transfer) the ceiling is.
    """
    models = list(losses)
    seeds = sorted_seeds({seed for per_seed in losses.values() for seed in per_seed})
    finite = {m: [v for v in (as_float(losses[m].get(s)) for s in seeds) if math.isfinite(v)] for m in models}
    variances = [float(np.var(v, ddof=1)) for v in finite.values() if len(v) >= 2]
    within = math.sqrt(float(np.mean(variances))) if variances else None
    means = [float(np.mean(v)) for v in finite.values() if v]
    between = float(np.std(means, ddof=1)) if len(means) >= 2 else None
    ratio = between / within if within and between is not None else None
    ceiling = noise_ceiling({s: [losses[m].get(s) for m in models] for s in seeds}) if len(models) >= 3 else None
    mean_ceiling = ceiling["mean"] if ceiling else None
    reasons = []
    if len(seeds) < 2:
        reasons.append("one seed gives no estimate of the noise")
    if mean_ceiling is not None and mean_ceiling < threshold:
        reasons.append(f"the seeds rank the architectures differently (Spearman {mean_ceiling:.2f} < {threshold})")
    if ratio is not None and ratio < 1.0:
        reasons.append(f"the architectures' means differ less than one architecture's seeds do "
                       f"(between/within {ratio:.2f} < 1)")
    return {
        "within_seed_std": plain(within),
        "between_model_std": plain(between),
        "separation": plain(ratio),
        "noise_ceiling": plain(mean_ceiling),
        "noise_ceiling_pairs": ceiling["pairs"] if ceiling else [],
        "noise_ceiling_spearman_brown": ceiling["spearman_brown"] if ceiling else None,
        "threshold": threshold,
        "underpowered": bool(reasons),
        "reason": "; ".join(reasons) if reasons else None,
    }


def selection_optimism(scores: Sequence[float | None], sd: float, draws: int = 200_000, seed: int = 0) -> float:
    """How much lower, on average, the best of ``scores`` reads than the true best when each is one noisy draw.

    Why: a rung trains a candidate at each rate of its grid and keeps the lowest loss, judged on the same
    validation tokens it then reports. With one training run per rate, that minimum is optimistic by
    ``E[min_i X_i] - min_i mu_i`` (``X_i ~ N(mu_i, sd^2)``, independent; ``mu_i`` estimated by the scores
    themselves, a plug-in). A candidate whose rates tie gets about ``0.56 sd`` of free improvement, one whose
    best rate is clear gets none, so the spread of this optimism across candidates is the rank bias the rate
    choice adds; it matters where it approaches the seed spread ``sd``. Monte Carlo with a fixed ``seed``
    (deterministic); scores that are None or not finite (diverged rates) are left out; a single score has none.
    """
    values = np.asarray([as_float(v) for v in scores if v is not None], dtype=float)
    values = values[np.isfinite(values)]
    if sd < 0 or not math.isfinite(sd):
        raise ValueError(f"sd must be finite and non-negative, got {sd}")
    if values.size < 2 or sd == 0:
        return 0.0
    noise = np.random.default_rng(seed).standard_normal((draws, values.size)) * sd
    return float(values.min() - (values + noise).min(axis=1).mean())
