"""search.forecast: the power-law fit, the forecast that undoes a crossing of learning curves, its bootstrap, and
the helpers a halving rung uses to keep what the forecast cannot rule out."""

from __future__ import annotations

import math

import numpy as np
import pytest

from composer.pattern import attention_share
from search.forecast import (
    NO_INTERVAL,
    POOLED,
    POWER_LAW,
    SNAPSHOT_NO_TRUNK,
    SNAPSHOT_TOO_FEW,
    Forecast,
    PowerLawFit,
    could_be_best,
    curve_noise,
    fit_power_law,
    forecast,
    hedge_by_share,
    rank_by_forecast,
)

TOKENS = np.geomspace(4e3, 1e5, 8)
TRUNK, TARGET, TARGET_TRUNK = 1e5, 5e5, 4e5
COOLDOWN_GAIN = 0.05  # the rung's and the target's cooldown lower the loss by about the same
SLICE_OFFSET = 0.03  # the curve's small slice reads a little above the full validation set


def law(E, A, alpha):
    return lambda t: E + A * np.asarray(t, dtype=float) ** (-alpha)


FAST = law(3.0, 20.0, 0.5)  # learns early and plateaus high
SLOW = law(2.0, 6.47, 0.15)  # learns late (attention-heavy) and ends lower


def curve(loss, tokens=TOKENS, noise=0.0, seed=0):
    rng = np.random.default_rng(seed)
    values = loss(tokens) + SLICE_OFFSET + rng.normal(0.0, noise, len(tokens))
    return [{"step": i + 1, "tokens": int(t), "loss": float(v)} for i, (t, v) in enumerate(zip(tokens, values))]


def rung_score(loss):
    """The rung's measured score: the trunk's loss at its end, less the cooldown's gain, on the full set."""
    return float(loss(TRUNK)) - COOLDOWN_GAIN


def target_score(loss):
    return float(loss(TARGET_TRUNK)) - COOLDOWN_GAIN


def test_fit_recovers_a_known_power_law_from_noiseless_points():
    truth = law(1.5, 30.0, 0.4)
    fit = fit_power_law(TOKENS, truth(TOKENS))
    assert isinstance(fit, PowerLawFit) and fit.n == 8
    assert fit.E == pytest.approx(1.5, rel=1e-4)
    assert fit.A == pytest.approx(30.0, rel=1e-3)
    assert fit.alpha == pytest.approx(0.4, rel=1e-4)
    assert fit.rss < 1e-10
    assert fit.predict(1e6) == pytest.approx(float(truth(1e6)), rel=1e-6)
    assert fit.predict(np.array([1e4, 1e6])).shape == (2,)


def test_fit_is_roughly_right_from_noisy_points():
    truth = law(1.5, 30.0, 0.4)
    rng = np.random.default_rng(3)
    fit = fit_power_law(TOKENS, truth(TOKENS) + rng.normal(0.0, 0.005, TOKENS.size))
    assert fit.alpha == pytest.approx(0.4, abs=0.1)
    assert fit.E == pytest.approx(1.5, abs=0.15)
    # what the forecast uses: the improvement from the trunk's end to the target's
    gain = fit.predict(TARGET_TRUNK) - fit.predict(TRUNK)
    assert gain == pytest.approx(float(truth(TARGET_TRUNK) - truth(TRUNK)), abs=0.02)


def test_fit_keeps_its_constraints():
    rising = fit_power_law([1e3, 2e3, 4e3, 8e3], [2.0, 2.1, 2.2, 2.3])  # a loss that rises: no decay to fit
    assert rising.A == 0.0 and rising.E == pytest.approx(2.15)
    steep = fit_power_law(TOKENS, law(0.0, 50.0, 0.3)(TOKENS) - 0.4)  # best unconstrained E would be negative
    assert steep.E >= 0.0 and steep.A > 0.0


@pytest.mark.parametrize("tokens, losses", [([1e3, 2e3], [3.0, 2.9]), ([1e3, 1e3, 2e3], [3.0, 3.1, 2.9])])
def test_fit_needs_three_distinct_points(tokens, losses):
    with pytest.raises(ValueError, match="at least 3 points"):
        fit_power_law(tokens, losses)


def test_the_forecast_undoes_a_crossing_the_snapshot_misranks():
    """The reason for the module: the fast learner leads at the rung, the slow one at the target."""
    snapshot = {"fast": rung_score(FAST), "slow": rung_score(SLOW)}
    target = {"fast": target_score(FAST), "slow": target_score(SLOW)}
    assert snapshot["fast"] < snapshot["slow"] and target["slow"] < target["fast"]  # the curves do cross
    forecasts = {name: forecast(curve(loss), snapshot[name], TRUNK, TARGET, target_trunk_tokens=TARGET_TRUNK)
                 for name, loss in (("fast", FAST), ("slow", SLOW))}
    assert forecasts["slow"].mean < forecasts["fast"].mean
    for name in forecasts:  # noiseless: the offset and the cooldown's gain cancel, the forecast is the target
        assert forecasts[name].mean == pytest.approx(target[name], abs=1e-4)
        assert forecasts[name].points_used == 8 and forecasts[name].fit is not None


def test_the_target_trunk_defaults_to_four_fifths_of_the_target():
    fc = forecast(curve(SLOW), rung_score(SLOW), TRUNK, TARGET)
    assert fc.mean == pytest.approx(forecast(curve(SLOW), rung_score(SLOW), TRUNK, TARGET,
                                             target_trunk_tokens=0.8 * TARGET).mean)
    assert fc.mean != pytest.approx(forecast(curve(SLOW), rung_score(SLOW), TRUNK, TARGET,
                                             target_trunk_tokens=TARGET).mean)


def test_the_bootstrap_is_reproducible_and_grows_with_noise():
    quiet, loud = curve(SLOW, noise=0.002, seed=1), curve(SLOW, noise=0.02, seed=1)
    score = rung_score(SLOW)
    first = forecast(quiet, score, TRUNK, TARGET, seed=7)
    assert forecast(quiet, score, TRUNK, TARGET, seed=7) == first  # same seed, same draws, same everything
    assert forecast(quiet, score, TRUNK, TARGET, seed=8).sd != first.sd  # the seed is the draws' seed
    noisy = forecast(loud, score, TRUNK, TARGET, seed=7)
    assert 0.0 < first.sd < noisy.sd
    assert noisy.low < noisy.mean < noisy.high and noisy.high - noisy.low > first.high - first.low


def test_the_noise_floor_floors_the_sd_and_widens_the_interval():
    exact = forecast(curve(SLOW), rung_score(SLOW), TRUNK, TARGET)
    floored = forecast(curve(SLOW), rung_score(SLOW), TRUNK, TARGET, noise_floor=0.01)
    assert exact.sd < 0.01 and floored.sd == 0.01 and floored.mean == exact.mean
    assert floored.high - floored.low >= 2 * 1.95 * 0.01


def test_three_points_alone_give_a_forecast_without_an_interval():
    """Issue 47: three points fit three parameters exactly, so their residuals are zero and a residual bootstrap
    said sd ~1e-8, which could_be_best read as certain. The curve alone cannot say how noisy its points are."""
    points = curve(SLOW, tokens=TOKENS[-3:], noise=0.01, seed=4)
    fc = forecast(points, rung_score(SLOW), TRUNK, TARGET)
    assert fc.method == NO_INTERVAL and not fc.known and fc.fit is not None and fc.points_used == 3
    assert math.isinf(fc.sd) and fc.low == -math.inf and fc.high == math.inf and math.isfinite(fc.mean)
    assert fc.as_dict()["sd"] is None and fc.as_dict()["mean"] == pytest.approx(fc.mean)
    # a seed floor does not make an exact fit's extrapolation known
    assert not forecast(points, rung_score(SLOW), TRUNK, TARGET, noise_floor=0.01).known


def test_a_point_noise_measured_elsewhere_gives_three_points_an_interval_that_grows_with_it():
    points = curve(SLOW, tokens=TOKENS[-3:], noise=0.01, seed=4)
    quiet = forecast(points, rung_score(SLOW), TRUNK, TARGET, point_sd=0.005)
    loud = forecast(points, rung_score(SLOW), TRUNK, TARGET, point_sd=0.02)
    assert quiet.method == loud.method == POOLED and quiet.mean == loud.mean
    assert 0.005 < quiet.sd < loud.sd and quiet.low < quiet.mean < quiet.high
    # extrapolating 4x past three points spread over 2.5x of tokens: the forecast is noisier than one point
    assert loud.sd > 0.02


def test_a_curve_noisier_than_the_pooled_noise_keeps_its_own_larger_spread():
    loud_points = curve(SLOW, noise=0.03, seed=2)
    own = forecast(loud_points, rung_score(SLOW), TRUNK, TARGET)
    pooled = forecast(loud_points, rung_score(SLOW), TRUNK, TARGET, point_sd=0.001)
    assert own.method == POWER_LAW and pooled.sd == own.sd and pooled.method == POWER_LAW
    assert forecast(loud_points, rung_score(SLOW), TRUNK, TARGET, point_sd=0.2).method == POOLED


def test_curve_noise_pools_the_residuals_of_the_curves_with_points_to_spare():
    truths = [law(2.0 + 0.1 * i, 6.0 + i, 0.15 + 0.05 * i) for i in range(10)]
    curves = [curve(truth, noise=0.01, seed=i) for i, truth in enumerate(truths)]
    sd, dof = curve_noise(curves, [TRUNK] * len(curves))
    assert dof == 10 * (8 - 3) and 0.006 < sd < 0.014  # the points' noise, recovered from 50 degrees of freedom
    exact = [curve(truth, tokens=TOKENS[-3:], noise=0.01, seed=i) for i, truth in enumerate(truths)]
    assert curve_noise(exact, [TRUNK] * len(exact)) == (None, 0)  # three points each: nothing to pool
    assert curve_noise(exact + curves[:1], [TRUNK] * 11)[1] == 5
    assert curve_noise([None, []], [TRUNK, None]) == (None, 0)
    # fit_from drops the early points from the pool as from the fit
    assert curve_noise(curves, [TRUNK] * len(curves), fit_from=0.25)[1] == 10 * (4 - 3)


def test_too_few_points_fall_back_to_the_snapshot():
    fc = forecast(curve(SLOW)[:2], 3.1, TRUNK, TARGET)
    assert fc.mean == 3.1 and math.isinf(fc.sd) and fc.method == SNAPSHOT_TOO_FEW
    assert fc.fit is None and fc.points_used == 2 and not fc.known
    assert fc.as_dict() == {"mean": 3.1, "sd": None, "low": None, "high": None, "method": SNAPSHOT_TOO_FEW}
    assert forecast([], 3.1, TRUNK, TARGET).method == SNAPSHOT_TOO_FEW
    assert forecast(None, 3.1, TRUNK, TARGET).method == SNAPSHOT_TOO_FEW
    assert forecast(curve(SLOW), 3.1, None, TARGET).method == SNAPSHOT_NO_TRUNK
    # points past the trunk do not count towards the three
    assert forecast(curve(SLOW), 3.1, TOKENS[1] + 1, TARGET).method == SNAPSHOT_TOO_FEW


def test_cooldown_points_are_not_fitted():
    trunk = curve(SLOW)
    cooldown = [{"step": 100 + i, "tokens": int(t), "loss": float(SLOW(t)) + SLICE_OFFSET - 0.05 * (i + 1)}
                for i, t in enumerate((1.05e5, 1.1e5, 1.2e5))]  # the loss drops fast as the rate falls
    score = rung_score(SLOW)
    without = forecast(trunk, score, TRUNK, TARGET)
    with_cooldown = forecast(trunk + cooldown, score, TRUNK, TARGET)
    assert with_cooldown == without
    # and they would have mattered: fitted, they bend the curve down and inflate the gain
    everything = trunk + cooldown
    bent = fit_power_law([p["tokens"] for p in everything], [p["loss"] for p in everything])
    assert abs((bent.predict(TARGET_TRUNK) - bent.predict(TRUNK)) - (without.mean - score)) > 0.01


def test_points_without_a_loss_are_skipped():
    points = curve(SLOW)
    with_gap = points[:3] + [{"step": 99, "tokens": 9000, "loss": None}] + points[3:]
    assert forecast(with_gap, 3.0, TRUNK, TARGET) == forecast(points, 3.0, TRUNK, TARGET)


def _fc(mean, sd):
    return Forecast(mean=mean, sd=sd, low=mean - 2 * sd, high=mean + 2 * sd, method="test", fit=None, points_used=8)


def test_could_be_best_keeps_a_close_second_and_drops_a_clear_loser():
    forecasts = {"worse": _fc(3.30, 0.01), "best": _fc(3.00, 0.01), "close": _fc(3.01, 0.01)}
    assert could_be_best(forecasts) == ["best", "close"]  # ordered by mean
    assert could_be_best(forecasts, z=0.0) == ["best"]
    assert could_be_best(forecasts, z=25.0) == ["best", "close", "worse"]  # 0.30 / sqrt(2 * 0.01^2) = 21 sds
    assert could_be_best({}) == []


def test_could_be_best_judges_an_unknown_forecast_on_its_snapshot():
    forecasts = {"best": _fc(3.00, 0.02), "near": _fc(3.01, math.inf), "far": _fc(3.10, math.inf)}
    # one candidate without a curve neither keeps everything nor is kept whatever its score
    assert could_be_best(forecasts) == ["best", "near"]
    assert could_be_best({"a": _fc(3.0, math.inf), "b": _fc(3.1, math.inf)}) == ["a"]
    assert could_be_best({"a": _fc(2.9, math.inf), "b": _fc(3.0, 0.01)}) == ["a", "b"]
    assert could_be_best({"nan": _fc(math.nan, 0.01), "b": _fc(3.0, 0.01)}) == ["b"]


def test_could_be_best_keeps_a_fitted_forecast_it_has_no_interval_for():
    """A forecast from an exact fit has a mean but no interval: nothing bounds how far off it is, so it stays a
    contender however far its mean, and never sets the bar the others are judged against."""
    fit = fit_power_law(TOKENS[-3:], SLOW(TOKENS[-3:]))
    unbounded = Forecast(mean=3.5, sd=math.inf, low=-math.inf, high=math.inf, method=NO_INTERVAL, fit=fit,
                         points_used=3)
    assert could_be_best({"best": _fc(3.0, 0.01), "unbounded": unbounded, "far": _fc(3.3, 0.01)}) == \
        ["best", "unbounded"]
    lower = Forecast(**{**unbounded.__dict__, "mean": 2.5})
    assert could_be_best({"best": _fc(3.0, 0.01), "lower": lower, "far": _fc(3.3, 0.01)}) == ["lower", "best"]
    assert could_be_best({"a": unbounded, "b": lower}) == ["b", "a"]


def test_hedge_by_share_keeps_the_best_of_each_share():
    rows = [
        {"pattern": "MMAMMM", "score": 3.00},
        {"pattern": "MAMMMM", "score": 2.95},
        {"pattern": "AMAMAM", "score": 3.20, "forecast": {"mean": 3.10}},
        {"pattern": "MAMAMA", "score": 3.10, "forecast": {"mean": 3.15}},  # better score, worse forecast
        {"pattern": "MMMMMM", "score": 3.40, "forecast": _fc(3.30, 0.01)},
        {"pattern": "AAMMMM", "score": None},  # failed: no value, no share of its own
    ]
    hedged = hedge_by_share(rows)
    assert [row["pattern"] for row in hedged] == ["MAMMMM", "AMAMAM", "MMMMMM"]  # one per share, best first
    assert hedged[0] is rows[1]
    assert len({attention_share(row["pattern"]) for row in hedged}) == len(hedged)
    assert [r["pattern"] for r in hedge_by_share(rows, share=lambda p: 0.0)] == ["MAMMMM"]


def test_rank_by_forecast_orders_rows_by_where_they_are_heading():
    rows = [
        {"pattern": "MMMMAM", "score": rung_score(FAST), "curve": curve(FAST), "trunk_tokens": TRUNK},
        {"pattern": "AMAMAM", "score": rung_score(SLOW), "curve": curve(SLOW), "trunk_tokens": TRUNK},
        {"pattern": "MMMMMM", "score": None, "curve": None, "trunk_tokens": None},
        {"pattern": "MMMAMM", "score": 3.5},  # no curve: ranked by its snapshot
    ]
    ranked = rank_by_forecast(rows, TARGET, target_trunk_tokens=TARGET_TRUNK)
    assert [row["pattern"] for row in ranked] == ["AMAMAM", "MMMMAM", "MMMAMM", "MMMMMM"]
    assert set(ranked[0]["forecast"]) == {"mean", "sd", "low", "high", "method"}
    assert ranked[0]["forecast"]["mean"] == pytest.approx(target_score(SLOW), abs=1e-4)
    assert ranked[2]["forecast"]["method"] == SNAPSHOT_TOO_FEW and ranked[3]["forecast"] is None
    assert "forecast" not in rows[0]  # the input rows are not modified
