"""Statistics of per-seed results: intervals match the textbook formulas, verdicts say "within noise" when the
seeds cannot tell two architectures apart, and the vectorised bootstrap agrees with scipy row by row."""

from __future__ import annotations

import json
import math
import time
from itertools import combinations

import numpy as np
import pytest
from scipy import stats

from composer.statistics import (
    VERDICT_HIGHER,
    VERDICT_LOWER,
    VERDICT_NO_COMMON_SEEDS,
    VERDICT_SINGLE_SEED,
    VERDICT_WITHIN_NOISE,
    bootstrap_rank_correlation,
    cluster_spread,
    clustered_proportion_interval,
    compare_rank_correlations,
    format_interval,
    kendall,
    noise_ceiling,
    paired_difference,
    proportion_interval,
    ranks,
    seed_summary,
    spearman,
)


def _json_roundtrip(result):
    """Every result must be strict JSON: no numpy types, no NaN."""
    return json.loads(json.dumps(result, allow_nan=False))


# ------------------------------------------------------------------------------------------ seed_summary


def test_seed_summary_t_interval_matches_the_formula():
    values = [2.31, 2.27, 2.35, 2.29, 2.33]
    result = seed_summary(values, confidence=0.9)
    mean = sum(values) / 5
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / 4)
    half = stats.t.ppf(0.95, df=4) * std / math.sqrt(5)
    assert result["n"] == 5 and result["dropped"] == 0
    assert result["mean"] == pytest.approx(mean)
    assert result["std"] == pytest.approx(std)
    assert result["ci"] == pytest.approx([mean - half, mean + half])
    assert result["values"] == values
    lo, hi = stats.t.interval(0.9, 4, loc=mean, scale=std / math.sqrt(5))
    assert result["ci"] == pytest.approx([lo, hi])
    assert _json_roundtrip(result) == result


def test_seed_summary_one_seed_has_no_interval_and_drops_missing_values():
    result = seed_summary([2.5, None, float("nan")])
    assert result == {"n": 1, "mean": 2.5, "std": None, "ci": None, "values": [2.5], "dropped": 2}
    empty = seed_summary([None])
    assert empty["n"] == 0 and empty["mean"] is None and empty["ci"] is None and empty["dropped"] == 1
    assert _json_roundtrip(empty) == empty
    assert all(type(v) is float for v in seed_summary(np.array([1.0, 2.0]))["ci"])


# ------------------------------------------------------------------------------------------ paired_difference


def test_paired_difference_verdicts():
    reference = {0: 2.50, 1: 2.60, 2: 2.40, 3: 2.55}
    lower = paired_difference({s: v - 0.05 + 0.001 * s for s, v in reference.items()}, reference)
    assert lower["verdict"] == VERDICT_LOWER and lower["ci"][1] < 0
    assert lower["seeds"] == [0, 1, 2, 3]
    assert lower["differences"] == pytest.approx([-0.05, -0.049, -0.048, -0.047])
    higher = paired_difference({s: v + 0.05 + 0.001 * s for s, v in reference.items()}, reference)
    assert higher["verdict"] == VERDICT_HIGHER and higher["ci"][0] > 0
    noisy = paired_difference({0: 2.45, 1: 2.66, 2: 2.38, 3: 2.60}, reference)
    assert noisy["verdict"] == VERDICT_WITHIN_NOISE and noisy["ci"][0] < 0 < noisy["ci"][1]
    # The mean difference and its interval are the one-sample t interval of the per-seed differences.
    diffs = np.array(noisy["differences"])
    lo, hi = stats.t.interval(0.95, 3, loc=diffs.mean(), scale=diffs.std(ddof=1) / 2)
    assert noisy["ci"] == pytest.approx([lo, hi])
    for result in (lower, higher, noisy):
        assert _json_roundtrip(result) == result


def test_paired_difference_uses_only_common_seeds():
    result = paired_difference({3: 1.0, 1: 1.0, 7: 5.0, 2: None}, {1: 1.5, 3: 0.5, 2: 1.0, 9: 0.0})
    assert result["seeds"] == [1, 3] and result["differences"] == [-0.5, 0.5] and result["n"] == 2
    assert result["verdict"] == VERDICT_WITHIN_NOISE
    single = paired_difference({"a": 1.0, "b": 2.0}, {"b": 1.0})
    assert single["verdict"] == VERDICT_SINGLE_SEED and single["ci"] is None and single["mean"] == 1.0
    none = paired_difference({0: 1.0}, {1: 1.0})
    assert none["verdict"] == VERDICT_NO_COMMON_SEEDS and none["n"] == 0 and none["mean"] is None
    for r in (result, single, none):
        assert _json_roundtrip(r) == r


# ------------------------------------------------------------------------------------------ correlations


def test_spearman_and_kendall_wrap_scipy_and_are_nan_when_undefined():
    rng = np.random.default_rng(1)
    x, y = rng.normal(size=9), rng.normal(size=9)
    y[3] = y[5]  # a tie
    assert spearman(x, y) == pytest.approx(stats.spearmanr(x, y).statistic)
    assert kendall(x, y) == pytest.approx(stats.kendalltau(x, y, variant="b").statistic)
    assert type(spearman(x, y)) is float and type(kendall(x, y)) is float
    for a, b in (([1.0, 2.0], [2.0, 1.0]), ([1.0, 1.0, 1.0], [1.0, 2.0, 3.0]), ([1.0, 2.0, 3.0], [4.0] * 3)):
        assert math.isnan(spearman(a, b)) and math.isnan(kendall(a, b))
    with pytest.raises(ValueError):
        spearman([1.0, 2.0, 3.0], [1.0, 2.0])


def _slow_kendall_tau_b(x, y):
    concordant_minus_discordant = untied_x = untied_y = 0
    for i, j in combinations(range(len(x)), 2):
        sx, sy = np.sign(x[i] - x[j]), np.sign(y[i] - y[j])
        concordant_minus_discordant += sx * sy
        untied_x += sx != 0
        untied_y += sy != 0
    return concordant_minus_discordant / math.sqrt(untied_x * untied_y)


def test_vectorised_rank_correlations_equal_scipy_on_resampled_rows_with_ties():
    rng = np.random.default_rng(3)
    base_x, base_y = rng.normal(size=7), rng.normal(size=7)
    rows = rng.integers(0, 7, size=(6, 7))  # resampling with replacement: ties in both x and y
    x, y = base_x[rows], np.round(base_y[rows] + 0.3 * rng.normal(size=rows.shape), 1)
    tau = ranks._rowwise_kendall(x, y)
    rho = ranks._rowwise_spearman(x, y)
    for b in range(rows.shape[0]):
        assert len(set(x[b])) < 7  # the row really has ties
        assert tau[b] == pytest.approx(_slow_kendall_tau_b(x[b], y[b]))
        assert tau[b] == pytest.approx(stats.kendalltau(x[b], y[b], variant="b").statistic)
        assert rho[b] == pytest.approx(stats.spearmanr(x[b], y[b]).statistic)


def test_vectorised_kendall_chunks_give_the_same_answer(monkeypatch):
    rng = np.random.default_rng(4)
    x, y = rng.integers(0, 5, size=(50, 6)).astype(float), rng.normal(size=(50, 6))
    whole = ranks._rowwise_kendall(x, y)
    monkeypatch.setattr(ranks, "CHUNK_ELEMENTS", 7 * 36)  # 7 rows per chunk
    assert np.array_equal(ranks._rowwise_kendall(x, y), whole)


def test_bootstrap_does_not_depend_on_the_chunk_size(monkeypatch):
    scores, losses = _random_case()
    whole = bootstrap_rank_correlation(scores, losses, n_boot=500, seed=3)
    monkeypatch.setattr(ranks, "CHUNK_ELEMENTS", 13 * 144)  # 13 replicates per chunk, the last one short
    assert bootstrap_rank_correlation(scores, losses, n_boot=500, seed=3) == whole


# ------------------------------------------------------------------------------------------ bootstrap


def test_bootstrap_perfect_ranking_gives_one_and_a_tight_interval():
    scores = np.linspace(0.0, 1.0, 8)
    # Loss falls as the score rises, and every seed agrees exactly: every valid replicate is exactly +1.
    identical = [[3.0 - s] * 3 for s in scores]
    result = bootstrap_rank_correlation(scores, identical, n_boot=2000)
    assert result["spearman"] == pytest.approx(1.0) and result["kendall"] == pytest.approx(1.0)
    assert result["spearman_ci"] == pytest.approx([1.0, 1.0])
    assert result["kendall_ci"] == pytest.approx([1.0, 1.0])
    # Small seed noise (the patterns' seed ranges overlap a little): still 1, interval near 1.
    noise = np.random.default_rng(0).normal(scale=0.01, size=(8, 3))
    noisy = bootstrap_rank_correlation(scores, (3.0 - scores[:, None] + noise).tolist(), n_boot=2000)
    assert noisy["spearman"] == pytest.approx(1.0)
    assert noisy["spearman_ci"][0] > 0.9 and noisy["spearman_ci"][1] == pytest.approx(1.0)
    assert noisy["kendall_ci"][0] > 0.8
    assert result["n_patterns"] == 8 and 0 < result["n_boot"] <= 2000
    assert _json_roundtrip(result) == result


def _random_case(k=12, seed=7):
    rng = np.random.default_rng(seed)
    scores = rng.normal(size=k)
    losses = [2.5 - 0.05 * scores[i] + 0.05 * rng.normal(size=rng.integers(1, 5)) for i in range(k)]
    return scores.tolist(), [row.tolist() for row in losses]


def test_bootstrap_point_estimate_interval_and_determinism():
    scores, losses = _random_case()
    result = bootstrap_rank_correlation(scores, losses, n_boot=3000, seed=11)
    negated_means = [-float(np.mean(row)) for row in losses]
    assert result["spearman"] == pytest.approx(stats.spearmanr(scores, negated_means).statistic)
    assert result["kendall"] == pytest.approx(stats.kendalltau(scores, negated_means, variant="b").statistic)
    for name in ("spearman", "kendall"):
        lo, hi = result[f"{name}_ci"]
        assert -1.0 <= lo <= result[name] <= hi <= 1.0 and lo < hi
    assert result == bootstrap_rank_correlation(scores, losses, n_boot=3000, seed=11)
    assert result != bootstrap_rank_correlation(scores, losses, n_boot=3000, seed=12)
    assert _json_roundtrip(result) == result
    assert all(type(result[key]) is float for key in ("spearman", "kendall"))
    assert all(type(v) is float for v in result["spearman_ci"] + result["kendall_ci"])
    assert type(result["n_boot"]) is int and type(result["n_patterns"]) is int


def test_bootstrap_matches_a_slow_loop_over_the_same_draws():
    scores, losses = _random_case(k=4, seed=2)
    n_boot, seed = 300, 5
    # The same random draws as the implementation, consumed by a plain loop: a stream of uniforms picking
    # the pattern of each slot, and a stream of `width` uniforms per pattern whose first n_k pick its seeds.
    pattern_rng, seed_rng = (np.random.default_rng(c) for c in np.random.SeedSequence(seed).spawn(2))
    k, width = len(scores), max(len(row) for row in losses)
    patterns = np.floor(pattern_rng.random((n_boot, k)) * k).astype(int)
    uniforms = seed_rng.random((n_boot, k, width))
    rhos, taus = [], []
    for b in range(n_boot):
        means = [np.mean([losses[p][int(u * len(losses[p]))] for u in uniforms[b, p, : len(losses[p])]])
                 for p in range(k)]
        x = [scores[p] for p in patterns[b]]
        y = [-means[p] for p in patterns[b]]
        if len(set(x)) > 1 and len(set(y)) > 1:
            rhos.append(stats.spearmanr(x, y).statistic)
            taus.append(stats.kendalltau(x, y, variant="b").statistic)
    result = bootstrap_rank_correlation(scores, losses, n_boot=n_boot, seed=seed)
    assert result["n_boot"] == len(rhos) < n_boot  # with 4 patterns some replicates are constant
    assert result["spearman_ci"] == pytest.approx(np.quantile(rhos, [0.025, 0.975]).tolist())
    assert result["kendall_ci"] == pytest.approx(np.quantile(taus, [0.025, 0.975]).tolist())


def test_bootstrap_seed_noise_widens_the_interval():
    scores, losses = _random_case()
    means_only = [[float(np.mean(row))] for row in losses]  # one "seed" each: no seed noise to resample
    with_seeds = bootstrap_rank_correlation(scores, losses, n_boot=4000)
    without = bootstrap_rank_correlation(scores, means_only, n_boot=4000)
    assert with_seeds["spearman"] == pytest.approx(without["spearman"])
    assert np.diff(with_seeds["spearman_ci"])[0] > np.diff(without["spearman_ci"])[0]


def test_bootstrap_default_size_is_fast():
    scores, losses = _random_case()
    start = time.perf_counter()
    result = bootstrap_rank_correlation(scores, losses)
    assert time.perf_counter() - start < 1.0
    assert result["n_boot"] == 10000  # with 12 distinct scores a constant replicate is (12 choose 1)/12^12


def test_bootstrap_undefined_and_invalid_inputs():
    too_few = bootstrap_rank_correlation([1.0, 2.0], [[1.0], [0.5]])
    assert too_few["spearman"] is None and too_few["spearman_ci"] is None and too_few["n_boot"] == 0
    constant = bootstrap_rank_correlation([1.0, 1.0, 1.0], [[1.0], [0.5], [0.2]])
    assert constant["kendall"] is None and constant["kendall_ci"] is None
    for r in (too_few, constant):
        assert _json_roundtrip(r) == r
    with pytest.raises(ValueError):
        bootstrap_rank_correlation([1.0, 2.0, 3.0], [[1.0], [2.0]])
    with pytest.raises(ValueError):
        bootstrap_rank_correlation([1.0, 2.0, 3.0], [[1.0], [None], [2.0]])


# ------------------------------------------------------------------------------------------ noise ceiling


def test_noise_ceiling_identical_seeds_is_one():
    losses = [2.5, 2.4, 2.7, 2.6, 2.3]
    result = noise_ceiling({0: losses, 1: list(losses), 2: list(losses)})
    assert [p["seeds"] for p in result["pairs"]] == [[0, 1], [0, 2], [1, 2]]
    assert all(p["spearman"] == pytest.approx(1.0) for p in result["pairs"])
    assert result["mean"] == pytest.approx(1.0) and result["spearman_brown"] == pytest.approx(1.0)
    assert _json_roundtrip(result) == result


def test_noise_ceiling_pairs_missing_patterns_and_spearman_brown():
    by_seed = {
        1: [2.5, 2.4, 2.7, 2.6, 2.3, None],
        0: [2.5, 2.6, 2.7, 2.4, 2.3, 2.9],
        2: [2.4, 2.5, 2.6, float("nan"), 2.2],  # shorter: the last pattern is missing too
    }
    result = noise_ceiling(by_seed)
    pairs = {tuple(p["seeds"]): p["spearman"] for p in result["pairs"]}
    assert list(pairs) == [(0, 1), (0, 2), (1, 2)]
    assert pairs[(0, 1)] == pytest.approx(stats.spearmanr(by_seed[0][:5], by_seed[1][:5]).statistic)
    keep = [0, 1, 2, 4]
    expected = stats.spearmanr([by_seed[0][i] for i in keep], [by_seed[2][i] for i in keep]).statistic
    assert pairs[(0, 2)] == pytest.approx(expected)
    r = float(np.mean(list(pairs.values())))
    assert result["mean"] == pytest.approx(r)
    assert result["spearman_brown"] == pytest.approx(3 * r / (1 + 2 * r))
    assert result["ceiling"] == pytest.approx(math.sqrt(3 * r / (1 + 2 * r)))
    assert _json_roundtrip(result) == result


def test_noise_ceiling_with_one_seed_or_undefined_reliability():
    one = noise_ceiling({0: [1.0, 2.0, 3.0]})
    assert one == {"pairs": [], "mean": None, "spearman_brown": None, "ceiling": None}
    # Two seeds ranking three patterns exactly backwards: r = -1 and 2r/(1+r) divides by zero.
    opposite = noise_ceiling({0: [1.0, 2.0, 3.0], 1: [3.0, 2.0, 1.0]})
    assert opposite["mean"] == pytest.approx(-1.0) and opposite["spearman_brown"] is None
    assert _json_roundtrip(opposite) == opposite


# ------------------------------------------------------------------------------------------ formatting


def test_format_interval():
    assert format_interval([-0.01234, 0.0045]) == "[-0.0123, +0.0045]"
    assert format_interval((0.5, 1.0), digits=2) == "[+0.50, +1.00]"
    assert format_interval(None) == "n/a" and format_interval([None, 1.0]) == "n/a"


def test_compare_rank_correlations_pairs_the_replicates():
    rng = np.random.default_rng(3)
    quality = np.linspace(0.0, 1.0, 10)
    losses = [[3.0 - q + 0.05 * rng.standard_normal() for _ in range(3)] for q in quality]
    good = quality + 0.05 * rng.standard_normal(10)  # tracks the target
    poor = rng.standard_normal(10)  # unrelated
    result = compare_rank_correlations({"good": good, "poor": poor}, losses, reference="poor", n_boot=2000)
    single = bootstrap_rank_correlation(good, losses, n_boot=2000)
    assert result["good"]["spearman"] == pytest.approx(single["spearman"])
    assert result["good"]["spearman_ci"] == pytest.approx(single["spearman_ci"])  # the same draws
    assert result["poor"]["diff_vs_reference"] == 0 and result["poor"]["p_better"] == 0.5
    assert result["good"]["diff_ci"][0] > 0 and result["good"]["p_better"] > 0.97
    assert result["good"]["diff_vs_reference"] == pytest.approx(result["good"]["spearman"] - result["poor"]["spearman"])
    json.dumps(result, allow_nan=False)
    with pytest.raises(ValueError, match="reference"):
        compare_rank_correlations({"good": good}, losses, reference="other")


def test_seed_separation_compares_the_spread_within_models_with_the_spread_between_them():
    from composer.statistics import seed_separation

    # three models whose means differ by 0.5 while each one's seeds differ by 0.02: decided
    clear = {"a": {0: 2.00, 1: 2.02}, "b": {0: 2.50, 1: 2.52}, "c": {0: 3.00, 1: 3.02}}
    power = seed_separation(clear)
    assert power["within_seed_std"] == pytest.approx(math.sqrt(0.0002))
    assert power["between_model_std"] == pytest.approx(0.5)
    assert power["separation"] == pytest.approx(0.5 / math.sqrt(0.0002))
    assert power["noise_ceiling"] == 1.0 and not power["underpowered"] and power["reason"] is None

    # means 0.01 apart, seeds 0.2 apart and ranking the models in opposite orders: underpowered, both reasons
    noisy = {"a": {0: 2.0, 1: 2.3}, "b": {0: 2.1, 1: 2.2}, "c": {0: 2.3, 1: 2.0}}
    power = seed_separation(noisy)
    assert power["underpowered"] and power["noise_ceiling"] == -1.0
    assert "rank the architectures differently" in power["reason"] and "between/within" in power["reason"]

    # a diverged seed is dropped; one seed gives no noise estimate; two models give no rank agreement
    power = seed_separation({"a": {0: 2.0, 1: None}, "b": {0: 2.5, 1: 2.6}})
    assert power["within_seed_std"] == pytest.approx(math.sqrt(0.005)) and power["noise_ceiling"] is None
    single = seed_separation({"a": {0: 2.0}, "b": {0: 2.5}, "c": {0: 3.0}})
    assert single["underpowered"] and "one seed" in single["reason"] and single["separation"] is None


def test_the_proportion_interval_is_wilsons_and_stays_inside_0_1():
    low, high = proportion_interval(50, 100)
    assert low == pytest.approx(0.4038, abs=1e-4) and high == pytest.approx(0.5962, abs=1e-4)  # Wilson, z 1.96
    assert proportion_interval(0, 1000)[0] == pytest.approx(0.0, abs=1e-12) and proportion_interval(0, 1000)[1] < 0.004
    assert proportion_interval(1000, 1000)[1] == 1.0
    wide, narrow = proportion_interval(5, 10), proportion_interval(500, 1000)
    assert wide[1] - wide[0] > narrow[1] - narrow[0], "more test items, a narrower interval"
    assert proportion_interval(3, 0) is None
    with pytest.raises(ValueError, match="successes must lie"):
        proportion_interval(11, 10)


def test_cluster_spread_is_the_sd_of_the_per_cluster_proportions():
    successes, trials = [60, 64, 0, 63], [64, 64, 64, 64]
    spread = _json_roundtrip(cluster_spread(successes, trials))
    assert spread["clusters"] == 4 and spread["trials"] == 256
    assert spread["proportion"] == pytest.approx(187 / 256)
    assert spread["cluster_sd"] == pytest.approx(np.std(np.array(successes) / 64, ddof=1))
    # unequal clusters: the ratio estimator's standard error, times sqrt(clusters)
    uneven = cluster_spread([1, 9], [2, 10])
    se = math.sqrt(2 / 1 * ((1 - 2 * 10 / 12) ** 2 + (9 - 10 * 10 / 12) ** 2) / 12 ** 2)
    assert uneven["cluster_sd"] == pytest.approx(se * math.sqrt(2))
    assert cluster_spread([3], [4])["cluster_sd"] is None  # one cluster: no spread
    with pytest.raises(ValueError, match="one count of trials per cluster"):
        cluster_spread([1, 2], [3])
    with pytest.raises(ValueError, match="successes must lie"):
        cluster_spread([5, 1], [4, 4])


def test_the_clustered_interval_is_wilsons_over_the_effective_number_of_independent_items():
    """Queries within a test sequence share it (its keys, its distances, the model's state along it): the design
    effect, the clustered variance over the binomial one, divides the queries into as many independent ones."""
    k, m, p = 256, 64, 0.9
    independent = clustered_proportion_interval(p, k * m, k, math.sqrt(p * (1 - p) / m))  # binomial within clusters
    assert independent["design_effect"] == pytest.approx(1.0)
    assert independent["ci"] == pytest.approx(proportion_interval(p * k * m, k * m))
    # every sequence all right or all wrong: k items, not k*m (the design effect is capped at m)
    all_or_nothing = clustered_proportion_interval(p, k * m, k, math.sqrt(p * (1 - p) * k / (k - 1)))
    assert all_or_nothing["design_effect"] == pytest.approx(m) and all_or_nothing["effective_trials"] == k
    assert all_or_nothing["ci"] == pytest.approx(proportion_interval(p * k, k))
    middle = _json_roundtrip(clustered_proportion_interval(p, k * m, k, 3 * math.sqrt(p * (1 - p) / m)))
    assert middle["design_effect"] == pytest.approx(9.0)
    assert middle["ci"][0] < independent["ci"][0] and middle["ci"][1] > independent["ci"][1]
    # less spread than independent queries would give is not taken as more information
    assert clustered_proportion_interval(p, k * m, k, 0.0)["design_effect"] == 1.0


def test_without_a_measured_spread_the_clustered_interval_assumes_the_worst():
    """No cluster spread (an old record): the largest the proportion allows, its misses packed into as few
    clusters as they fill; a proportion of 0 or 1 (where the spread is 0 whatever the correlation): each cluster
    counts as one item, as if its queries stood or fell together."""
    packed = [64] * 255 + [58]  # 6 misses of 16,384 in one sequence
    worst = clustered_proportion_interval(16_378 / 16_384, 16_384, 256)
    spread = cluster_spread(packed, [64] * 256)
    assert worst["ci"] == pytest.approx(clustered_proportion_interval(spread["proportion"], 16_384, 256,
                                                                      spread["cluster_sd"])["ci"])
    assert worst["design_effect"] == pytest.approx(6.0, rel=0.01)  # 6 misses that may be one sequence's
    whole = clustered_proportion_interval(1 - 128 / 16_384, 16_384, 256)  # 2 sequences' worth: they may be 2
    assert whole["design_effect"] == 64 and whole["ci"] == pytest.approx(proportion_interval(254, 256))
    perfect = clustered_proportion_interval(1.0, 16_384, 256, 0.0)
    assert perfect["ci"] == pytest.approx(proportion_interval(256, 256)) and perfect["ci"][1] == 1.0
    assert clustered_proportion_interval(0.5, 0, 0)["ci"] is None
    with pytest.raises(ValueError, match="clusters"):
        clustered_proportion_interval(0.5, 10, 20)
    with pytest.raises(ValueError, match="proportion"):
        clustered_proportion_interval(1.5, 10, 2)


def test_the_clustered_interval_covers_where_wilson_over_the_queries_does_not():
    """256 sequences of 64 queries whose accuracy varies by sequence (beta-distributed, intra-sequence correlation
    0.2): Wilson over the 16,384 queries as if independent covers the truth far less than 95% of the time; the
    interval over sequences about 95%."""
    rng = np.random.default_rng(0)
    truth, k, m, draws = 0.8, 256, 64, 400
    a, b = truth * 4.0, (1 - truth) * 4.0  # intra-cluster correlation 1 / (a + b + 1) = 0.2
    covered = {"clustered": 0, "queries": 0}
    for _ in range(draws):
        successes = rng.binomial(m, rng.beta(a, b, size=k))
        spread = cluster_spread(successes, [m] * k)
        low, high = clustered_proportion_interval(spread["proportion"], k * m, k, spread["cluster_sd"])["ci"]
        covered["clustered"] += low <= truth <= high
        low, high = proportion_interval(int(successes.sum()), k * m)
        covered["queries"] += low <= truth <= high
    assert 0.92 <= covered["clustered"] / draws <= 0.98, covered
    assert covered["queries"] / draws < 0.6, covered


def test_selection_optimism_is_the_winners_curse_of_a_rate_grid():
    """Two tied rates: the minimum of two draws undercuts the truth by sd/sqrt(pi); a clear winner: nothing; a
    lone or diverged rate: nothing."""
    from composer.statistics import selection_optimism

    assert selection_optimism([2.0, 2.0], sd=0.03) == pytest.approx(0.03 / math.sqrt(math.pi), rel=0.02)
    assert selection_optimism([2.0, 2.5], sd=0.03) == pytest.approx(0.0, abs=1e-4)
    assert selection_optimism([2.0, None, float("nan")], sd=0.03) == 0.0
    assert selection_optimism([2.0, 2.0, 2.0], sd=0.03) > selection_optimism([2.0, 2.0], sd=0.03)
    assert selection_optimism([2.0, 2.01], sd=0.03) == selection_optimism([2.0, 2.01], sd=0.03)  # seeded
    with pytest.raises(ValueError, match="sd"):
        selection_optimism([2.0, 2.1], sd=-1)
