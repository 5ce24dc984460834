"""``benchmarks/proxy_transfer.py`` against stored target losses and cached proxy scores (nothing trained): MAD
proxies get a macro-accuracy twin whose Δ against the peer is the paired difference of the two Spearmans."""

from __future__ import annotations

import json

import pytest

from composer.errors import ConfigError
from composer.statistics import compare_rank_correlations

PATTERNS = ["AAMMMM", "AMAMAM", "MMAAMM", "MMMMAA", "MMMMMM"]
LOSSES = {"AAMMMM": [2.2, 2.3], "AMAMAM": [1.9, 1.95], "MMAAMM": [1.85, 1.9], "MMMMAA": [1.8, 1.9],
          "MMMMMM": [2.4, 2.5]}
# plain accuracy puts AAMMMM first, macro accuracy puts it fourth
PLAIN = {"AAMMMM": 0.66, "AMAMAM": 0.60, "MMAAMM": 0.65, "MMMMAA": 0.55, "MMMMMM": 0.06}
MACRO = {"AAMMMM": 0.56, "AMAMAM": 0.58, "MMAAMM": 0.64, "MMMMAA": 0.60, "MMMMMM": 0.05}


def write_inputs(tmp_path, with_macro=True):
    stored = tmp_path / "stored.json"
    stored.write_text(json.dumps({"target": {"seeds": [0, 1], "tokens": 500_000, "to": "demo-4m",
                                             "targets": {p: p * 2 for p in PATTERNS}, "losses": LOSSES}}))
    out = tmp_path / "out"
    out.mkdir()
    cache = {"mad:cpu": {p: [{"seed": 0, "score": PLAIN[p], "seconds": 20.0, "direction": "maximize", "details": {
        "accuracy": {"recall": PLAIN[p], "memorization": 1.0},
        **({"macro_accuracy": {"recall": MACRO[p], "memorization": 1.0}, "macro_score": MACRO[p]}
           if with_macro else {})}}] for p in PATTERNS}}
    (out / "proxies.json").write_text(json.dumps(cache))
    return ["--patterns", ",".join(PATTERNS), "--proxies", "mad:cpu", "--target-losses", str(stored),
            "--n-boot", "300", "--out", str(out), "--json"]


def test_macro_twin_is_paired_with_the_plain_score(tmp_path, capsys, load_benchmark):
    script = load_benchmark("proxy_transfer")
    assert script.main(write_inputs(tmp_path)) == 0
    result = json.loads(capsys.readouterr().out)
    rows = {row["proxy"]: row for row in result["proxies"]}
    assert {"mad:cpu", "mad:cpu macro", "mad:cpu [recall]", "mad:cpu macro [recall]"} <= set(rows)
    per_seed = [LOSSES[p] for p in PATTERNS]
    paired = compare_rank_correlations({"mad:cpu": [PLAIN[p] for p in PATTERNS],
                                        "mad:cpu macro": [MACRO[p] for p in PATTERNS]},
                                       per_seed, reference="mad:cpu", n_boot=300)
    assert rows["mad:cpu macro"]["diff_vs_peer"] == pytest.approx(paired["mad:cpu macro"]["diff_vs_reference"])
    assert rows["mad:cpu macro"]["diff_vs_peer_ci"] == pytest.approx(paired["mad:cpu macro"]["diff_ci"])
    assert rows["mad:cpu macro"]["spearman"] != rows["mad:cpu"]["spearman"]
    assert result["proxy_scores"]["mad:cpu macro"] == {p: [MACRO[p]] for p in PATTERNS}
    assert result["target"]["losses_from"].endswith("stored.json")


def test_caches_without_macro_accuracy_get_no_macro_rows(tmp_path, capsys, load_benchmark):
    script = load_benchmark("proxy_transfer")
    assert script.main(write_inputs(tmp_path, with_macro=False)) == 0
    names = [row["proxy"] for row in json.loads(capsys.readouterr().out)["proxies"]]
    assert "mad:cpu" in names and not any("macro" in name for name in names)


def test_stored_targets_must_cover_the_patterns(tmp_path, load_benchmark):
    script = load_benchmark("proxy_transfer")
    argv = write_inputs(tmp_path)
    with pytest.raises(ConfigError, match="no target losses for AMMMMM"):
        script.main([*argv, "--patterns", "AAMMMM,AMMMMM,MMMMMM"])
    (tmp_path / "stored.json").write_text("[]")
    with pytest.raises(ConfigError, match="not a proxy_transfer result"):
        script.main(argv)


def test_a_composer_transfer_report_is_a_target(tmp_path, capsys, load_benchmark):
    """transfer.json's rows (each pattern at its own swept rate) give the same correlation as the same losses in
    this script's own format."""
    script = load_benchmark("proxy_transfer")
    argv = write_inputs(tmp_path)
    assert script.main(argv) == 0
    own = json.loads(capsys.readouterr().out)
    rows = [{"source_pattern": p, "target_pattern": p * 2, "lr": 1e-3 * (i + 1),
             "losses": {"0": LOSSES[p][0], "1": LOSSES[p][1]}} for i, p in enumerate(reversed(PATTERNS))]
    (tmp_path / "stored.json").write_text(json.dumps({"seeds": [0, 1], "tokens": 500_000, "to": "demo-4m",
                                                      "validation": {"same": True}, "patterns": rows}))
    assert script.main(argv) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["target"]["losses"] == LOSSES
    assert result["target"]["rates"]["AAMMMM"] == pytest.approx(5e-3)
    assert result["proxies"][0]["spearman"] == own["proxies"][0]["spearman"]


def test_the_search_scores_a_transfer_report_kept_are_a_row_paired_with_the_proxies(tmp_path, capsys,
                                                                                      load_benchmark):
    """A transfer.json keeps the score the search gave each pattern: it becomes row ``search`` (lower loss is
    better, so negated), paired with the re-scored proxies on the same draws, and can be the peer."""
    from composer.statistics import bootstrap_rank_correlation

    script = load_benchmark("proxy_transfer")
    argv = write_inputs(tmp_path)
    search = {"AAMMMM": 1.5, "AMAMAM": 1.7, "MMAAMM": 1.6, "MMMMAA": 1.4, "MMMMMM": 2.0}  # a loss: lower is better
    rows = [{"source_pattern": p, "target_pattern": p * 2, "lr": 1e-3, "score": search[p],
             "losses": {"0": LOSSES[p][0], "1": LOSSES[p][1]}} for p in PATTERNS]
    (tmp_path / "stored.json").write_text(json.dumps({"seeds": [0, 1], "tokens": 500_000, "to": "demo-4m",
                                                      "search": {"direction": "minimize"}, "patterns": rows}))
    assert script.main([*argv, "--peer", "search"]) == 0
    result = json.loads(capsys.readouterr().out)
    by_name = {row["proxy"]: row for row in result["proxies"]}
    per_seed = [LOSSES[p] for p in PATTERNS]
    expected = bootstrap_rank_correlation([-search[p] for p in PATTERNS], per_seed, n_boot=300)
    assert by_name["search"]["spearman"] == pytest.approx(expected["spearman"])
    assert by_name["search"]["spearman"] == pytest.approx(0.7)  # ranks 2,4,3,1,5 against the target's 4,3,2,1,5
    assert result["peer"] == "search" and by_name["search"]["diff_vs_peer"] == 0
    paired = compare_rank_correlations({"search": [-search[p] for p in PATTERNS],
                                        "mad:cpu": [PLAIN[p] for p in PATTERNS]},
                                       per_seed, reference="search", n_boot=300)
    assert by_name["mad:cpu"]["diff_vs_peer"] == pytest.approx(paired["mad:cpu"]["diff_vs_reference"])
    assert result["proxy_scores"]["search"] == {p: [search[p]] for p in PATTERNS}


def test_cached_mad_scores_without_per_task_details_still_rank(tmp_path, capsys, load_benchmark):
    """Scores carried over from a results file keep only the mean: the proxy's row stands, its per-task rows go."""
    script = load_benchmark("proxy_transfer")
    argv = write_inputs(tmp_path)
    cache_path = tmp_path / "out" / "proxies.json"
    cache = json.loads(cache_path.read_text())
    cache["mad:cpu"]["AAMMMM"][0]["details"] = {"macro_score": MACRO["AAMMMM"]}
    cache_path.write_text(json.dumps(cache))
    assert script.main(argv) == 0
    names = [row["proxy"] for row in json.loads(capsys.readouterr().out)["proxies"]]
    assert names == ["mad:cpu", "mad:cpu macro"]


def test_the_transfers_lr_sweep_is_a_row_at_the_targets_shape_ranked_against_independent_seeds(
        tmp_path, capsys, load_benchmark):
    """The sweep row scores each pattern by its best sweep loss over --sweep-rates; --target-seeds leaves out the
    seed the sweep trained with, for every row alike."""
    from composer.statistics import bootstrap_rank_correlation

    script = load_benchmark("proxy_transfer")
    argv = write_inputs(tmp_path)
    # at 1e-3 the sweep ranks like the target; at 4e-3 in reverse (a best-over-all-rates score would follow 4e-3)
    sweep = {p: {"points": [{"lr": 1e-3, "val_loss": 2 * sum(LOSSES[p]) / 2},
                            {"lr": 4e-3, "val_loss": 1.0 - sum(LOSSES[p]) / 10}]} for p in PATTERNS}
    rows = [{"source_pattern": p, "target_pattern": p * 2, "lr": 1e-3,
             "losses": {"0": LOSSES[p][0], "1": LOSSES[p][1]}} for p in PATTERNS]
    (tmp_path / "stored.json").write_text(json.dumps({"seeds": [0, 1], "tokens": 500_000, "to": "demo-4m",
                                                      "patterns": rows}))
    (tmp_path / "lr_sweep.json").write_text(json.dumps({"tokens": 125_000, "seed": 0, "models": sweep}))
    argv = [*argv, "--lr-sweep", str(tmp_path / "lr_sweep.json")]
    assert script.main([*argv, "--sweep-rates", "1e-3", "--target-seeds", "1"]) == 0
    result = json.loads(capsys.readouterr().out)
    row = next(r for r in result["proxies"] if r["proxy"] == "sweep: target shape, 125,000 tokens")
    expected = bootstrap_rank_correlation([-sum(LOSSES[p]) for p in PATTERNS], [[LOSSES[p][1]] for p in PATTERNS],
                                          n_boot=300)
    assert row["spearman"] == pytest.approx(expected["spearman"]) and row["spearman"] > 0.8
    assert row["sweep_seed_independent_of_target"] is True
    assert result["target"]["seeds"] == [1] and result["target"]["losses"]["AAMMMM"] == [LOSSES["AAMMMM"][1]]

    assert script.main(argv) == 0  # every rate, every seed: follows 4e-3's reversed ranking
    result = json.loads(capsys.readouterr().out)
    row = next(r for r in result["proxies"] if r["proxy"].startswith("sweep"))
    assert row["spearman"] < -0.8 and row["sweep_seed_independent_of_target"] is False
    with pytest.raises(ConfigError, match="--target-seeds: the target has no seed 5"):
        script.main([*argv, "--target-seeds", "5"])
    with pytest.raises(ConfigError, match="--sweep-rates: AAMMMM's lr sweep has none of"):
        script.main([*argv, "--sweep-rates", "2e-3"])
