"""Forecast a candidate's final score from its learning curve, so a halving rung ranks by where it is heading.

Why: successive halving ranks a middle rung by its loss at a fraction of the target's tokens. Patterns do not
learn at the same pace: attention-heavy ones learn late, so their curves cross those of patterns that learn fast
and plateau high, and the rung's snapshot ranks them backwards (Spearman -0.63 against the target on the ``am``
set). Each candidate's evaluation now carries its learning curve, ``[{"step", "tokens", "loss"}]``, measured at a
constant learning rate (the trunk of a warmup-stable-decay run) on a small fixed held-out slice, its ``score`` (the
full validation loss after the cooldown at its ``tokens``) and ``trunk_tokens`` (where the cooldown began).

The forecast fits ``L(t) = E + A * t**(-alpha)`` to the trunk's points and moves the measured score by the
improvement the fit predicts between the rung's cooldown start and the target's:

    forecast = score + (fit(target_trunk_tokens) - fit(trunk_tokens))

Using the fit only for a *difference* cancels what the curve cannot see: the offset between the small slice and
the full validation set, and the gain of the cooldown (about the same at both budgets). The forecast's uncertainty
comes from the noise of the curve's points (each a single-seed loss on a small slice), refitted many times: a
residual bootstrap of the curve's own residuals, or draws at a point noise pooled over the rung's curves
(:func:`curve_noise`), whichever is wider. A curve with no point to spare (three points, three parameters) fits
exactly and says nothing of its noise: without a pooled noise its forecast has no interval, and
:func:`could_be_best`, which keeps every candidate the curves cannot yet rule out, keeps it. :func:`hedge_by_share`
keeps the best of each attention share, so a late learner reaches the last rung even when its forecast is not the
best.

numpy only (no scipy): this runs inside a search's scheduler. Imports nothing from ``composer.experiments`` or the
CLI; ``composer.pattern`` only to read compact patterns.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from composer.pattern import attention_share

# Profile grid of exponents: 0.05 (almost flat: a curve that has all but stopped) to 1.5 (faster than any LM
# curve measured in this project), log-spaced so the small exponents of late-stage curves are resolved as finely,
# relatively, as the large ones. Finer grids around the best grid point refine it (``_fit_many``).
ALPHA_GRID = tuple(float(a) for a in np.geomspace(0.05, 1.5, 200))
MIN_POINTS = 3  # three parameters: fewer points (distinct token counts) cannot determine the curve
SNAPSHOT_TOO_FEW = "snapshot (too few points)"
SNAPSHOT_NO_TRUNK = "snapshot (no trunk)"
POWER_LAW = "power law + residual bootstrap"
POOLED = "power law + pooled point noise"
NO_INTERVAL = "power law, exact fit: no interval"


@dataclass(frozen=True)
class PowerLawFit:
    """``L(t) = E + A * t**(-alpha)`` fitted by least squares to ``n`` points; ``rss`` its residual sum of squares.

    ``E`` is the loss the curve tends to with unlimited tokens, ``A`` how far above it the curve starts, ``alpha``
    how fast it closes the gap. ``E >= 0`` and ``A >= 0`` (a loss curve neither goes below zero nor rises)."""

    E: float
    A: float
    alpha: float
    rss: float
    n: int

    def predict(self, t):
        """The fitted loss at ``t`` tokens (a float for a scalar, an array for an array)."""
        values = self.E + self.A * np.asarray(t, dtype=float) ** (-self.alpha)
        return float(values) if np.ndim(values) == 0 else values


def _solve(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Least squares ``y ~ E + A x`` with ``E >= 0`` and ``A >= 0``, in closed form, for many problems at once.

    ``x``: ``(B or 1, G, n)`` regressors (``t**-alpha`` for G exponents), ``y``: ``(B, 1, n)`` losses; returns
    ``(E, A, rss)``, each ``(B, G)``. The problem is a convex quadratic in (E, A), so when the unconstrained
    optimum breaks a constraint the constrained one lies on an edge: ``A = 0`` (a flat curve at the mean, when the
    data do not fall with t) or ``E = 0`` (a pure power law through the origin). Both edges are solved and the
    better one kept. Residuals are summed directly, not by the ``syy - sxy**2/sxx`` shortcut, whose cancellation
    would blur the profile near an exact fit."""
    xm, ym = x.mean(axis=-1, keepdims=True), y.mean(axis=-1, keepdims=True)
    sxx = np.sum((x - xm) ** 2, axis=-1)
    sxy = np.sum((x - xm) * (y - ym), axis=-1)
    a = np.where(sxx > 0, sxy / np.where(sxx > 0, sxx, 1.0), 0.0)
    e = ym[..., 0] - a * xm[..., 0]

    def rss(e_, a_):
        return np.sum((y - e_[..., None] - a_[..., None] * x) ** 2, axis=-1)

    shape = a.shape
    e_flat = np.broadcast_to(np.maximum(ym[..., 0], 0.0), shape)  # A = 0
    a_flat = np.zeros(shape)
    xx = np.sum(x * x, axis=-1)
    a_origin = np.broadcast_to(np.maximum(np.sum(x * y, axis=-1) / np.where(xx > 0, xx, 1.0), 0.0), shape)  # E = 0
    e_origin = np.zeros(shape)
    rss_free, rss_flat, rss_origin = rss(e, a), rss(e_flat, a_flat), rss(e_origin, a_origin)
    origin_better = rss_origin < rss_flat
    e_edge = np.where(origin_better, e_origin, e_flat)
    a_edge = np.where(origin_better, a_origin, a_flat)
    rss_edge = np.where(origin_better, rss_origin, rss_flat)
    infeasible = (a < 0) | (e < 0)
    return (np.where(infeasible, e_edge, e), np.where(infeasible, a_edge, a),
            np.where(infeasible, rss_edge, rss_free))


def _fit_many(u: np.ndarray, ys: np.ndarray, grid: np.ndarray, rounds: int = 3, points: int = 41):
    """Profile fits of ``E + A u**-alpha`` to each row of ``ys`` (``(B, n)``) at token ratios ``u`` (``(n,)``).

    A grid over ``alpha``, then ``rounds`` finer grids of ``points`` exponents between the current best's
    neighbours (each round narrows the bracket 20-fold: 3 rounds resolve ``alpha`` to ~1e-5 of itself). All
    ``B`` problems at once, so a 200-draw bootstrap costs a few array operations. Returns ``(E, A, alpha, rss)``,
    each ``(B,)``, with ``A`` in units of ``u``."""
    ys = ys[:, None, :]
    b = ys.shape[0]
    rows = np.arange(b)
    e, a, rss = _solve(u[None, None, :] ** (-grid[None, :, None]), ys)
    i = np.argmin(rss, axis=1)
    best_alpha, best = grid[i], (e[rows, i], a[rows, i], rss[rows, i])
    local = np.broadcast_to(grid, (b, grid.size))
    for _ in range(rounds if grid.size > 1 else 0):
        lo = local[rows, np.maximum(i - 1, 0)]
        hi = local[rows, np.minimum(i + 1, local.shape[1] - 1)]
        local = lo[:, None] + (hi - lo)[:, None] * np.linspace(0.0, 1.0, points)[None, :]
        e, a, rss = _solve(u[None, None, :] ** (-local[:, :, None]), ys)
        i = np.argmin(rss, axis=1)
        better = rss[rows, i] < best[2]
        best_alpha = np.where(better, local[rows, i], best_alpha)
        best = tuple(np.where(better, new[rows, i], old) for new, old in zip((e, a, rss), best))
    return best[0], best[1], best_alpha, best[2]


def _check_points(t: np.ndarray, y: np.ndarray) -> None:
    if t.shape != y.shape:
        raise ValueError(f"{t.size} token counts but {y.size} losses")
    if not (np.all(np.isfinite(t)) and np.all(np.isfinite(y))):
        raise ValueError("tokens and losses must be finite")
    if np.any(t <= 0):
        raise ValueError("tokens must be positive (t**-alpha is undefined at 0)")
    if np.unique(t).size < MIN_POINTS:
        raise ValueError(f"a power law E + A*t^-alpha needs at least {MIN_POINTS} points at distinct token counts, "
                         f"got {t.size} point(s) at {np.unique(t).size} distinct token count(s)")


def _grid(alphas: Sequence[float]) -> np.ndarray:
    grid = np.sort(np.asarray(alphas, dtype=float).ravel())
    if grid.size == 0 or not np.all(np.isfinite(grid)) or np.any(grid <= 0):
        raise ValueError("alphas must be a non-empty sequence of positive exponents")
    return grid


def fit_power_law(tokens: Sequence[float], losses: Sequence[float],
                  alphas: Sequence[float] = ALPHA_GRID) -> PowerLawFit:
    """Fit ``L(t) = E + A * t**(-alpha)`` to the points ``(tokens[i], losses[i])`` by least squares.

    Why profiled: for a fixed ``alpha`` the model is linear in ``(E, A)`` and solved exactly (with ``E, A >= 0``,
    see :func:`_solve`), which leaves a one-dimensional search over ``alpha``: the grid ``alphas``, then finer
    grids around the best (:func:`_fit_many`). Unlike a generic nonlinear solver this cannot diverge, needs no
    starting point and gives the same answer every time, on the 6 to 10 noisy points a rung's curve has; ``alpha``
    stays within the grid's range. Tokens are divided by their geometric mean while fitting, so ``t**(-alpha)``
    stays near 1 whatever the scale (``A`` is reported in the original units).

    Raises ``ValueError`` for fewer than three distinct token counts, non-positive tokens or non-finite values.
    """
    t = np.asarray(tokens, dtype=float).ravel()
    y = np.asarray(losses, dtype=float).ravel()
    _check_points(t, y)
    scale = float(np.exp(np.mean(np.log(t))))
    e, a, alpha, rss = _fit_many(t / scale, y[None, :], _grid(alphas))
    alpha0 = float(alpha[0])
    return PowerLawFit(E=float(e[0]), A=float(a[0]) * scale ** alpha0, alpha=alpha0, rss=float(rss[0]),
                       n=int(t.size))


@dataclass(frozen=True)
class Forecast:
    """A predicted final score: ``mean`` with its bootstrap ``sd`` and ``[low, high]`` interval.

    ``method`` says how it was made: :data:`POWER_LAW` or :data:`POOLED` (which noise the interval comes from),
    :data:`NO_INTERVAL` (a fitted mean, ``sd = inf``: an exact fit and no noise measured elsewhere), or a snapshot
    fallback that is just the measured score with ``sd = inf``; ``fit`` the curve's fit (None for a snapshot);
    ``points_used`` the curve points fitted."""

    mean: float
    sd: float
    low: float
    high: float
    method: str
    fit: PowerLawFit | None
    points_used: int

    @property
    def known(self) -> bool:
        """Whether the forecast has a finite uncertainty (a snapshot fallback and an exact fit have none)."""
        return math.isfinite(self.sd)

    @property
    def unbounded(self) -> bool:
        """A fitted forecast without an interval: its mean extrapolates the curve, but nothing says how far off."""
        return self.fit is not None and not self.known

    def as_dict(self) -> dict[str, Any]:
        """``{"mean", "sd", "low", "high", "method"}`` with plain floats, non-finite ones as None (JSON-safe, as
        ``composer.statistics`` reports), e.g. for a leaderboard row."""
        def plain(value: float) -> float | None:
            return float(value) if math.isfinite(value) else None

        return {"mean": plain(self.mean), "sd": plain(self.sd), "low": plain(self.low), "high": plain(self.high),
                "method": self.method}


def _snapshot(score: float, method: str, points_used: int) -> Forecast:
    return Forecast(mean=float(score), sd=math.inf, low=-math.inf, high=math.inf, method=method, fit=None,
                    points_used=points_used)


def _trunk_points(curve: Iterable[Mapping[str, Any]], trunk_tokens: float,
                  fit_from: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """The curve's points at a constant rate: ``0 < tokens <= trunk_tokens`` with a finite loss, in token order.

    Points past ``trunk_tokens`` were measured during the cooldown, where the loss drops for a reason the power
    law does not model (the falling rate): fitting them would bend the curve down and overstate the gain."""
    kept = []
    for point in curve or ():
        tokens, loss = point.get("tokens"), point.get("loss")
        if tokens is None or loss is None:
            continue
        tokens, loss = float(tokens), float(loss)
        if max(0.0, fit_from * trunk_tokens) < tokens <= trunk_tokens and math.isfinite(loss):
            kept.append((tokens, loss))
    kept.sort()
    return np.array([p[0] for p in kept], dtype=float), np.array([p[1] for p in kept], dtype=float)


def curve_noise(curves: Iterable[Iterable[Mapping[str, Any]] | None], trunk_tokens: Iterable[float | None],
                fit_from: float = 0.0) -> tuple[float | None, int]:
    """The sd of one curve point about its curve's power law, pooled over ``curves`` (with their ``trunk_tokens``),
    and its degrees of freedom: ``sqrt(sum rss / sum (n - 3))`` over the curves with more than three trunk points
    (those past ``fit_from`` of the trunk, as :func:`forecast` fits them). ``(None, 0)`` when no curve has a
    point to spare.

    Why pool: a curve of ``n`` points leaves ``n - 3`` degrees of freedom to its own residuals: none at three
    points (the fit is exact, so its residual bootstrap said sd ~1e-8 and :func:`could_be_best` took the forecast
    as certain), one at four (the ``cpu`` ladder's rung 1 past a quarter of its trunk), whose spread is itself a
    guess. The rung's curves share their budget, their steps and their held-out slice, so their points scatter
    about a power law alike (the noise of a single-seed loss on ``curve_tokens`` tokens, and the curve's bend
    away from one power law); pooled, a dozen curves of four points give a dozen degrees of freedom. Curves of
    three points add nothing: their fit is exact, or a constraint (``E, A >= 0``, ``alpha`` in the grid) binds,
    and then their residual is the model's limit, not a noise measured with any degree of freedom."""
    rss, dof = 0.0, 0
    for curve, trunk in zip(curves, trunk_tokens, strict=True):
        if trunk is None:
            continue
        t, y = _trunk_points(curve, float(trunk), fit_from)
        if np.unique(t).size < MIN_POINTS or t.size <= MIN_POINTS:
            continue
        rss += fit_power_law(t, y).rss
        dof += int(t.size) - MIN_POINTS
    return (math.sqrt(rss / dof), dof) if dof else (None, 0)


def forecast(
    curve: Iterable[Mapping[str, Any]] | None,
    score: float,
    trunk_tokens: float | None,
    target_tokens: float,
    *,
    target_trunk_tokens: float | None = None,
    n_boot: int = 200,
    seed: int = 0,
    noise_floor: float = 0.0,
    confidence: float = 0.95,
    fit_from: float = 0.0,
    point_sd: float | None = None,
) -> Forecast:
    """The score this candidate would reach at ``target_tokens``, from its curve and its score at the rung.

    ``mean = score + fit(target_trunk_tokens) - fit(trunk_tokens)``: the rung's measured score (full validation
    set, after its cooldown) plus the improvement its trunk's power law predicts between the rung's cooldown start
    and the target's (``target_trunk_tokens``, default ``0.8 * target_tokens``, a warmup-stable-decay run's usual
    20% cooldown). Only the fit's difference is used, which cancels the slice-vs-full-set offset and the cooldown's
    gain. Only trunk points (``fit_from * trunk_tokens < tokens <= trunk_tokens``) are fitted: ``fit_from`` drops
    a curve's early, fast phase (a byte-level model learns its unigram statistics first), which a single power law
    over the whole curve bends towards and so underestimates how far a curve still falls.

    Uncertainty: ``n_boot`` times, the fitted curve plus noise is refitted and forecast again; ``sd`` is the
    draws' standard deviation, the interval their percentiles. The noise is the curve's own residuals resampled
    with replacement (inflated by ``sqrt(n / (n - 3))``, since three fitted parameters make raw residuals too
    small; :data:`POWER_LAW`) when it has more than 3 points, and normal noise of sd ``point_sd`` on each point
    (:data:`POOLED`) when a point's noise was measured elsewhere (:func:`curve_noise` over the rung's curves);
    with both, the wider draws are kept (a curve that bends more than the rung's others keeps its own spread, one
    whose few residuals happen to be small gets the rung's). With exactly 3 points and no ``point_sd`` the fit is
    exact and its zero residuals measure nothing: the forecast keeps its fitted mean but has no interval
    (:data:`NO_INTERVAL`, ``sd = inf``), which :func:`could_be_best` never rules out, rather than an sd of ~1e-8
    that it would read as certain. Seeded (``seed``), so a search resumed or repeated ranks the same way.
    ``noise_floor`` floors ``sd`` (and widens the interval to at least ``mean +- z * noise_floor``, ``z`` the
    normal quantile of ``confidence``) for what the curve cannot see: the seed noise of the score itself. It
    floors an interval; it does not make one for an exact fit, whose extrapolation it says nothing about.

    Never raises for a short curve: with fewer than 3 usable points (or no ``trunk_tokens``, a run without a
    constant-rate trunk) the forecast is the score itself with ``sd = inf`` and a ``"snapshot (...)"`` method, so
    a candidate without a curve is still ranked, as the snapshot ranked it before.
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if n_boot < 2:
        raise ValueError(f"n_boot must be at least 2, got {n_boot}")
    score = float(score)
    if trunk_tokens is None:  # no constant-rate trunk to fit (a cosine run); no curve at all is too few points
        return _snapshot(score, SNAPSHOT_NO_TRUNK if curve else SNAPSHOT_TOO_FEW, 0)
    trunk_tokens = float(trunk_tokens)
    target_trunk = 0.8 * float(target_tokens) if target_trunk_tokens is None else float(target_trunk_tokens)
    t, y = _trunk_points(curve, trunk_tokens, fit_from)
    if np.unique(t).size < MIN_POINTS:
        return _snapshot(score, SNAPSHOT_TOO_FEW, int(t.size))

    fit = fit_power_law(t, y)
    mean = score + fit.predict(target_trunk) - fit.predict(trunk_tokens)
    fitted = fit.predict(t)
    n = t.size
    scale = float(np.exp(np.mean(np.log(t))))
    rng = np.random.default_rng(seed)

    def forecasts_of(noisy: np.ndarray) -> np.ndarray:
        _, a, alpha, _ = _fit_many(t / scale, noisy, _grid(ALPHA_GRID))  # all draws refitted at once
        return score + a * ((target_trunk / scale) ** (-alpha) - (trunk_tokens / scale) ** (-alpha))

    tried = []  # (sd, draws, method)
    if n > MIN_POINTS:
        residuals = (y - fitted) * math.sqrt(n / (n - MIN_POINTS))
        draws = forecasts_of(fitted[None, :] + residuals[rng.integers(0, n, size=(n_boot, n))])
        tried.append((float(np.std(draws, ddof=1)), draws, POWER_LAW))
    if point_sd is not None and math.isfinite(point_sd) and point_sd > 0:
        draws = forecasts_of(fitted[None, :] + rng.normal(0.0, point_sd, size=(n_boot, n)))
        tried.append((float(np.std(draws, ddof=1)), draws, POOLED))
    if not tried:
        return Forecast(mean=float(mean), sd=math.inf, low=-math.inf, high=math.inf, method=NO_INTERVAL, fit=fit,
                        points_used=int(n))
    spread, draws, method = max(tried, key=lambda item: item[0])
    sd = max(spread, float(noise_floor))
    low, high = (float(v) for v in np.quantile(draws, [(1 - confidence) / 2, (1 + confidence) / 2]))
    z = _normal_quantile((1 + confidence) / 2)
    low, high = min(low, mean - z * noise_floor), max(high, mean + z * noise_floor)
    return Forecast(mean=float(mean), sd=sd, low=low, high=high, method=method, fit=fit, points_used=int(n))


def _normal_quantile(p: float) -> float:
    """The standard normal's ``p`` quantile by bisection on ``erf`` (no scipy; exact to 1e-12)."""
    lo, hi = -10.0, 10.0
    for _ in range(80):
        mid = (lo + hi) / 2.0
        if 0.5 * (1.0 + math.erf(mid / math.sqrt(2.0))) < p:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2.0


def could_be_best(forecasts: Mapping[str, Forecast], z: float = 1.0) -> list[str]:
    """The keys whose forecast could still be the best (lowest), ordered by forecast mean.

    With ``b`` the best forecast, ``k`` is kept when ``mean_k - z * sqrt(sd_k**2 + sd_b**2) <= mean_b``: the two
    cannot be told apart at ``z`` standard deviations of their difference. A larger ``z`` keeps more.

    A fitted forecast without an interval (:data:`NO_INTERVAL`: an exact fit, no noise measured for it) is always
    kept: its mean is a forecast, but nothing bounds how far off it is, so the curves cannot rule it out (and
    treating it as certain would drop a candidate a hair behind the best on an sd of ~1e-8). It never sets ``b``
    while a forecast with an interval exists, since its error is not known to be small either.

    A snapshot's unknown uncertainty (``sd = inf``, no fit) is *not* treated as infinite uncertainty: that would
    let one candidate without a curve be kept whatever its score, or, as ``b``, keep every other. Instead ``b`` is
    the lowest mean among forecasts with a finite ``sd`` (else among the fitted ones, else any), and a snapshot's
    ``sd`` counts as 0: a candidate without a forecast is kept only if its snapshot is within ``z * sd_b`` of the
    best forecast, judged on its measured score as the snapshot ranking judged it before. Since a snapshot at the
    rung is usually above what the candidate will reach at the target, this errs towards dropping it; rank
    snapshots and forecasts together only when few candidates lack a curve. Non-finite means are never kept.
    """
    if z < 0:
        raise ValueError(f"z must be non-negative, got {z}")
    finite = {key: f for key, f in forecasts.items() if math.isfinite(f.mean)}
    if not finite:
        return []
    known = [f for f in finite.values() if f.known]
    fitted = [f for f in finite.values() if f.fit is not None]
    best = min(known or fitted or finite.values(), key=lambda f: f.mean)
    sd_best = best.sd if math.isfinite(best.sd) else 0.0

    def kept(f: Forecast) -> bool:
        if f.unbounded:
            return True
        sd = f.sd if math.isfinite(f.sd) else 0.0
        return f.mean - z * math.sqrt(sd * sd + sd_best * sd_best) <= best.mean

    return sorted((key for key, f in finite.items() if kept(f)), key=lambda key: finite[key].mean)


def _row_value(row: Mapping[str, Any]) -> float:
    """A row's value to minimise: its forecast's mean when it has one (a :class:`Forecast` or its dict), else its
    score; NaN when it has neither (a failed candidate)."""
    fc = row.get("forecast")
    value = fc.mean if isinstance(fc, Forecast) else (fc.get("mean") if isinstance(fc, Mapping) else None)
    if value is None:
        value = row.get("score")
    return float(value) if value is not None else math.nan


def hedge_by_share(rows: Iterable[Mapping[str, Any]],
                   share: Callable[[str], float] = attention_share) -> list[Mapping[str, Any]]:
    """The best row (lowest forecast mean, else score) of each attention share, best first.

    Why: a forecast extrapolates a short curve, and a late learner's curve is the one it extrapolates worst. The
    best of each share is promoted as a hedge, so the last rung (which trains to the target and needs no forecast)
    sees at least one candidate of every share even when the forecasts favour one kind. Rows without a finite
    value are skipped; shares are compared rounded to 9 decimals (4/6 and 2/3 are one share). Returns the rows
    themselves, not copies."""
    best: dict[float, tuple[float, Mapping[str, Any]]] = {}
    for row in rows:
        value = _row_value(row)
        if not math.isfinite(value):
            continue
        key = round(float(share(row["pattern"])), 9)
        if key not in best or value < best[key][0]:
            best[key] = (value, row)
    return [row for _, row in sorted(best.values(), key=lambda item: item[0])]


def rank_by_forecast(
    rows: Iterable[Mapping[str, Any]],
    target_tokens: float,
    *,
    target_trunk_tokens: float | None = None,
    n_boot: int = 200,
    seed: int = 0,
    noise_floor: float = 0.0,
) -> list[dict[str, Any]]:
    """Leaderboard-like rows (``"pattern"``, ``"score"``, ``"curve"``, ``"trunk_tokens"``) ordered by forecast.

    Each returned row is a copy with ``"forecast"``: :meth:`Forecast.as_dict` of :func:`forecast` at
    ``target_tokens``, its points' noise pooled over the rows' curves (:func:`curve_noise`; a row without a usable
    curve gets the snapshot fallback, ranked by its score). Rows without a finite score (failed candidates) come
    last with ``"forecast": None``, in their order. Ties keep the rows' order."""
    rows = list(rows)
    point_sd, _ = curve_noise([_curve_of(row) for row in rows], [_trunk_of(row) for row in rows])
    ranked, failed = [], []
    for row in rows:
        out = dict(row)
        score = row.get("score")
        if score is None or not math.isfinite(float(score)):
            out["forecast"] = None
            failed.append(out)
            continue
        fc = forecast(row.get("curve"), float(score), row.get("trunk_tokens"), target_tokens,
                      target_trunk_tokens=target_trunk_tokens, n_boot=n_boot, seed=seed, noise_floor=noise_floor,
                      point_sd=point_sd)
        out["forecast"] = fc.as_dict()
        ranked.append((fc.mean, out))
    ranked.sort(key=lambda item: item[0])
    return [out for _, out in ranked] + failed


def _curve_of(row: Mapping[str, Any]):
    """A row's curve: in ``details`` (``search.leaderboard``) or at its top level."""
    return (row.get("details") or {}).get("curve") or row.get("curve")


def _trunk_of(row: Mapping[str, Any]):
    return (row.get("details") or {}).get("trunk_tokens") or row.get("trunk_tokens")


def forecast_row(row: Mapping[str, Any], target_tokens: float, target_trunk_tokens: float | None = None,
                 fit_from: float = 0.0, point_sd: float | None = None) -> Forecast:
    """The forecast of a leaderboard row (``search.leaderboard``: its curve and trunk in ``details``)."""
    return forecast(_curve_of(row), float(row["score"]), _trunk_of(row), target_tokens,
                    target_trunk_tokens=target_trunk_tokens, fit_from=fit_from, point_sd=point_sd)


def forecast_rung(rows: Sequence[Mapping[str, Any]], target_tokens: float, target_trunk_tokens: float | None = None,
                  fit_from: float = 0.0) -> dict[str, Forecast]:
    """Each row's forecast by its ``"pattern"`` (:func:`forecast_row`), with its points' noise pooled over the
    rows' curves (:func:`curve_noise`): a halving rung's rows share a budget, steps and slice, so a curve of 3 or
    4 points gets the noise the rung's dozen curves measure together rather than the none or one degree of
    freedom it has alone."""
    point_sd, _ = curve_noise([_curve_of(row) for row in rows], [_trunk_of(row) for row in rows], fit_from)
    return {row["pattern"]: forecast_row(row, target_tokens, target_trunk_tokens, fit_from, point_sd)
            for row in rows}
