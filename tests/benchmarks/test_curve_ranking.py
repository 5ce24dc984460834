"""``benchmarks/curve_ranking.py`` on synthetic crossing curves: fast learners lead at the rung, slow learners at
the target, so the snapshot's Spearman is negative and the forecast's is +1, and their paired difference is clear."""

from __future__ import annotations

import json

import numpy as np
import pytest

TOKENS = np.geomspace(4e3, 1e5, 8)
TRUNK, TARGET, TARGET_TRUNK = 100_000, 500_000, 400_000
# (E, A, alpha): three fast learners that plateau high (one attention layer), three slow ones that end lower (three)
LAWS = {
    "MMMMAM": (3.00, 20.0, 0.5), "MMAMMM": (3.02, 20.0, 0.5), "MAMMMM": (3.04, 20.0, 0.5),
    "AMAMAM": (2.00, 6.47, 0.15), "AAMAMM": (2.02, 6.47, 0.15), "AMAAMM": (2.04, 6.47, 0.15),
}
SNAPSHOT_SPEARMAN = 1 - 6 * (6 * 3**2) / (6 * 35)  # every pattern 3 places off: -0.543


def loss(law, t):
    E, A, alpha = law
    return E + A * np.asarray(t, dtype=float) ** (-alpha)


def rung(law):
    curve = [{"step": i + 1, "tokens": int(t), "loss": float(loss(law, t)) + 0.03} for i, t in enumerate(TOKENS)]
    return {"score": float(loss(law, TRUNK)) - 0.05, "curve": curve, "trunk_tokens": TRUNK}


def target(law, seed):
    return float(loss(law, TARGET_TRUNK)) - 0.05 + (0.002 if seed else -0.002)


def run(script, tmp_path, capsys, data, *extra):
    path = tmp_path / "curves.json"
    path.write_text(json.dumps(data))
    out = tmp_path / "ranking.json"
    assert script.main(["--input", str(path), "--n-boot", "2000", "--json", str(out), *extra]) == 0
    return capsys.readouterr().out, json.loads(out.read_text())


def test_the_forecast_ranks_crossing_curves_as_the_target_does(tmp_path, capsys, load_benchmark):
    script = load_benchmark("curve_ranking")
    data = {"target_tokens": TARGET, "target_trunk_tokens": TARGET_TRUNK,
            "patterns": {p: {"rung": rung(law), "target": [target(law, 0), target(law, 1)]} for p, law in LAWS.items()}}
    printed, report = run(script, tmp_path, capsys, data, "--noise-floor", "0.01")

    assert report["snapshot"]["spearman"] == pytest.approx(SNAPSHOT_SPEARMAN)
    assert report["forecast"]["spearman"] == pytest.approx(1.0)
    assert report["snapshot"]["spearman_ci"][0] < 0 < report["forecast"]["spearman_ci"][0]
    diff = report["difference"]
    assert diff["spearman"] == pytest.approx(1.0 - SNAPSHOT_SPEARMAN)
    # replicates that draw one family only (3% of them) rank it alike both ways: the interval touches 0 from above
    assert diff["ci"][0] >= 0 < diff["ci"][1] and diff["p_better"] > 0.9
    rows = {row["pattern"]: row for row in report["patterns"]}
    assert rows["AMAMAM"]["forecast"]["mean"] == pytest.approx(rows["AMAMAM"]["target"], abs=1e-4)
    assert rows["AMAMAM"]["forecast"]["sd"] == pytest.approx(0.01)  # the floor: a noiseless curve has no spread
    assert [row["pattern"] for row in report["patterns"]][0] == report["target_best"] == "AMAMAM"
    assert report["could_be_best"] == ["AMAMAM"] and report["target_best_kept"]
    assert report["hedge_by_share"] == ["AMAMAM", "MMMMAM"] and report["target_best_hedged"]

    assert f"snapshot  Spearman {SNAPSHOT_SPEARMAN:+.3f}" in printed
    assert "forecast  Spearman +1.000" in printed
    assert f"forecast - snapshot {1.0 - SNAPSHOT_SPEARMAN:+.3f}" in printed
    assert "| AMAMAM | 0.50 |" in printed and "target's best AMAMAM kept: yes" in printed

    # a wider --z keeps the 0.02-worse second (1.4 sds of the difference at the 0.01 floor), not the third (2.8)
    _, wider = run(script, tmp_path, capsys, data, "--noise-floor", "0.01", "--z", "2")
    assert wider["could_be_best"] == ["AMAMAM", "AAMAMM"]


def test_curve_transfers_per_seed_record_is_read(tmp_path, capsys, load_benchmark):
    script = load_benchmark("curve_ranking")
    data = {"target_tokens": TARGET, "target_trunk_tokens": None,
            "patterns": {p: {str(seed): {"rung": rung(law), "target": {"score": target(law, seed),
                                                                        "trunk_tokens": TARGET_TRUNK}}
                             for seed in (0, 1)} for p, law in LAWS.items()}}
    _, report = run(script, tmp_path, capsys, data)
    assert report["target_trunk_tokens"] == TARGET_TRUNK
    assert report["forecast"]["spearman"] == pytest.approx(1.0)
    assert report["snapshot"]["spearman"] == pytest.approx(SNAPSHOT_SPEARMAN)
    row = next(row for row in report["patterns"] if row["pattern"] == "AMAMAM")
    assert row["target_seeds"] == 2 and row["target"] == pytest.approx(target(LAWS["AMAMAM"], 0) + 0.002)
    assert row["forecast"]["method"].endswith("(mean of 2 seeds)")


def test_independent_targets_and_a_lower_rung_are_ranked_beside(tmp_path, capsys, load_benchmark):
    """``--targets`` replaces the continued targets by independent ones (reversed here, so every Spearman flips
    sign); ``--rung0`` adds a lower rung's ranking with the forecast's paired difference against it."""
    script = load_benchmark("curve_ranking")
    data = {"target_tokens": TARGET, "target_trunk_tokens": TARGET_TRUNK,
            "patterns": {p: {"rung": rung(law), "target": target(law, 0)} for p, law in LAWS.items()}}
    reversed_targets = {p: [-target(law, 0), -target(law, 1)] for p, law in LAWS.items() if p != "MAMMMM"}
    (tmp_path / "targets.json").write_text(json.dumps(reversed_targets))
    rung0 = {p: float(loss(law, TRUNK)) for p, law in LAWS.items()}  # ranks the rung's end: the snapshot's order
    (tmp_path / "rung0.json").write_text(json.dumps(rung0))
    printed, report = run(script, tmp_path, capsys, data, "--targets", str(tmp_path / "targets.json"),
                          "--rung0", str(tmp_path / "rung0.json"))
    assert report["n_patterns"] == 5  # MAMMMM has no independent target
    assert report["forecast"]["spearman"] == pytest.approx(-1.0)
    assert all(row["target_seeds"] == 2 for row in report["patterns"])
    assert report["rung0"]["spearman"] == pytest.approx(report["snapshot"]["spearman"])
    assert report["difference_vs_rung0"]["spearman"] == pytest.approx(
        report["forecast"]["spearman"] - report["rung0"]["spearman"])
    assert "rung0     Spearman" in printed and "forecast - rung0" in printed

    del rung0["AMAMAM"]
    (tmp_path / "rung0.json").write_text(json.dumps(rung0))
    with pytest.raises(SystemExit) as stopped:
        script.main(["--input", str(tmp_path / "curves.json"), "--rung0", str(tmp_path / "rung0.json")])
    assert stopped.value.code == 2 and "--rung0 has no score for AMAMAM" in capsys.readouterr().err


def test_the_rate_choice_reports_its_winners_curse_per_candidate(tmp_path, capsys, load_benchmark):
    """--seed-sd: a candidate whose two rates tie is credited about 0.56 sd of optimism, one with a clear best rate
    none; the report gives the spread, the rank bias the choice adds."""
    script = load_benchmark("curve_ranking")
    sweeps = {"MMMMAM": {"0.001": 3.0, "0.002": 3.0}, "AMAMAM": {"0.001": 2.0, "0.002": 2.5}}
    data = {"target_tokens": TARGET, "target_trunk_tokens": TARGET_TRUNK,
            "patterns": {p: {"rung": {**rung(LAWS[p]), "lr_sweep": sweep}, "target": target(LAWS[p], 0)}
                         for p, sweep in sweeps.items()}}
    data["patterns"]["MMAMMM"] = {"rung": rung(LAWS["MMAMMM"]), "target": target(LAWS["MMAMMM"], 0)}  # one rate
    (tmp_path / "rung0.json").write_text(json.dumps({p: 1.0 for p in data["patterns"]}))
    printed, report = run(script, tmp_path, capsys, data, "--seed-sd", "0.03", "--rung0", str(tmp_path / "rung0.json"))
    optimism = {row["pattern"]: row["rate_optimism"] for row in report["patterns"]}
    assert optimism["MMMMAM"] == pytest.approx(0.03 / np.sqrt(np.pi), rel=0.02)
    assert optimism["AMAMAM"] == pytest.approx(0.0, abs=1e-4) and optimism["MMAMMM"] == 0.0
    assert report["rate_selection"]["spread"] == pytest.approx(optimism["MMMMAM"], abs=1e-4)
    assert "rate selection optimism at seed sd 0.03" in printed


def test_a_rung_only_record_is_ranked_against_independent_targets(tmp_path, capsys, load_benchmark):
    """curve_transfer.py --rung-only records {"rung": ..., "target": None}: left out alone, ranked with --targets."""
    script = load_benchmark("curve_ranking")
    data = {"target_tokens": TARGET, "target_trunk_tokens": TARGET_TRUNK,
            "patterns": {p: {"0": {"rung": rung(law), "target": None}} for p, law in LAWS.items()}}
    (tmp_path / "targets.json").write_text(json.dumps({p: target(law, 0) for p, law in LAWS.items()}))
    _, report = run(script, tmp_path, capsys, data, "--targets", str(tmp_path / "targets.json"))
    assert report["n_patterns"] == len(LAWS) and report["forecast"]["spearman"] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="at least 3 patterns"):
        script.evaluate(script.load(tmp_path / "curves.json"))
