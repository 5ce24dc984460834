"""The default search's scores: default-score-transfer-2026-11-26.md, rung-transfer-2026-11-26.md and
default-search-am-2026-11-26.md, their rankings and Spearman tables recomputed from the stored runs.
"""

from __future__ import annotations

import numpy as np

from composer.statistics import (
    bootstrap_rank_correlation,
    compare_rank_correlations,
    noise_ceiling,
    paired_difference,
    seed_summary,
)
from tests.docs_figures.reading import (
    BOOT_SEED,
    N_BOOT,
    NUM,
    agree,
    agree_all,
    doc,
    find,
    numbers,
    per_seed,
    plain,
    reproduced,
    results,
    section,
    table,
)


def test_search_default_score_transfer():
    """The report's transfer of the default lm score over the AMSD search's leaderboard: the table's target
    ranking, search ranks and scores, losses, rates and paired differences to SMSAMS, recomputed from the
    per-seed losses of transfer_default_search_amsd's transfer.json; and the Spearman table."""
    text = section(doc("reports/default-score-transfer-2026-11-26.md"), "Transfer of the default `lm` score")
    data = results("transfer_default_search_amsd-2026-11-26.json")
    transfer, seeds = data["transfer"], data["transfer"]["seeds"]
    by_pattern = {row["source_pattern"]: row for row in transfer["patterns"]}
    losses = {p: per_seed(row["losses"], seeds) for p, row in by_pattern.items()}
    ranked = sorted(by_pattern, key=lambda p: np.mean(list(losses[p].values())))
    rows = table(text, "| target rank |")
    assert [plain(row[1]).split()[0] for row in rows] == ranked, "the table's order is the target's ranking"
    for i, (row, pattern) in enumerate(zip(rows, ranked, strict=True), 1):
        source = by_pattern[pattern]
        assert row[0] == str(i) and row[2] == str(source["search_rank"]), pattern
        agree(row[3], source["score"], f"{pattern} search score")
        agree(plain(row[4]), seed_summary(list(losses[pattern].values()))["mean"], f"{pattern} target loss")
        assert float(row[5]) == source["lr"], f"{pattern} rate"
        if pattern != "SMSAMS":
            diff = paired_difference(losses[pattern], losses["SMSAMS"])
            agree_all(numbers(row[6]), [diff["mean"], *diff["ci"]], f"{pattern} minus SMSAMS")
    hybrids = [p for p in by_pattern if p not in ("AMAMAM", "AAMMMM")]

    def rank_correlation(names, score, against):
        return bootstrap_rank_correlation([score(p) for p in names],
                                          [[by_pattern[p]["losses"][str(s)] for s in against] for p in names],
                                          n_boot=N_BOOT, seed=BOOT_SEED)

    expected = [rank_correlation(list(by_pattern), lambda p: -by_pattern[p]["score"], seeds),
                rank_correlation(hybrids, lambda p: -by_pattern[p]["score"], seeds),
                rank_correlation(list(by_pattern), lambda p: -by_pattern[p]["losses"]["0"], (1, 2)),
                rank_correlation(hybrids, lambda p: -by_pattern[p]["losses"]["0"], (1, 2))]
    reproduced([transfer["spearman"], *transfer["spearman_ci"]],
               [expected[0]["spearman"], *expected[0]["spearman_ci"]], "the lm score's Spearman")
    spearman_rows = table(text, "| score | against")
    for row, value in zip(spearman_rows, expected, strict=False):
        agree_all(numbers(row[2]) + numbers(row[3]), [value["spearman"], *value["spearman_ci"]], row[0])
    ceiling = noise_ceiling({s: [losses[p][s] for p in by_pattern] for s in seeds})
    agree(numbers(spearman_rows[4][2])[0], ceiling["mean"], "noise ceiling")


RUNGS = "rung_transfer-2026-11-26.json"


def test_search_rung_transfer():
    """The report's "Which rung transfers": every Spearman and paired difference recomputed from the raw proxy
    scores of rung_transfer, the target losses and the lr sweep of transfer_default_search_amsd (seeds 1-2),
    and checked against both the doc and the JSON's stored analyses; the times from the raw seconds."""
    text = section(doc("reports/rung-transfer-2026-11-26.md"), "Which rung transfers")
    data, source = results(RUNGS), results("transfer_default_search_amsd-2026-11-26.json")
    raw = data["proxy_scores"]
    by_pattern = {row["source_pattern"]: row for row in source["transfer"]["patterns"]}
    sweep = {p: model["points"] for p, model in source["lr_sweep"]["models"].items()}
    scores = {  # higher is better
        "mad": lambda p: raw["mad:cpu"][p][0]["score"],
        "macro": lambda p: raw["mad:cpu"][p][0]["details"]["macro_score"],
        "rung0": lambda p: -raw["lm:rung-cpu-0"][p][0]["score"],
        "search": lambda p: -by_pattern[p]["score"],
        "new": lambda p: -min(pt["val_loss"] for pt in sweep[p] if pt["lr"] in (1e-3, 2e-3)),
        "last": lambda p: -by_pattern[p]["losses"]["0"],
    }
    groups = {"all 12": data["analyses"]["all12_indep"]["patterns"],
              "hybrids": data["analyses"]["hybrids_indep"]["patterns"]}
    assert len(groups["all 12"]) == 12 and set(groups["all 12"]) - set(groups["hybrids"]) == {"AMAMAM", "AAMMMM"}

    def target(names):
        return [[by_pattern[p]["losses"][s] for s in ("1", "2")] for p in names]

    spearman, paired = {}, {}
    for group, names in groups.items():
        signed = {key: [score(p) for p in names] for key, score in scores.items()}
        spearman[group] = {key: bootstrap_rank_correlation(values, target(names), n_boot=N_BOOT, seed=BOOT_SEED)
                           for key, values in signed.items()}
        paired[group] = {ref: compare_rank_correlations(signed, target(names), reference=ref, n_boot=N_BOOT)
                         for ref in ("search", "rung0", "mad")}
    stored = {row["proxy"]: row for row in data["analyses"]["all12_indep"]["rows"]}
    reproduced(stored["sweep: target shape, 125,000 tokens"]["spearman"], spearman["all 12"]["new"]["spearman"],
               "the new rung's Spearman")
    reproduced(stored["lm:rung-cpu-0"]["diff_vs_peer_ci"], paired["all 12"]["search"]["rung0"]["diff_ci"],
               "rung 0 minus the search's score")

    order = ["mad", "macro", "rung0", "search", "new", "last"]
    rows = table(text, "| score (what a rung would train) |")
    assert len(rows) == len(order)
    for row, key in zip(rows, order, strict=True):
        for cell, group in zip(row[3:5], groups, strict=True):
            value = spearman[group][key]
            agree_all(numbers(cell), [value["spearman"], *value["spearman_ci"]], f"{key}, {group}")
    seconds = {proxy: [e[0]["seconds"] for e in by.values() if "from" not in e[0]] for proxy, by in raw.items()}
    agree(rows[0][2], sum(seconds["mad:cpu"]) / len(seconds["mad:cpu"]), "MAD seconds per candidate")
    agree(rows[2][2], sum(seconds["lm:rung-cpu-0"]) / len(seconds["lm:rung-cpu-0"]), "rung 0 seconds")

    differences = [("new", "search"), ("rung0", "search"), ("new", "rung0"), ("mad", "search"), ("mad", "rung0"),
                   ("macro", "mad")]
    rows = table(text, "| difference | all 12 |")
    assert len(rows) == len(differences)
    for row, (key, ref) in zip(rows, differences, strict=True):
        for cell, group in zip(row[1:3], groups, strict=True):
            versus = paired[group][ref][key]
            agree_all(numbers(cell), [versus["diff_vs_reference"], *versus["diff_ci"]], f"{key} minus {ref}, {group}")


E2E = "default_search_am_e2e-2026-11-26.json"


def test_search_default_end_to_end_on_am():
    """The report's end-to-end run of the default search: wall time, each rung's training time, and every
    finalist's rank, score and rate at each rung, from default_search_am_e2e's rungs."""
    text = section(doc("reports/default-search-am-2026-11-26.md"), "The default search end to end")
    data = results(E2E)
    hours, minutes = divmod(round(data["wall_seconds"] / 60), 60)
    find(text, rf"Wall time {hours} h {minutes:02d} min")
    rungs = data["rungs"]
    for row, rung in zip(table(text, "| rung | candidates |"), rungs, strict=True):
        assert row[0] == str(rung["rung"])
        agree(numbers(row[3])[0], rung["seconds"] / 60, f"rung {rung['rung']} training minutes")
        wall = rung.get("wall_seconds_from_progress", rung["wall_seconds"])
        agree(numbers(row[4])[0], wall / 60, f"rung {rung['rung']} wall minutes")
    boards = [{row["pattern"]: (i, row) for i, row in enumerate(rung["leaderboard"], 1)} for rung in rungs]
    finalists = table(text, "| pattern | known | rung 0")
    assert [plain(row[0]) for row in finalists] == [row["pattern"] for row in rungs[-1]["leaderboard"]]
    for row in finalists:
        pattern = plain(row[0])
        for cell, board in zip(row[2:5], boards, strict=True):
            rank, entry = board[pattern]
            printed = numbers(cell)
            assert int(printed[0]) == rank, f"{pattern}'s rank"
            agree(printed[-1], entry["score"], f"{pattern}'s score")
        assert float(row[5]) == boards[-1][pattern][1]["lr"], f"{pattern}'s rate"
    target = {row["pattern"]: row["score"] for row in rungs[-1]["leaderboard"]}
    target.update({p: v["score"] for p, v in data["rung1_others_at_target"]["scores"].items()})
    nine = [row["pattern"] for row in rungs[1]["leaderboard"]]
    assert set(target) == set(nine)
    rows = table(text, "| target rank | pattern | attention layers |")
    assert [plain(row[1]).split()[0] for row in rows] == sorted(nine, key=target.get)
    for i, row in enumerate(rows, 1):
        pattern = plain(row[1]).split()[0]
        assert row[0] == str(i) and int(row[2]) == pattern.count("A"), pattern
        agree(row[3], target[pattern], f"{pattern}'s target loss")
        assert [int(row[4]), int(row[5])] == [boards[1][pattern][0], boards[0][pattern][0]], pattern
    correlations = table(text, "| score against the 9 patterns' target loss")
    for row, board in zip(correlations, (boards[1], boards[0]), strict=True):
        value = bootstrap_rank_correlation([-board[p][1]["score"] for p in nine], [[target[p]] for p in nine],
                                           n_boot=N_BOOT, seed=BOOT_SEED)
        agree_all(numbers(row[1]) + numbers(row[2]), [value["spearman"], *value["spearman_ci"]], row[0])
    answer = data["answer"]
    assert answer["pattern"] == "AMAMAM" and answer["answer"] == "known"
    agree(find(text, rf"by {NUM} over the best new pattern")[1], answer["vs_known"]["difference"], "answer's lead")
