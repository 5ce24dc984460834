"""docs/reports/noise-ceiling-2026-11-25.md and transfer-lr-sweep-2026-11-25.md: the noise ceiling per budget,
the per-seed losses, the transfer's rank correlations and its table, recomputed from their results JSON.
"""

from __future__ import annotations

import numpy as np

from composer.statistics import (
    POWER_THRESHOLD,
    bootstrap_rank_correlation,
    noise_ceiling,
    paired_difference,
    seed_separation,
    seed_summary,
    spearman,
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

NOISE = "noise_ceiling-2026-11-25.json"


PROXY = "proxy_transfer-2026-11-24.json"


TRANSFER = "transfer_lr_sweep-2026-11-25.json"


def budget_losses() -> dict[int, dict[str, dict[int, float]]]:
    """tokens -> pattern -> seed -> validation loss, for the three budgets of the noise-ceiling table (500K from
    issue 10's runs in proxy_transfer, the others from noise_ceiling)."""
    report = results(NOISE)
    out = {row["tokens"]: {p: {int(s): v for s, v in row["losses"][p].items()} for p in row["patterns"]}
           for row in report["budgets"]}
    target = results(PROXY)["target"]
    assert target["tokens"] == 500_000 and target["seeds"] == report["seeds"]
    out[500_000] = {p: dict(zip(target["seeds"], target["losses"][p], strict=True)) for p in report["patterns"]}
    return out


def test_evidence_files_are_cited():
    cited = {"noise-ceiling-2026-11-25.md": (NOISE, PROXY), "transfer-lr-sweep-2026-11-25.md": (TRANSFER,)}
    for report, names in cited.items():
        text = doc(f"reports/{report}")
        for name in names:
            assert f"benchmarks/results/{name}" in text, f"{report} does not cite {name}"


def test_evidence_noise_ceiling_table():
    losses = budget_losses()
    eight = results(NOISE)["patterns"]
    seven = results(NOISE)["budgets"][1]["patterns"]
    rows = table(doc("reports/noise-ceiling-2026-11-25.md"), "| tokens | patterns | noise ceiling |")
    measured = [row for row in rows if "not measured" not in row[2]]
    assert {(int(r[0].replace(",", "")), int(r[1])) for r in measured} == \
        {(300_000, 8), (300_000, 7), (500_000, 8), (500_000, 7), (1_000_000, 7)}
    stored = {(row["tokens"], len(row["patterns"])): row for row in results(NOISE)["budgets"]}
    for row in measured:
        tokens, k = int(row[0].replace(",", "")), int(row[1])
        patterns = eight if k == 8 else seven
        power = seed_separation({p: losses[tokens][p] for p in patterns}, threshold=POWER_THRESHOLD)
        ceiling = power["noise_ceiling"]
        what = f"evidence.md noise-ceiling row {tokens:,} tokens / {k} patterns"
        agree(row[2], ceiling, f"{what}, noise ceiling")
        agree(row[3], ceiling / POWER_THRESHOLD, f"{what}, / threshold")
        agree(row[4], power["noise_ceiling_spearman_brown"], f"{what}, Spearman-Brown")
        agree(row[5], power["within_seed_std"], f"{what}, within-seed std")
        agree(row[6], power["between_model_std"], f"{what}, between-pattern std")
        agree(row[7], power["separation"], f"{what}, separation")
        assert row[8] == ("yes" if ceiling >= POWER_THRESHOLD else "no"), f"{what}, decides"
        if (tokens, k) in stored:  # the benchmark's own numbers, reproduced
            reproduced(stored[(tokens, k)]["noise_ceiling"], ceiling, f"{NOISE} {what}, noise ceiling")
            reproduced(stored[(tokens, k)]["separation"], power["separation"], f"{NOISE} {what}, separation")


def test_evidence_losses_per_seed():
    losses = budget_losses()
    rows = table(doc("reports/noise-ceiling-2026-11-25.md"), "| pattern | 300K seed 0 |")
    assert [plain(r[0]) for r in rows] == results(NOISE)["patterns"]
    columns = [(300_000, 0), (300_000, 1), (500_000, 0), (500_000, 1), (1_000_000, 0), (1_000_000, 1)]
    for row in rows:
        pattern = plain(row[0])
        for cell, (tokens, seed) in zip(row[1:], columns, strict=True):
            if pattern not in losses[tokens]:
                assert cell == "—", f"evidence.md: {pattern} has no {tokens:,}-token run, the doc prints {cell}"
            else:
                agree(cell, losses[tokens][pattern][seed], f"evidence.md loss {pattern} {tokens:,} seed {seed}")


def test_evidence_smaller_budgets_predict_1m():
    losses = budget_losses()
    seven = results(NOISE)["budgets"][1]["patterns"]
    mean = {t: [float(np.mean(list(losses[t][p].values()))) for p in seven] for t in losses}
    page = doc("reports/noise-ceiling-2026-11-25.md")
    match = find(page, f"the 500K ranking of the seven means predicts the 1M ranking at Spearman "
                                     f"{NUM}; 300K's predicts it at {NUM} \\(per seed: {NUM} for seed 0 and {NUM} "
                                     f"for seed 1")
    agree(match[1], spearman(mean[500_000], mean[1_000_000]), "evidence.md 500K->1M Spearman")
    agree(match[2], spearman(mean[300_000], mean[1_000_000]), "evidence.md 300K->1M Spearman")
    for group, seed in ((3, 0), (4, 1)):
        agree(match[group], spearman([losses[300_000][p][seed] for p in seven],
                                     [losses[1_000_000][p][seed] for p in seven]),
              f"evidence.md 300K->1M Spearman at seed {seed}")


def transfer_inputs(only_close: bool = False):
    """Scores, per-seed losses and seeds of the transfer's patterns; ``only_close`` drops the two attention-heavy
    outliers (the two highest mean losses), leaving the doc's "six close" patterns."""
    report = results(TRANSFER)["transfer"]
    patterns = report["patterns"]
    if only_close:
        patterns = sorted(patterns, key=lambda p: p["mean_loss"])[:-2]
    seeds = report["seeds"]
    sign = 1.0 if report["search"]["direction"] == "maximize" else -1.0
    return ([sign * p["score"] for p in patterns], [[p["losses"][str(s)] for s in seeds] for p in patterns], seeds)


def test_evidence_transfer_spearman_and_ceiling():
    text = section(doc("reports/transfer-lr-sweep-2026-11-25.md"), "What it says")
    report = results(TRANSFER)["transfer"]
    correlation, close_correlation = (
        bootstrap_rank_correlation(*transfer_inputs(only)[:2], n_boot=report["n_boot"], seed=BOOT_SEED)
        for only in (False, True))
    assert report["n_boot"] == N_BOOT
    reproduced(report["spearman"], correlation["spearman"], f"{TRANSFER} transfer Spearman")
    reproduced(report["spearman_ci"], correlation["spearman_ci"], f"{TRANSFER} transfer Spearman interval")
    match = find(text, f"The Spearman correlation is {NUM}, with a 95% interval of \\[{NUM}, {NUM}\\]; on the six "
                       f"close patterns it is {NUM}, interval \\[{NUM}, {NUM}\\]")
    agree_all([match[1], match[2], match[3]], [correlation["spearman"], *correlation["spearman_ci"]],
              "evidence.md transfer Spearman and its interval")
    agree_all([match[4], match[5], match[6]], [close_correlation["spearman"], *close_correlation["spearman_ci"]],
              "evidence.md transfer Spearman on the six close patterns and its interval")

    def ceiling(only: bool) -> dict:
        _, losses, seeds = transfer_inputs(only)
        return noise_ceiling({s: [row[i] for row in losses] for i, s in enumerate(seeds)})

    everything, six = ceiling(False), ceiling(True)
    reproduced(report["noise_ceiling"], everything["mean"], f"{TRANSFER} noise ceiling")
    match = find(text, f"The seeds agree at Spearman {NUM} \\(pairs {NUM}, {NUM}, {NUM}\\)")
    agree_all(list(match.groups()), [everything["mean"], *(p["spearman"] for p in everything["pairs"])],
              "evidence.md transfer noise ceiling and its pairs")
    agree(find(text, f"On the six close ones alone the ceiling is still {NUM}")[1], six["mean"],
          "evidence.md noise ceiling on the six close patterns")


def test_evidence_transfer_table():
    report = results(TRANSFER)["transfer"]
    seeds = report["seeds"]
    baselines = {b["name"]: b for b in report["baselines"]}
    rows = table(doc("reports/transfer-lr-sweep-2026-11-25.md"), "| search rank | pattern | score |")
    assert [plain(r[1]) for r in rows] == [p["source_pattern"] for p in report["patterns"]]
    higher = []
    for row, p in zip(rows, report["patterns"], strict=True):
        what = f"evidence.md transfer row {p['source_pattern']}"
        assert int(row[0]) == p["search_rank"], what
        agree(row[2], p["score"], f"{what}, score")
        assert plain(row[3]) == p["compact"], what
        assert float(row[4]) == p["lr"], f"{what}, lr"
        loss = seed_summary([p["losses"][str(s)] for s in seeds])
        agree(row[5], loss["mean"], f"{what}, mean loss")
        agree_all(numbers(row[6]), loss["ci"], f"{what}, 95% CI")
        agree_all(numbers(row[7]), loss["values"], f"{what}, per seed")
        baseline = baselines[p["baseline"]]
        assert row[8].endswith(f"vs `{baseline['compact']}`"), f"{what}: matched Llama"
        diff = paired_difference(per_seed(p["losses"], seeds), per_seed(baseline["losses"], seeds))
        reproduced(p["vs_baseline"]["mean"], diff["mean"], f"{TRANSFER} {what}, paired difference")
        agree_all(numbers(row[8]), [diff["mean"]], f"{what}, paired difference")
        agree_all(numbers(row[9]), diff["ci"], f"{what}, paired 95% CI")
        assert row[10] == diff["verdict"], f"{what}: the doc says {row[10]!r}, the JSON {diff['verdict']!r}"
        if diff["verdict"] == "higher":
            higher.append(diff["mean"])
    llamas = table(doc("reports/transfer-lr-sweep-2026-11-25.md"), "| matched Llama | non-embedding params |")
    assert {plain(r[0]) for r in llamas} == {b["compact"] for b in baselines.values()}
    by_compact = {b["compact"]: b for b in baselines.values()}
    for row in llamas:
        b = by_compact[plain(row[0])]
        what = f"evidence.md matched Llama {b['compact']}"
        assert int(row[1].replace(",", "")) == b["non_embedding_params"], what
        assert float(row[2]) == b["lr"], what
        loss = seed_summary([b["losses"][str(s)] for s in seeds])
        agree(row[3], loss["mean"], f"{what}, mean loss")
        agree_all(numbers(row[4]), loss["ci"], f"{what}, 95% CI")
        agree_all(numbers(row[5]), loss["values"], f"{what}, per seed")
    page = doc("reports/transfer-lr-sweep-2026-11-25.md")
    match = find(page, f"Seven of the eight hybrids are higher than their matched Llama, by "
                                     f"{NUM}-(\\d+\\.\\d+) nats")
    assert len(higher) == 7
    agree_all([match[1], match[2]], [min(higher), max(higher)], "evidence.md range of the hybrids' deficit")


def test_evidence_transfer_lr_sweep_table():
    sweep = results(TRANSFER)["lr_sweep"]
    names = {b["name"]: b["compact"] for b in results(TRANSFER)["transfer"]["baselines"]}
    rows = table(doc("reports/transfer-lr-sweep-2026-11-25.md"), "| architecture | 1e-3 | 2e-3 | 3e-3 | 6e-3 |")
    assert {plain(r[0]) for r in rows} == {names.get(m, m) for m in sweep["models"]}
    by_name = {names.get(m, m): entry for m, entry in sweep["models"].items()}
    for row in rows:
        entry = by_name[plain(row[0])]
        points = sorted(entry["points"], key=lambda point: point["lr"])
        assert [pt["lr"] for pt in points] == sweep["rates"]
        for cell, point in zip(row[1:], points, strict=True):
            agree(plain(cell), point["val_loss"], f"evidence.md sweep {plain(row[0])} at lr {point['lr']:g}")
            assert cell.startswith("**") == (point["lr"] == entry["chosen_lr"]), \
                f"evidence.md sweep {plain(row[0])}: the bold rate is not the chosen {entry['chosen_lr']:g}"
