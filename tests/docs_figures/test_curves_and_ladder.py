"""The learning-curve reports: curve-forecast-2026-11-26.md and continued-ladder-2026-11-27.md, their
rankings recomputed from the raw curves (benchmarks/curve_ranking.py) and their tables against the JSON.
"""

from __future__ import annotations

import json
import re

from composer.statistics import paired_difference
from tests.docs_figures.reading import (
    ROOT,
    agree,
    agree_all,
    doc,
    find,
    numbers,
    plain,
    reproduced,
    results,
    section,
    table,
)

CURVES = "curve_transfer_am-2026-11-26.json"


def test_search_curve_ranking_tables(tmp_path):
    """The report's issue-36 tables: each pattern's rung score, forecast and target, and every Spearman row,
    against the JSON; the JSON's rankings recomputed from its raw curves (benchmarks/curve_ranking.evaluate)."""
    import sys

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from curve_ranking import evaluate, load

    data = results(CURVES)
    text = section(doc("reports/curve-forecast-2026-11-26.md"), "Ranking by where a curve goes")
    rows = data["rankings"]["wsd_target_fit_from_0.25"]["patterns"]
    printed = table(text, "| target rank | pattern")
    assert [plain(row[1]) for row in printed] == [row["pattern"] for row in rows]
    for cells, row in zip(printed, rows, strict=True):
        agree(cells[3], row["rung_score"], f"{row['pattern']} rung score")
        agree(numbers(cells[5])[0], row["forecast"]["mean"], f"{row['pattern']} forecast")
        agree(cells[7], row["target"], f"{row['pattern']} target")
        raw = data["curves"]["patterns"][row["pattern"]]["0"]
        reproduced(row["rung_score"], raw["rung"]["score"], f"{row['pattern']} rung score")
        reproduced(row["target"], raw["target"]["score"], f"{row['pattern']} target")
    spearman = table(text, "| ranking of rung 1")
    keys = {"forecast, all trunk points": "wsd_target_fit_from_0",
            "forecast, points past 25% of the trunk (the ladder's)": "wsd_target_fit_from_0.25",
            "forecast, points past 50% of the trunk": "wsd_target_fit_from_0.5"}
    for cells in spearman:
        key = keys.get(cells[0]) or ("cosine_e2e_target_fit_from_0.25" if "cosine" in cells[1]
                                     else "wsd_target_fit_from_0")
        stored = data["rankings"][key]
        method = "snapshot" if cells[0].startswith("snapshot") else "forecast"
        agree(cells[3], stored[method]["spearman"], f"{cells[0]} ({cells[1]})")
        agree_all(numbers(cells[4]), stored[method]["spearman_ci"], f"{cells[0]} CI")
        if method == "forecast":
            agree(cells[5], stored["difference"]["spearman"], f"{cells[0]} difference")
    # the stored ranking is what the raw curves give (written by benchmarks/curve_ranking.py's evaluate)
    path = tmp_path / "curves.json"
    path.write_text(json.dumps(data["curves"]))
    again = evaluate(load(path), n_boot=10_000, fit_from=0.25)
    stored = data["rankings"]["wsd_target_fit_from_0.25"]
    reproduced(stored["snapshot"]["spearman"], again["snapshot"]["spearman"], "snapshot Spearman")
    reproduced(stored["forecast"]["spearman"], again["forecast"]["spearman"], "forecast Spearman")
    reproduced(stored["difference"]["ci"], again["difference"]["ci"], "paired difference CI")


def test_search_wsd_against_cosine_table():
    """The report's wsd-against-cosine table against the JSON's cosine_check (and its difference column)."""
    checks = results(CURVES)["cosine_check"]["patterns"]
    text = section(doc("reports/curve-forecast-2026-11-26.md"), "Warmup-stable-decay against cosine")
    for cells in table(text, "| pattern | cosine"):
        runs = checks[plain(cells[0])]
        agree(cells[1], runs["cosine"]["score"], "cosine")
        agree(cells[2], runs["wsd-fresh"]["score"], "wsd fresh")
        agree(cells[3], runs["wsd-continued"]["score"], "wsd continued")
        agree(cells[4], runs["wsd-fresh"]["score"] - runs["cosine"]["score"], "wsd - cosine")
        assert runs["wsd-fresh"]["score"] == runs["wsd-continued"]["score"]


OUT_OF_SAMPLE = "curve_out_of_sample-2026-11-27.json"


def _recomputed_ranking(tmp_path, curves: dict, targets=None, rung0=None) -> dict:
    """benchmarks/curve_ranking.evaluate on raw curves, as benchmarks/results' builder ran it."""
    import sys

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from curve_ranking import evaluate, load

    path = tmp_path / "curves.json"
    path.write_text(json.dumps(curves))
    data = results(OUT_OF_SAMPLE)
    return evaluate(load(path, targets), n_boot=data["n_boot"], fit_from=0.25, rung0=rung0, seed_sd=data["seed_sd"])


def _spearman_rows(text: str, header: str, report: dict, labels: dict[str, str]) -> None:
    """Each row of a 'ranking | ... | Spearman | 95% CI | forecast minus it' table against ``report``."""
    for cells in table(text, header):
        method = labels[plain(cells[0])]
        offset = len(cells) - 5  # a table may carry a 'patterns' column
        agree(cells[offset + 1], report[method]["spearman"], f"{cells[0]} Spearman")
        agree_all(numbers(cells[offset + 2]), report[method]["spearman_ci"], f"{cells[0]} CI")
        if method != "forecast":
            diff = report["difference"] if method == "snapshot" else report["difference_vs_rung0"]
            agree(cells[offset + 3], diff["spearman"], f"forecast - {method}")
            agree_all(numbers(cells[offset + 4]), diff["ci"], f"forecast - {method} CI")


def test_search_continued_ladder_end_to_end(tmp_path):
    """The report's issue-36 end-to-end section: the per-rung costs, the 8 candidates' table and the three
    rankings against the JSON, and the stored rankings recomputed from the raw curves and targets."""
    data = results(OUT_OF_SAMPLE)["e2e"]
    text = section(doc("reports/continued-ladder-2026-11-27.md"), "The continued ladder end to end")
    for cells, rung in zip(table(text, "| rung | candidates"), data["rungs"], strict=False):
        assert int(cells[1]) == rung["candidates"], cells
        agree(cells[2], rung["trained_tokens"], f"rung {rung['rung']} tokens")
        agree(numbers(cells[3])[0], rung["wall_seconds"] / 60, f"rung {rung['rung']} minutes")
    total = table(text, "| rung | candidates")[-1]
    agree(total[2], sum(rung["trained_tokens"] for rung in data["rungs"]), "all tokens")
    assert plain(total[3]) == f"{int(data['wall'].split(':')[0])} min {round(float(data['wall'].split(':')[1]))} s"
    report = data["ranking"]
    rows = report["patterns"]
    printed = table(text, "| target rank | pattern | rung 0")
    assert [plain(cells[1]) for cells in printed] == [row["pattern"] for row in rows]
    for cells, row in zip(printed, rows, strict=True):
        agree(cells[2], row["rung0_score"], "rung 0")
        agree(cells[4], row["rung_score"], "rung 1")
        agree(numbers(cells[6])[0], row["forecast"]["mean"], "forecast")
        agree(cells[8], row["target"], "target")
        assert (cells[9] == "yes") == (row["pattern"] in data["rungs"][2]["promoted"]), row["pattern"]
        raw = data["curves"]["patterns"][row["pattern"]]
        reproduced(row["target"], raw["target"], f"{row['pattern']} target")
    _spearman_rows(text, "| ranking of the 8", report, {"rung 0's score": "rung0", "rung 1's snapshot": "snapshot",
                                                         "rung 1's forecast (the ladder's)": "forecast"})
    measured = {p: v for p, v in data["curves"]["patterns"].items() if v["target"] is not None}
    again = _recomputed_ranking(tmp_path, {**data["curves"], "patterns": measured},
                                rung0={p: data["rung0"][p] for p in measured})
    for key in ("rung0", "snapshot", "forecast"):
        reproduced(report[key]["spearman_ci"], again[key]["spearman_ci"], f"{key} CI")
    reproduced(report["difference"]["ci"], again["difference"]["ci"], "paired difference CI")


def test_search_rung0_beside_rung1_and_the_rate_selection_tables(tmp_path):
    """The report: rung 0 beside rung 1 on the A/M set, and the rate-selection spreads, against the JSON;
    the A/M ranking recomputed from the stored A/M curves."""
    stored = results(OUT_OF_SAMPLE)
    text = section(doc("reports/continued-ladder-2026-11-27.md"), "The continued ladder end to end")
    am = stored["am_rung0"]
    _spearman_rows(section(text, "Rung 0 beside rung 1"), "| ranking | patterns", am["ranking"],
                   {"rung 0's score": "rung0", "rung 1's snapshot": "snapshot", "rung 1's forecast": "forecast"})
    curves = results(CURVES)["curves"]
    again = _recomputed_ranking(tmp_path, curves, targets=am["targets"], rung0=am["rung0"])
    reproduced(am["ranking"]["forecast"]["spearman_ci"], again["forecast"]["spearman_ci"], "A/M forecast CI")
    spreads = stored["rate_selection"]
    keys = {"A/M, rung 1 (the 12)": "am_rung1_12", "the default search's rung 1": "e2e_rung1_8",
            "AMSD, rung 1": "amsd_rung1"}
    for cells in table(section(text, "The rate chosen"), "| set | candidates"):
        agree(cells[2], spreads[keys[plain(cells[0])]]["spread"], cells[0])
        assert max(spread["spread"] for key, spread in spreads.items() if key in keys.values()) < stored["seed_sd"]


def test_search_amsd_out_of_sample_tables(tmp_path):
    """The report's AMSD out-of-sample tables against the JSON, its ranking recomputed from the raw curves, the
    independent targets and rung 0's scores stored there, and the 'target's best' table from the three rankings."""
    stored = results(OUT_OF_SAMPLE)
    amsd = stored["amsd"]
    text = section(doc("reports/continued-ladder-2026-11-27.md"), "Out of sample on `AMSD`")
    report = amsd["ranking"]
    printed = table(text, "| target rank | pattern")
    assert [plain(cells[1]) for cells in printed] == [row["pattern"] for row in report["patterns"]]
    assert len(printed) == 12
    for cells, row in zip(printed, report["patterns"], strict=True):
        agree(cells[2], row["rung0_score"], "rung 0")
        agree(cells[4], row["rung_score"], "rung 1")
        agree(numbers(cells[6])[0], row["forecast"]["mean"], "forecast")
        agree(cells[8], row["target"], "target")
        reproduced(row["target"], amsd["cosine_targets"][row["pattern"]], f"{row['pattern']} target")
    _spearman_rows(text, "| ranking of the 12", report, {"rung 0's score": "rung0", "rung 1's snapshot": "snapshot",
                                                          "rung 1's forecast (the ladder's)": "forecast"})
    again = _recomputed_ranking(tmp_path, amsd["curves"], targets=amsd["cosine_targets"], rung0=amsd["rung0"])
    reproduced(report["difference"]["ci"], again["difference"]["ci"], "AMSD paired difference CI")
    rankings = {"`A`/`M`, the 12 (in-sample)": results(CURVES)["rankings"]["wsd_target_fit_from_0.25"],
                "`A`/`M`, the search's 8": stored["e2e"]["ranking"], "`AMSD`, the 12": report}
    for cells in table(text, "| set | target's best"):
        rows = rankings[cells[0]]["patterns"]
        by_target = [row["pattern"] for row in sorted(rows, key=lambda row: row["target"])]
        snapshot = [row["pattern"] for row in sorted(rows, key=lambda row: row["rung_score"])]
        forecast = [row["pattern"] for row in sorted(rows, key=lambda row: row["forecast"]["mean"])]
        best = by_target[0]
        assert plain(cells[1]) == best
        assert int(cells[2]) == snapshot.index(best) + 1 and int(cells[3]) == forecast.index(best) + 1, cells
        assert [int(n) for n in numbers(cells[4])] == [by_target.index(p) + 1 for p in snapshot[:3]], cells
        assert [int(n) for n in numbers(cells[5])] == [by_target.index(p) + 1 for p in forecast[:3]], cells


def test_search_wsd_against_cosine_over_seeds():
    """The report's 3-seed wsd-against-cosine table against the JSON, the paired interval recomputed from the
    per-seed scores stored there."""

    checks = results(OUT_OF_SAMPLE)["wsd_cosine_seeds"]["patterns"]
    text = section(doc("reports/curve-forecast-2026-11-26.md"), "Warmup-stable-decay against cosine")
    for cells in table(text, "| pattern | seeds | cosine, mean"):
        runs = checks[plain(cells[0])]
        assert int(cells[1]) == len(runs["cosine"]) == len(runs["wsd"])
        agree(cells[2], sum(runs["cosine"].values()) / len(runs["cosine"]), "cosine mean")
        agree(cells[3], sum(runs["wsd"].values()) / len(runs["wsd"]), "wsd mean")
        again = paired_difference(runs["wsd"], runs["cosine"])
        agree(cells[4], again["mean"], "wsd - cosine")
        agree_all(numbers(cells[5]), again["ci"], "wsd - cosine CI")


def test_search_default_search_retimed_on_idle_cores():
    """The report's re-timed default search: wall time, rung times and counts, and the tie, from the stored run."""
    data = results("default_search_timed-2026-11-28.json")
    text = section(doc("reports/continued-ladder-2026-11-27.md"), "README's default `composer search`, timed")
    minutes, seconds = divmod(round(data["wall_seconds"]), 60)
    find(text, rf"Re-timed on 2 idle cores .{{0,40}}: {minutes} min {seconds} s")
    assert data["wall_seconds"] < 25 * 60
    for rung, count in zip(data["rungs"], (20, 9, 4), strict=True):
        assert rung["candidates"] == count
        find(text, rf"[Rr]ung {rung['rung']}: {count}[^;]{{0,120}}in {rung['seconds'] / 60:.1f}\s+min")
    verdict = data["best"]["vs_known"]
    assert verdict["answer"] == "tie" and verdict["recommended"] == "AMAMAM"
    low, high = verdict["ci"]
    find(text, re.escape(f"+{verdict['difference']:.4f} [{low:+.4f}, {high:+.4f}]"))
    find(text, rf"`AMAMMM` \({verdict['best_new']['score']:.4f}\)")
    find(text, rf"`AMAMAM` \({verdict['best_known']['score']:.4f}\)")
    # README gives the latest timed run's figure, not this one's (tests/test_readme.py holds it to that run)
