"""The docs' headline figures, recomputed from the results JSON each doc cites (issue 29).

Every figure below is read out of a report's Markdown (``docs/reports/<study>.md``: a table row or a sentence
found by a stable anchor) and compared, at the precision the doc prints, with the same figure taken from
``benchmarks/results/*.json``:
recomputed with the project's own statistics (``composer.evidence``, with the bootstrap seed and replicate
count the benchmark used) where the doc derives it, read where the JSON stores it. Where both exist the test
also checks that the recomputation reproduces the stored value. So a figure edited in a doc, or a JSON
re-measured without its doc, turns this file red.

No training and no torch: numpy/scipy over a few JSON files (well under a second of bootstrap in all).
"""

from __future__ import annotations

import functools
import json
import math
import re
from pathlib import Path

import numpy as np
import pytest

from composer.evidence import (
    POWER_THRESHOLD,
    bootstrap_rank_correlation,
    compare_rank_correlations,
    noise_ceiling,
    paired_difference,
    proportion_interval,
    seed_separation,
    seed_summary,
    spearman,
)

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"

# The bootstrap every benchmark and `composer transfer` ran: composer.evidence's defaults, 10,000 replicates
# at seed 0 (composer/transfer.py's TransferConfig.n_boot, benchmarks/hybridize_evidence.py's n_boot=10_000).
N_BOOT, BOOT_SEED = 10_000, 0

# A printed number: optional sign, thousands separated by commas or not, optional decimals. "0, 12" is two
# numbers, "1,024" one.
NUMBER = r"[+-]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?"
NUM = f"({NUMBER})"


# ----------------------------------------------------------------------------------------------- helpers


@functools.cache
def doc(name: str) -> str:
    return (ROOT / "docs" / name).read_text()


@functools.cache
def results(name: str) -> dict:
    return json.loads((RESULTS / name).read_text())


def section(text: str, heading: str) -> str:
    """The text of the Markdown section whose heading line starts with ``heading``, up to the next heading of
    the same or a higher level (a ``# comment`` in a fenced code block is not a heading)."""
    lines, fenced, start, level = text.splitlines(keepends=True), False, None, 0
    for i, line in enumerate(lines):
        if line.startswith("```"):
            fenced = not fenced
            continue
        hashes = len(line) - len(line.lstrip("#"))
        if fenced or not hashes or line[hashes:hashes + 1] != " ":
            continue
        if start is None and line[hashes + 1:].startswith(heading):
            start, level = i, hashes
        elif start is not None and hashes <= level:
            return "".join(lines[start:i])
    assert start is not None, f"heading {heading!r} not found"
    return "".join(lines[start:])


def table(text: str, header: str) -> list[list[str]]:
    """The body rows (cells, stripped) of the Markdown table whose header line starts with ``header``."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith(header)), None)
    assert start is not None, f"table with header {header!r} not found"
    rows = []
    for line in lines[start + 2:]:  # skip the header and its |---| line
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    assert rows, f"table {header!r} has no rows"
    return rows


def plain(cell: str) -> str:
    """A cell without Markdown emphasis or code spans' backticks."""
    return cell.replace("**", "").replace("`", "").strip()


def numbers(cell: str) -> list[str]:
    """The numbers printed in a cell, as printed; code spans (layouts such as ``(AM)x9``) are skipped."""
    return re.findall(NUMBER, re.sub(r"`[^`]*`", "", cell.replace("**", "")))


def find(text: str, pattern: str) -> re.Match:
    """The first match of ``pattern`` in ``text``, where a space in ``pattern`` matches any run of whitespace
    (prose is wrapped); use ``NUM`` for a printed number."""
    match = re.search(pattern.replace("\\ ", " ").replace(" ", r"\s+"), text)
    assert match, f"anchor {pattern!r} not found in the doc"
    return match


def agree(printed: str, value: float, what: str) -> None:
    """``printed`` (a doc figure) is ``value`` (from the JSON) rounded to the decimals the doc shows."""
    text = printed.replace(",", "").replace("**", "").strip()
    decimals = len(text.split(".")[1]) if "." in text else 0
    shown = f"{value:.{decimals}f}"
    assert float(text) == float(shown), f"{what}: the doc prints {printed}, the JSON gives {value!r} ({shown})"


def agree_all(printed: list[str], values: list[float], what: str) -> None:
    assert len(printed) == len(values), f"{what}: the doc prints {printed}, the JSON has {len(values)} values"
    for text, value in zip(printed, values, strict=True):
        agree(text, value, what)


def reproduced(stored, recomputed, what: str) -> None:
    """A value the JSON stores equals its recomputation from the JSON's raw values (numbers or lists of them)."""
    pairs = zip(stored, recomputed, strict=True) if isinstance(stored, list) else [(stored, recomputed)]
    assert all(math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12) for a, b in pairs), \
        f"{what}: the JSON stores {stored!r}, its own raw values give {recomputed!r}"


def per_seed(losses: dict, seeds) -> dict[int, float]:
    return {int(s): losses[str(s)] for s in seeds}


# ----------------------------------------------------------------------------------------------- evidence.md


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


# ----------------------------------------------------------------------------------------------- comparisons


def check_comparison_table(rows: list[list[str]], models: dict[str, dict], names: dict[str, str], seeds,
                           columns: list[str], where: str) -> None:
    """A pipeline comparison table (model, layout, lr, mean ± std, CI, Δ vs Llama, CI, then ``columns``), each
    figure recomputed from the per-seed losses with composer.evidence or read from the model's entry."""
    assert {names[plain(r[0])] for r in rows} == set(models), f"{where}: the table's models"
    reference = per_seed(models["llama"]["val_losses"], seeds)
    for row in rows:
        m = models[names[plain(row[0])]]
        what = f"{where} row {m['model']}"
        assert plain(row[1]).startswith(m["pattern"]), f"{what}: layout {row[1]} against {m['pattern']}"
        assert float(row[2]) == m["chosen_lr"], f"{what}, lr"
        loss = seed_summary([m["val_losses"][str(s)] for s in seeds])
        reproduced([m["val_loss"], m["val_loss_std"]], [loss["mean"], loss["std"]], f"{what}: mean and std")
        agree_all(numbers(row[3]), [loss["mean"], loss["std"]], f"{what}, mean ± std")
        agree_all(numbers(row[4]), loss["ci"], f"{what}, 95% CI")
        if m["model"] == "llama":
            assert row[5] == row[6] == "—", what
        else:
            diff = paired_difference(per_seed(m["val_losses"], seeds), reference)
            reproduced(m["diff_vs_reference"], diff["mean"], f"{what}: paired difference to Llama")
            agree_all(numbers(row[5]), [diff["mean"]], f"{what}, Δ vs Llama")
            agree_all(numbers(row[6]), diff["ci"], f"{what}, Δ 95% CI")
        for cell, column in zip(row[7:], columns, strict=True):
            if column in ("params", "active_params"):
                assert cell.endswith("M"), f"{what}, {column}"
                agree(cell[:-1], m[column] / 1e6, f"{what}, {column} (millions)")
            else:
                agree(cell, m[column], f"{what}, {column}")


def check_paired_rows(rows, models, names, seeds, where: str) -> None:
    """Rows ``a − b | Δ | CI | verdict``: paired_difference(a, b) over the seeds."""
    for row in rows:
        a, b = (names[plain(part).split(" (")[0].strip()] for part in row[0].split("−"))
        diff = paired_difference(per_seed(models[a]["val_losses"], seeds), per_seed(models[b]["val_losses"], seeds))
        what = f"{where}: {a} − {b}"
        agree_all(numbers(row[1]), [diff["mean"]], f"{what}, Δ")
        agree_all(numbers(row[2]), diff["ci"], f"{what}, 95% CI")
        assert row[3] == diff["verdict"], f"{what}: the doc says {row[3]!r}, the JSON {diff['verdict']!r}"


def check_power(text: str, models: dict[str, dict], seeds, where: str, prefix: str) -> dict:
    """"the seed spread within a model (std X) ... spread between models (Y) ... (Spearman Z": seed_separation."""
    power = seed_separation({name: per_seed(m["val_losses"], seeds) for name, m in models.items()})
    match = find(text, f"the seed spread within a model \\(std {NUM}\\) {prefix}spread between models \\({NUM}\\)"
                       f", and the three seeds rank the[^(]*\\(Spearman {NUM}")
    agree_all(list(match.groups()), [power["within_seed_std"], power["between_model_std"], power["noise_ceiling"]],
              f"{where}: power (within-seed std, between-model std, seed agreement)")
    return power


PUBLISHED = "published_hybrids-2026-11-25.json"
PUBLISHED_NAMES = {"samba": "samba", "nemotron-h": "nemotron-h", "linear-7to1": "linear-7to1", "jamba": "jamba",
                   "gdn-h1": "gdn-h1", "composite": "composite", "composite (searched)": "composite",
                   "qwen3-next": "qwen3-next", "llama": "llama", "Samba": "samba", "Nemotron-H": "nemotron-h"}


def test_published_hybrids():
    text = doc("reports/published-hybrids-2026-11-25.md")
    assert f"benchmarks/results/{PUBLISHED}" in text
    report = results(PUBLISHED)
    seeds = report["seeds"]
    models = {m["model"]: m for m in report["models"]}
    rows = table(text, "| model | layout at demo-4m | lr |")
    check_comparison_table(rows, models, PUBLISHED_NAMES, seeds,
                           ["tokens_per_s", "params", "active_params", "kv_cache_bytes_per_token", "state_bytes"],
                           "published-hybrids.md")
    composite = per_seed(models["composite"]["val_losses"], seeds)
    family_rows = table(text, "| family − composite |")
    assert {r[0] for r in family_rows} == set(models) - {"composite", "llama"}
    for row in family_rows:
        diff = paired_difference(per_seed(models[row[0]]["val_losses"], seeds), composite)
        what = f"published-hybrids.md: {row[0]} − composite"
        agree_all(numbers(row[1]), [diff["mean"]], f"{what}, Δ")
        agree_all(numbers(row[2]), diff["ci"], f"{what}, 95% CI")
        assert row[3] == diff["verdict"], what
    # "The top four cannot be told apart": three paired differences in prose.
    match = find(text, f"Samba − Nemotron-H is {NUM} \\[{NUM}, {NUM}\\], Nemotron-H − linear-7to1 {NUM} "
                       f"\\[{NUM}, {NUM}\\] and linear-7to1 − Jamba {NUM} \\[{NUM}, {NUM}\\]")
    for index, (a, b) in enumerate((("samba", "nemotron-h"), ("nemotron-h", "linear-7to1"), ("linear-7to1", "jamba"))):
        diff = paired_difference(per_seed(models[a]["val_losses"], seeds), per_seed(models[b]["val_losses"], seeds))
        agree_all(list(match.groups()[3 * index: 3 * index + 3]), [diff["mean"], *diff["ci"]],
                  f"published-hybrids.md: {a} − {b}")
    gains = [-m["diff_vs_reference"] for name, m in models.items() if name != "llama"]
    match = find(text, f"Every hybrid beats Llama by far\\*\\* at this budget: {NUM} to {NUM} nats")
    agree_all([match[1], match[2]], [min(gains), max(gains)], "published-hybrids.md: the hybrids' lead over Llama")
    power = check_power(text, models, seeds, "published-hybrids.md", prefix="is a tenth of the ")
    reproduced(report["power"]["separation"], power["separation"], f"{PUBLISHED} separation")


HALVING = "halving_answer_vs_published-2026-11-26.json"
HALVING_NAMES = {"search's answer": "composite", "answer": "composite", "samba": "samba", "Samba": "samba",
                 "nemotron-h": "nemotron-h", "Nemotron-H": "nemotron-h", "llama": "llama", "Llama": "llama"}


def test_search_answer_against_what_shipped():
    text = section(doc("reports/halving-answer-vs-published-2026-11-26.md"), "The answer against what shipped")
    assert f"benchmarks/results/{HALVING}" in text
    report = results(HALVING)
    comparison = report["comparison"]
    seeds = comparison["seeds"]
    models = {m["model"]: m for m in comparison["models"]}
    check_comparison_table(table(text, "| model | layout at demo-4m | lr |"), models, HALVING_NAMES, seeds,
                           ["params", "kv_cache_bytes_per_token", "state_bytes"], "search.md answer table")
    paired = table(text, "| difference | Δ | 95% CI | verdict |")
    check_paired_rows(paired, models, HALVING_NAMES, seeds, "search.md")
    for row in paired:  # the JSON's own paired block holds the same numbers
        a, b = (HALVING_NAMES[plain(part).split(" (")[0].strip()] for part in row[0].split("−"))
        stored = report["paired"][f"{a} - {b}"]
        diff = paired_difference(per_seed(models[a]["val_losses"], seeds), per_seed(models[b]["val_losses"], seeds))
        reproduced(stored["mean"], diff["mean"], f"{HALVING} paired {a} - {b}")
        assert stored["verdict"] == diff["verdict"], f"{HALVING} paired {a} - {b}: verdict"
    match = find(text, f"Per seed \\(0, 1, 2\\): the answer {NUM}, {NUM}, {NUM}; Samba {NUM}, {NUM}, {NUM}; "
                       f"Nemotron-H {NUM}, {NUM}, {NUM}; Llama {NUM}, {NUM}, {NUM}\\.")
    for index, name in enumerate(("composite", "samba", "nemotron-h", "llama")):
        agree_all(list(match.groups()[3 * index: 3 * index + 3]),
                  [models[name]["val_losses"][str(s)] for s in seeds], f"search.md per-seed losses of {name}")
    power = check_power(text, models, seeds, "search.md", prefix="is 1/25 of the ")
    assert round(power["separation"]) == 25, f"search.md: the spread between models is 1/{power['separation']:.1f}"
    behind = [models["llama"]["val_loss"] - m["val_loss"] for name, m in models.items() if name != "llama"]
    match = find(text, f"Llama is {NUM}-(\\d+\\.\\d+) behind every hybrid")
    agree_all([match[1], match[2]], [min(behind), max(behind)], "search.md: Llama's deficit to the hybrids")


DEFAULT_ANSWER = "default_answer_vs_published-2026-11-26.json"
DEFAULT_SEARCH = "default_search_amsd-2026-11-26.json"
HALVING_SEARCH = "search_successive_halving-2026-11-25.json"
DEFAULT_NAMES = {"default search's answer": "answer", "halving search's answer": "composite", "samba": "samba",
                 "nemotron-h": "nemotron-h", "llama": "llama"}


def test_search_default_answer_against_what_shipped():
    """The report's section on the default one-shot search (proxy scores from its leaderboard JSON) and on its
    answer at the target, paired seed by seed with the families' stored runs (the halving comparison's JSON)."""
    from composer.pattern import n_layers, parse_pattern

    page = doc("reports/default-answer-vs-published-2026-11-26.md")
    text = section(page, "The default search's answer against what shipped")
    for name in (DEFAULT_ANSWER, DEFAULT_SEARCH):
        assert f"benchmarks/results/{name}" in text
    search, report = results(DEFAULT_SEARCH), results(DEFAULT_ANSWER)
    board = search["leaderboard"]
    scores = {row["pattern"]: row["score"] for row in board}

    # the search at the proxy
    match = find(text, f"\\*\\*The search\\.\\*\\* {NUM} candidates")
    assert int(match[1]) == len(board) + len(search["failures"]), "search.md: candidates of the default search"
    hours, minutes, seconds = (int(part) for part in search["wall_time"].split()[0].split(":"))
    match = find(text, f"It took \\*\\*{NUM} h {NUM} min\\*\\* of wall time with two workers; training time summed "
                       f"over candidates was {NUM} min")
    assert (int(match[1]), int(match[2])) == divmod(round(hours * 60 + minutes + seconds / 60), 60), "wall time"
    agree(match[3], search["training_seconds_summed"] / 60, "search.md: training minutes summed")
    vs_known = search["best"]["vs_known"]
    assert vs_known["best_new"]["pattern"] == board[0]["pattern"] == search["best"]["pattern"]
    match = find(text, f"The answer is \\*\\*`(\\w+)`\\*\\*, a new pattern: {NUM}, against the best known layout, "
                       f"Nemotron-H's `(\\w+)`, at {NUM}\\. That is {NUM} on one seed")
    assert (match[1], match[3]) == (board[0]["pattern"], vs_known["best_known"]["pattern"])
    assert vs_known["best_known"]["name"] == "nemotron-h" and vs_known["answer"] == "new"
    margin = board[0]["score"] - vs_known["best_known"]["score"]
    agree_all([match[2], match[4], match[5]], [board[0]["score"], vs_known["best_known"]["score"], margin],
              "search.md: the default search's answer against the best known layout")
    reproduced(vs_known["difference"], margin, f"{DEFAULT_SEARCH} difference")
    match = find(text, f"Then `(\\w+)` {NUM}, `(\\w+)` {NUM}, `(\\w+)` {NUM}\\. Llama `(\\w+)` scored {NUM} and "
                       f"`(\\w+)` {NUM}\\.")
    assert [match[1], match[3], match[5]] == [row["pattern"] for row in board[1:4]], "search.md: ranks 2 to 4"
    known = {row["known"]: row["pattern"] for row in board if row["known"]}
    assert [match[7], match[9]] == [known["llama"], known["composer-paper"]]
    agree_all([match[i] for i in (2, 4, 6, 8, 10)], [scores[match[i]] for i in (1, 3, 5, 7, 9)],
              "search.md: proxy scores of the default search")
    # the same evaluation at the halving search's rung 1 (the same budget), and that search's answer
    rung1 = {row["pattern"]: row["score"] for row in results(HALVING_SEARCH)["rungs"][1]["scored"]}
    match = find(text, f"Nemotron-H's `SMSAMS` scored {NUM} here and {NUM} at the successive-halving search's rung 1")
    assert scores["SMSAMS"] == rung1["SMSAMS"], "the evaluation did not repeat exactly across the two searches"
    agree_all([match[1], match[2]], [scores["SMSAMS"], rung1["SMSAMS"]], "search.md: SMSAMS in both searches")
    match = find(text, f"the halving search's `SDMMSD` \\({NUM}\\) is better than anything the one-shot search tried")
    agree(match[1], rung1["SDMMSD"], "search.md: SDMMSD at rung 1")
    assert rung1["SDMMSD"] < min(scores.values()) and "SDMMSD" not in scores
    match = find(text, f"The halving search found it by screening {NUM} candidates")
    assert int(match[1]) == len(results(HALVING_SEARCH)["rungs"][0]["scored"])
    top = [row["pattern"] for row in board if row["lr"] == 3e-3]
    match = find(text, f"\\*\\*{NUM} of {NUM} candidates chose 3e-3, the top of the two-rate grid\\.\\*\\* Only "
                       f"`(\\w+)` chose 1e-3")
    assert (int(match[1]), int(match[2])) == (len(top), len(board)), "search.md: candidates at the top rate"
    assert [row["pattern"] for row in board if row["lr"] != 3e-3] == [match[3]] and scores[match[3]]
    match = find(text, f"At 400K tokens and 6 layers, `SSSSMS` beat Nemotron-H's nearest layout by {NUM}")
    agree(match[1], -vs_known["difference"], "search.md: the proxy margin of SSSSMS")

    # at the target
    answer, seeds = report["answer"], report["seeds"]
    assert report["validation"]["same"] and report["files"]["families"].endswith(HALVING)
    match = find(text, f"The answer is stacked to `demo-4m` as `([^`]+)`: {NUM} layers")
    assert match[1] == answer["pattern"] and int(match[2]) == n_layers(parse_pattern(answer["pattern"]))
    assert parse_pattern(answer["pattern"]).startswith(board[0]["pattern"]), "the target stacks the search's answer"
    sweep = {float(lr): loss for lr, loss in answer["lr_sweep"].items()}
    match = find(text, f"The sweep's losses were {NUM} / \\*\\*{NUM}\\*\\* / {NUM} / {NUM} "
                       f"at (\\S+) / (\\S+) / (\\S+) / (\\S+)\\.")
    assert [float(rate) for rate in match.groups()[4:]] == sorted(sweep), "search.md: the sweep's rates"
    agree_all(list(match.groups()[:4]), [sweep[lr] for lr in sorted(sweep)], "search.md: the answer's rate sweep")
    assert min(sweep, key=sweep.get) == answer["chosen_lr"] == float(match[6]) not in (min(sweep), max(sweep))
    match = find(text, f"The same {NUM} validation tokens were used")
    assert int(match[1].replace(",", "")) == report["validation"]["val_tokens"]

    families = {m["model"]: m for m in results(HALVING)["comparison"]["models"]}
    against = {("composite" if a["model"] == "stored composite" else a["model"]): a for a in report["against"]}
    assert set(against) == set(families) and seeds == results(HALVING)["comparison"]["seeds"]
    losses = {"answer": per_seed(answer["val_losses"], seeds),
              **{name: per_seed(m["val_losses"], seeds) for name, m in families.items()}}
    rows = table(text, "| model | layout at demo-4m | lr |")
    assert {DEFAULT_NAMES[plain(row[0])] for row in rows} == set(losses), "search.md: the default answer's table"
    diffs = {}
    for row in rows:
        name = DEFAULT_NAMES[plain(row[0])]
        entry = answer if name == "answer" else families[name]
        what = f"search.md default answer table, row {name}"
        assert plain(row[1]).startswith(entry["pattern"]) and float(row[2]) == entry["chosen_lr"], what
        loss = seed_summary(list(losses[name].values()))
        reproduced([entry["val_loss"], entry["val_loss_std"]], [loss["mean"], loss["std"]], f"{what}: mean and std")
        agree_all(numbers(row[3]), [loss["mean"], loss["std"]], f"{what}, mean ± std")
        if name == "answer":
            assert row[4:] == ["—", "—", "—"], what
            continue
        reproduced(against[name]["val_loss"], loss["mean"], f"{DEFAULT_ANSWER} {name} mean")
        diffs[name] = diff = paired_difference(losses["answer"], losses[name])
        stored = against[name]["diff"]
        reproduced([stored["mean"], *stored["ci"], *stored["differences"]], [diff["mean"], *diff["ci"],
                   *diff["differences"]], f"{DEFAULT_ANSWER} answer - {name}")
        agree_all(numbers(row[4]), [diff["mean"]], f"{what}, answer − model")
        agree_all(numbers(row[5]), diff["ci"], f"{what}, 95% CI")
        assert row[6] == diff["verdict"] == stored["verdict"], what
    match = find(text, f"Per seed \\(0, 1, 2\\) the answer scored {NUM}, {NUM} and {NUM}\\. Its 95% CI is "
                       f"\\[{NUM}, {NUM}\\]; it has {NUM}M parameters, no KV cache")
    assert seeds == [0, 1, 2] and answer["kv_cache_bytes_per_token"] == 0
    agree_all(list(match.groups()), [*losses["answer"].values(), *seed_summary(list(losses["answer"].values()))["ci"],
                                     answer["params"] / 1e6], "search.md: the default answer per seed, CI, size")

    # reading it
    match = find(text, f"It is {NUM} behind Samba and {NUM} behind Nemotron-H, and both intervals exclude 0")
    agree_all([match[1], match[2]], [diffs["samba"]["mean"], diffs["nemotron-h"]["mean"]],
              "search.md: the answer behind the families")
    assert diffs["samba"]["ci"][0] > 0 and diffs["nemotron-h"]["ci"][0] > 0
    agree(find(text, f"It still beats Llama by {NUM}")[1], -diffs["llama"]["mean"], "search.md: ahead of Llama")
    match = find(text, f"The successive-halving answer beats it by {NUM} \\[{NUM}, {NUM}\\]")
    agree_all(list(match.groups()), [diffs["composite"]["mean"], *diffs["composite"]["ci"]],
              "search.md: the halving answer ahead of the default one")


# ----------------------------------------------------------------------------------------------- recall.md


RECALL = "recall_vs_length_lr_sweep-2026-11-25.json"
RECALL_SHARED_RATE = "recall_vs_length-2026-11-25.json"


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


def test_recall_table():
    text = doc("reports/recall-vs-length-2026-11-25.md")
    assert f"benchmarks/results/{RECALL}" in text
    report = results(RECALL)
    settings = report["settings"]
    lengths = [str(n) for n in settings["lengths"]]
    sequences = int(find(text, f"tested on {NUM} sequences per length")[1])
    patterns = {p["pattern"]: p for p in report["patterns"]}
    rows = table(text, "| pattern | rate chosen |")
    assert [plain(r[0]).split()[0] for r in rows] == list(patterns)
    for row in rows:
        p = patterns[plain(row[0]).split()[0]]
        what = f"recall.md row {p['pattern']}"
        assert float(row[1]) == p["lr"], f"{what}, rate chosen"
        for cell, n in zip(row[2:5], lengths, strict=True):
            accuracy = p["accuracy_by_length"][n]
            queries = sequences * (int(n) // settings["kv_ratio"])
            interval = proportion_interval(round(accuracy * queries), queries)  # Wilson, over the test queries
            reproduced(p["interval_by_length"][n], interval, f"{RECALL} {what} at {n} tokens, Wilson interval")
            agree_all(numbers(cell), [accuracy, *interval], f"{what} at {n} tokens (accuracy, Wilson interval)")
        assert row[5] == ("0" if p["kv_cache_bytes_per_token"] == 0 else f"{p['kv_cache_bytes_per_token']} B"), \
            f"{what}, KV cache per token"
        agree_all(numbers(row[6]), [p["cache_bytes_at_longest"] / 1024], f"{what}, cache at 1,024 (KiB)")
        agree_all(numbers(row[7]), [p["state_bytes"] / 1024], f"{what}, fixed state (KiB)")

    sweep_rows = table(text, "| pattern | lr 1e-3 | lr 3e-3 |")
    assert [plain(r[0]) for r in sweep_rows] == list(patterns)
    for row in sweep_rows:
        p = patterns[plain(row[0])]
        for cell, rate in zip(row[1:], settings["lrs"], strict=True):
            point = p["sweep"][f"{rate:g}"]
            agree_all(numbers(cell), [point["mean"], point["train_loss"]],
                      f"recall.md sweep {p['pattern']} at lr {rate:g} (mean accuracy / final training loss)")
            assert cell.startswith("**") == (rate == p["lr"]), f"recall.md sweep {p['pattern']}: bold rate"

    # "The 3e-3 runs repeat this page's first measurement ... to the last digit".
    shared = {p["pattern"]: p for p in results(RECALL_SHARED_RATE)["patterns"]}
    assert results(RECALL_SHARED_RATE)["settings"]["lr"] == 0.003 and set(shared) == set(patterns)
    for name, p in patterns.items():
        assert p["sweep"]["0.003"]["mean"] == shared[name]["mean"], f"recall.md: {name} at 3e-3 is not a repeat"


def test_recall_ratios():
    text = doc("reports/recall-vs-length-2026-11-25.md")
    patterns = {p["pattern"]: p for p in results(RECALL)["patterns"]}
    longest = str(results(RECALL)["settings"]["lengths"][-1])
    attention = patterns["AA"]
    fixed = [patterns["SS"], patterns["DD"]]
    below = [attention["accuracy_by_length"][longest] / p["accuracy_by_length"][longest] for p in fixed]
    larger = [attention["cache_bytes_at_longest"] / p["cache_bytes_at_longest"] for p in fixed]
    match = find(text, f"At 1,024 tokens that is {NUM} to {NUM} times below attention, whose cache there is {NUM} "
                       f"to {NUM} times larger \\({NUM} KiB against {NUM} and {NUM} KiB\\)")
    agree_all([match[1], match[2]], sorted(below), "recall.md: fixed states below attention at 1,024 tokens")
    agree_all([match[3], match[4]], sorted(larger), "recall.md: attention's cache over the fixed states'")
    agree_all([match[5], match[6], match[7]],
              [attention["cache_bytes_at_longest"] / 1024, *(p["cache_bytes_at_longest"] / 1024 for p in fixed)],
              "recall.md: caches at 1,024 tokens (KiB)")
    match = find(text, f"Mamba-2 and Gated DeltaNet score {NUM} and {NUM} at 4 pairs, {NUM} and {NUM} at 16, "
                       f"{NUM} and {NUM} at 64")
    lengths = [str(n) for n in results(RECALL)["settings"]["lengths"]]
    agree_all(list(match.groups()), [p["accuracy_by_length"][n] for n in lengths for p in fixed],
              "recall.md: Mamba-2 and Gated DeltaNet per length")
    shared = {p["pattern"]: p for p in results(RECALL_SHARED_RATE)["patterns"]}
    match = find(text, f"`AA` scores {NUM} / {NUM} / {NUM} at 1e-3 and {NUM} / {NUM} / {NUM} at 3e-3")
    agree_all(list(match.groups()),
              [attention["accuracy_by_length"][n] for n in lengths] +
              [shared["AA"]["accuracy_by_length"][n] for n in lengths], "recall.md: AA at its two rates")
    # search.md quotes the same ratios.
    match = find(section(doc("reports/halving-answer-vs-published-2026-11-26.md"), "The answer against what shipped"),
                 r"mixers (\d+)-(\d+) times below attention")
    agree_all([match[1], match[2]], sorted(below), "search.md: fixed states below attention (recall.md's ratios)")


# ----------------------------------------------------------------------------------------------- hybridize.md


HYBRIDIZE = "hybridize_evidence-2026-11-25.json"


def test_hybridize_table_and_differences():
    text = doc("reports/hybridize-evidence-2026-11-25.md")
    assert f"benchmarks/results/{HYBRIDIZE}" in text
    report = results(HYBRIDIZE)
    stored = {row["model"]: row for row in report["rows"]}
    rows = table(text, "| model | pattern | mean val loss |")
    assert [r[0] for r in rows] == list(stored)
    for row in rows:
        r = stored[row[0]]
        what = f"hybridize.md row {r['model']}"
        assert plain(row[1]) == r["pattern"], what
        loss = seed_summary(list(r["losses"].values()))
        agree(row[2], loss["mean"], f"{what}, mean val loss")
        if loss["ci"] is None:
            assert row[3] == "n/a", what
        else:
            agree_all(numbers(row[3]), loss["ci"], f"{what}, 95% CI")
        agree_all(numbers(row[4]), loss["values"], f"{what}, per seed")
        assert row[5] == f"{r['cache_bytes']:,} B", f"{what}, cache"

    seeds = report["seeds"]
    b, c, d = (per_seed(stored[name]["losses"], seeds) for name in list(stored)[1:])
    b_minus_c, b_minus_d = paired_difference(b, c), paired_difference(b, d)
    reproduced(report["b_minus_c"]["mean"], b_minus_c["mean"], f"{HYBRIDIZE} b_minus_c")
    reproduced(report["b_minus_d"]["mean"], b_minus_d["mean"], f"{HYBRIDIZE} b_minus_d")
    for label, diff in (("(b) - (c), searched minus uniform", b_minus_c), ("(b) - (d), distilled minus scratch",
                                                                          b_minus_d)):
        match = find(text, f"{re.escape(label)}: {NUM}, 95% CI \\[{NUM}, {NUM}\\], ([a-z ]+) \\(paired")
        agree_all(list(match.groups()[:3]), [diff["mean"], *diff["ci"]], f"hybridize.md {label}")
        assert match[4] == diff["verdict"], f"hybridize.md {label}: verdict"
    # The prose repeats them, rounded.
    match = find(text, f"lower than the uniform placement \\(layers 4 and 12\\) by {NUM} nats, 95% CI "
                       f"\\[{NUM}, {NUM}\\]")
    agree_all(list(match.groups()), [-b_minus_c["mean"], *b_minus_c["ci"]], "hybridize.md: searched - uniform (prose)")
    teacher = stored["(a) teacher"]
    match = find(text, f"It comes within {NUM} of the teacher, with {NUM}% of its cache")
    agree(match[1], stored["(b) searched placement, distilled"]["mean"] - teacher["mean"],
          "hybridize.md: searched placement against the teacher")
    agree(match[2], 100 * stored["(b) searched placement, distilled"]["cache_bytes"] / teacher["cache_bytes"],
          "hybridize.md: cache share of the searched placement (%)")
    match = find(text, f"at both seeds: {NUM} against {NUM} and {NUM}")
    agree_all(list(match.groups()), [seed_summary(list(b.values()))["mean"], *d.values()],
              "hybridize.md: distilled against scratch")
    agree_all(list(find(text, f"the paired t interval, \\[{NUM}, {NUM}\\]").groups()), b_minus_d["ci"],
              "hybridize.md: distilled - scratch interval (prose)")
    agree_all(list(find(text, f"The difference is {NUM} and {NUM} at the two seeds").groups()),
              [-x for x in b_minus_d["differences"]], "hybridize.md: distilled - scratch per seed (prose)")


def test_hybridize_supernet_ranking():
    text = doc("reports/hybridize-evidence-2026-11-25.md")
    report = results(HYBRIDIZE)
    placements = report["supernet_vs_distilled"]["placements"]
    seeds = report["seeds"]
    # benchmarks/hybridize_evidence.py: scores are the negated supernet losses, in the supernet's order.
    correlation = bootstrap_rank_correlation([-p["supernet_val_loss"] for p in placements],
                                             [[p["distilled"][str(s)] for s in seeds] for p in placements],
                                             n_boot=N_BOOT, seed=BOOT_SEED)
    reproduced(report["supernet_vs_distilled"]["spearman"], correlation["spearman"], f"{HYBRIDIZE} Spearman")
    assert correlation["spearman_ci"] == report["supernet_vs_distilled"]["spearman_ci"]
    match = find(text, f"Supernet score vs distilled loss over {NUM} placements: Spearman {NUM}, 95% CI "
                       f"\\[{NUM}, {NUM}\\]")
    assert int(match[1]) == len(placements)
    agree_all(list(match.groups()[1:]), [correlation["spearman"], *correlation["spearman_ci"]],
              "hybridize.md: supernet score against distilled loss")
    assert int(find(text, f"{NUM} placements scored")[1]) == report["placements_scored"]
    rows = table(text, "| kept layers | supernet val loss |")
    assert len(rows) == len(placements)
    for row, p in zip(rows, placements, strict=True):
        what = f"hybridize.md placement {p['kept']}"
        assert [int(x) for x in numbers(row[0])] == p["kept"], what
        agree(row[1], p["supernet_val_loss"], f"{what}, supernet val loss")
        agree_all(numbers(row[2]), [p["distilled"][str(s)] for s in seeds], f"{what}, distilled per seed")


@pytest.mark.parametrize("printed, value, ok", [("0.05", 0.0476, True), ("-0.05", -0.0476, True),
                                                ("+0.079", 0.0785, True), ("1,827", 1826.85, True),
                                                ("0.04", 0.0476, False), ("0.86", 0.857, True)])
def test_agree_reads_the_printed_precision(printed, value, ok):
    if ok:
        agree(printed, value, "example")
    else:
        with pytest.raises(AssertionError):
            agree(printed, value, "example")


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
    from composer.evidence import paired_difference

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


TRUST = "answer_trust-2026-11-27.json"


def test_search_verdict_cases():
    """The report's verdict table: each case's interval and answer recomputed from the stored rows with the
    project's rule (search.verdict.compare_with_known) and the stored seed spread."""
    from search.lm import get_lm_budget
    from search.verdict import SeedNoise, compare_with_known
    from tests.search.records import recorded

    data = results(TRUST)
    where = get_lm_budget("rung-cpu-2").seed_noise.setting  # the stored rows are rung-cpu-2's at demo-4m
    noise = SeedNoise(**data["seed_noise"], setting=where)
    text = section(doc("reports/answer-trust-2026-11-27.md"), "The verdict on three cases")
    cases = dict(zip(["one pattern as three finalists", "the default search's last rung",
                      "the `AMSD` halving answer, 3 seeds"], data["verdicts"].values(), strict=True))
    rows = table(text, "| case | new | known")
    assert [row[0] for row in rows] == list(cases)
    for cells, case in zip(rows, cases.values(), strict=True):
        again = compare_with_known([recorded(row, setting=where) for row in case["rows"]], maximize=False, noise=noise)
        stored = case["verdict"]
        assert again["answer"] == stored["answer"] == cells[6]
        reproduced(stored["difference"], again["difference"], f"{cells[0]}: difference")
        reproduced(stored["ci"], again["ci"], f"{cells[0]}: interval")
        agree(cells[3], again["difference"], f"{cells[0]}: difference")
        agree_all(numbers(cells[4]), again["ci"], f"{cells[0]}: interval")
        assert ("paired" in cells[5]) == again["interval"].startswith("paired")


def test_search_finalist_cost_table():
    """The report's cost table against the stored analytic costs (tests/benchmarks/test_finalist_costs.py
    recomputes them with the accounting)."""
    data = results(TRUST)["costs"]["rows"]
    text = section(doc("reports/answer-trust-2026-11-27.md"), "The finalists' cost on their models")
    rows = table(text, "| pattern | at the target | layers")
    assert len(rows) == len(data)
    for cells, row in zip(rows, data, strict=True):
        assert plain(cells[0]).split()[0] == row["pattern"] and (row["name"] or "") in cells[0]
        from composer.pattern import compact_pattern

        assert plain(cells[1]) == compact_pattern(row["at_target"]) and int(cells[2]) == row["n_layers"]
        agree(numbers(cells[3])[0], row["params"] / 1e6, "params (M)")
        assert numbers(cells[4]) == [f"{row['kv_bytes_per_token']:,}"]
        for cell, size in zip(cells[5:8], [row["state_bytes"], row["cache_bytes"]["4096"],
                                          row["cache_bytes"]["32768"]], strict=True):
            number, unit = cell.split()
            scale = {"B": 1, "KiB": 1024, "MiB": 1024**2}[unit]
            agree(number, size / scale, f"{row['pattern']}: {cell}")
        agree(cells[8], row["decode"]["decode_tokens_per_s"], f"{row['pattern']}: decode tokens/s")


def test_recall_probe_table():
    """docs/recall.md's probe table against the stored runs (accuracy per length, steps, seed, minutes)."""
    runs = results("recall_probe-2026-11-27.json")["runs"]
    text = section(doc("reports/recall-probe-2026-11-27.md"), "A probe for a search's finalists")
    rows = table(text, "| mixers (from) | stem | Mamba-2 rate | steps per length")
    assert len(rows) == len(runs)
    by_key = {(run["pattern"], run["shift_stem"], run["mamba2_rate"], run["steps_per_length"], run["seed"]): run
              for run in runs}
    for cells in rows:
        stem = {"yes": True, "no": False}[cells[1]]
        mamba2_rate = None if cells[2] == "-" else float(cells[2])
        run = by_key[(plain(cells[0]).split()[0], stem, mamba2_rate, int(cells[3].replace(",", "")), int(cells[4]))]
        agree_all([plain(cell) for cell in cells[5:8]], [run["accuracy_by_length"][n] for n in ("64", "256", "1024")],
                  f"{cells[0]} accuracy")
        agree(numbers(cells[8])[0], run["seconds"] / 60, f"{cells[0]} minutes")


def test_recall_probe_variants_table():
    """docs/recall.md's table of SSAS under changed probe settings against the stored runs."""
    variants = results("recall_probe-2026-11-27.json")["stem_variants"]
    text = section(doc("reports/recall-probe-2026-11-27.md"), "A probe for a search's finalists")
    rows = table(text, "| pattern | what changed")
    assert len(rows) == len(variants)
    by_key = {(run["pattern"], run["variant"]): run for run in variants}
    for cells in rows:
        run = by_key[(plain(cells[0]), cells[1])]
        shown = [plain(cell) for cell in cells[2:5]]
        for length, cell in zip(("64", "256", "1024"), shown, strict=True):
            if cell == "-":
                assert length not in run["accuracy_by_length"], f"{cells[:2]}: {length} was measured"
            else:
                agree(cell, run["accuracy_by_length"][length], f"{cells[:2]} accuracy at {length}")
        agree(cells[5], run["train_loss"], f"{cells[:2]} final training loss")
        agree(numbers(cells[6])[0], run["minutes"], f"{cells[:2]} minutes")


TRAINED_RECALL = {"128": "trained_recall_128_target-2026-11-28.json",
                  "512": "trained_recall_512_repeat50-2026-11-28.json",
                  "256": "trained_recall_256_repeat100-2026-11-28.json"}
TRAINED_LAYOUTS = {"Llama": "llama", "SDDMDM": "SDDMDM:repeat", "Nemotron-H": "nemotron-h", "SDDMAS": "SDDMAS:keep",
                   "Samba": "samba"}


def trained_run(cells: list[str]) -> dict:
    """The stored run of a docs/recall.md trained-recall row: its setting's file, its layout, seed 0."""
    stored = results(TRAINED_RECALL[cells[0]])
    return stored["layouts"][TRAINED_LAYOUTS[plain(cells[1]).split()[0]]]["seeds"]["0"]


def agree_interval(cell: str, value: float, ci: list[float], what: str) -> None:
    """A cell printed as ``+0.107 [+0.081, +0.132]``: the figure and its interval, each as the doc rounds it."""
    agree_all(numbers(cell), [value, *ci], what)


def test_trained_recall_tables():
    """docs/recall.md's copy gains of trained models and their loss and cost, against the stored runs."""
    text = section(doc("reports/trained-recall-2026-11-28.md"), "Recall of the trained model")
    for name, file in TRAINED_RECALL.items():
        assert f"benchmarks/results/{file}" in text, f"recall.md does not cite {file}"
    for cells in table(text, "| setting | layout | spans"):
        run = trained_run(cells)
        by_distance = {row["distance"]: row for row in run["recall"]["copy"] if row["kind"] == cells[2]}
        for distance, cell in zip((32, 64, 128, 256), cells[3:7], strict=True):
            if cell == "-":
                assert distance not in by_distance, f"{cells[:3]}: distance {distance} was measured"
                continue
            row = by_distance[distance]
            agree_interval(cell, row["gain"], row["gain_ci"], f"{cells[:3]} copy gain at {distance}")
    both = results(TRAINED_RECALL["128"])["layouts"]
    rows = table(text, "| layout | attention layers | seed")
    assert {(TRAINED_LAYOUTS[plain(cells[0]).split()[0]], cells[2]) for cells in rows} == {
        (layout, seed) for layout, stored in both.items() for seed in stored["seeds"]}, "every run of the 128 setting"
    for cells in rows:  # both seeds at today's target
        stored = both[TRAINED_LAYOUTS[plain(cells[0]).split()[0]]]
        run, what = stored["seeds"][cells[2]], f"{cells[0]} seed {cells[2]}"
        assert int(cells[1]) == stored["pattern"].count("A") + stored["pattern"].count("W"), what
        agree(cells[3], run["val_loss"], f"{what} val loss")
        random = {row["distance"]: row for row in run["recall"]["copy"] if row["kind"] == "random"}
        for distance, cell in ((32, cells[4]), (64, cells[5])):
            agree_interval(cell, random[distance]["gain"], random[distance]["gain_ci"], f"{what} gain at {distance}")
        agree(cells[6].rstrip("%"), 100 * random[32]["second_loss"] / random[32]["first_loss"], f"{what} share")
    for cells in table(text, "| setting | layout | val loss"):
        run, what = trained_run(cells), f"{cells[:2]}"
        agree(cells[2], run["val_loss"], f"{what} val loss")
        ar = run["recall"]["ar_slice"]
        agree_interval(cells[3], ar["repeat_gain"], ar["repeat_gain_ci"], f"{what} AR repeat gain")
        agree(cells[4], run["tokens_per_s"], f"{what} tokens/s")
        agree(cells[5], run["seconds"] / 60, f"{what} minutes")


AMSD_RECALL = "amsd_recall_search-2026-11-27.json"


def test_search_amsd_min_recall_end_to_end():
    """The report's AMSD --min-recall search: the finalists' table against the stored leaderboard, and the
    answer recomputed from the eligible rows' per-seed losses with the project's rule."""
    from search.verdict import compare_with_known
    from tests.search.records import recorded

    data = results(AMSD_RECALL)
    board = {row["pattern"]: row for row in data["leaderboard"]}
    page = doc("reports/amsd-min-recall-search-2026-11-27.md")
    text = section(page, "The `AMSD` search with `--min-recall known`, end to end")
    rows = table(text, "| pattern | at the target | loss | recall at 1,024")
    assert [plain(cells[0]).split()[0] for cells in rows] == list(board)
    for cells in rows:
        row = board[plain(cells[0]).split()[0]]
        agree(cells[2], row["score"], f"{cells[0]} loss")
        agree(cells[3], row["recall"], f"{cells[0]} recall")
        assert cells[4] == ("yes" if row["meets_min_recall"] else "no"), cells[0]
        number, unit = cells[5].split()
        agree(number, row["cost"]["cache_bytes"]["32768"] / {"KiB": 1024, "MiB": 1024**2}[unit], f"{cells[0]} cache")
        agree(cells[6], row["cost"]["decode"]["decode_tokens_per_s"], f"{cells[0]} decode")
    eligible = [row for row in data["leaderboard"] if row["meets_min_recall"]]
    again = compare_with_known([recorded(row) for row in eligible], maximize=False)
    stored = data["best"]["vs_known"]
    assert again["answer"] == stored["answer"] == "new" and again["best_known"]["name"] == "linear-7to1"
    reproduced(stored["ci"], again["ci"], "the answer's interval")
    find(text, rf"by {again['difference']:.3f} \[{again['ci'][0]:.3f}, {again['ci'][1]:.3f}\]")
    # the same search against Nemotron-H (--min-recall 0.99) and Samba (benchmarks/search_answer_vs_family.py)
    from composer.evidence import paired_difference

    second = data["min_recall_099"]
    confirmed = second["confirmed"]
    nemotron = paired_difference(confirmed["SDDMAS"], confirmed["SMSAMS"])
    reproduced(second["vs_known"]["ci"], nemotron["ci"], "SDDMAS - nemotron-h")
    samba = paired_difference(data["samba"]["answer"]["losses"], data["samba"]["family"]["losses"])
    reproduced(data["samba"]["answer_minus_family"]["ci"], samba["ci"], "SDDMAS - samba")
    for pair in (nemotron, samba):
        find(text, rf"{pair['mean']:.3f} \[{pair['ci'][0]:.3f}, {pair['ci'][1]:.3f}\]")


def test_recall_probe_seed_spread_at_the_ceiling():
    """The report's seed spread of the shipped probe at 1,024 tokens: the mixer stacks with attention probed at
    two seeds under the shipped settings (token-shift stem; Mamba-2 at 0.03 of the rate where it has any)."""
    import math

    from scipy import stats

    runs = results("recall_probe-2026-11-27.json")["runs"]
    shipped = [run for run in runs if run["shift_stem"] and run["steps_per_length"] == 1000
               and ("S" not in run["pattern"] or run.get("rate_scales") == {"S": 0.03}) and "A" in run["pattern"]
               or run["pattern"] == "SWS"]
    by_pattern: dict[str, dict[int, float]] = {}
    for run in shipped:
        by_pattern.setdefault(run["pattern"], {})[run["seed"]] = run["accuracy_by_length"]["1024"]
    assert sorted(by_pattern) == ["AAA", "DDA", "SSAS", "SWS"] and all(set(v) == {0, 1} for v in by_pattern.values())
    differences = {pattern: abs(seeds[0] - seeds[1]) for pattern, seeds in by_pattern.items()}
    page = doc("reports/amsd-min-recall-search-2026-11-27.md")
    text = section(page, "The `AMSD` search with `--min-recall known`, end to end")
    find(text, r"differ at 1,024 tokens by 0 \(`AAA`\), 0 \(`DDA`\), "
               rf"{differences['SSAS']:.5f} \(`SSAS`\) and {differences['SWS']:.5f}")
    pooled = math.sqrt(sum(d * d / 2 for d in differences.values()) / len(differences))
    find(text, rf"pooled seed standard deviation of {pooled:.5f}")
    chance = stats.t.ppf(0.975, len(differences)) * math.sqrt(2) * pooled
    assert round(chance, 3) == 0.001, chance


def test_search_amsd_recall_pool_and_one_attention():
    """The report's pool run, its --min-recall 0.99 answer, and the answer with one attention layer at the
    target: every figure and interval recomputed from the stored rows."""
    from composer.evidence import paired_difference

    data = results("amsd_recall_pool-2026-11-27.json")
    page = doc("reports/amsd-recall-pool-2026-11-27.md")
    text = section(page, "The answer's pool promoted, and the answer with one attention layer")
    pool = data["pool_run"]
    for pattern in ("SDAAAM", "SMSMAM", "SMSAAM", "SADMSS", "SSDSAD"):  # rung 1's additions, none further
        assert pattern in pool["promoted"]["1"] and pattern not in pool["promoted"]["2"]
        find(text, rf"`{pattern}` {pool['rung1_scores'][pattern]:.4f}")
    board = {row["pattern"]: row for row in pool["leaderboard"]}
    for pattern in ("SDDDAM", "SDDMDA"):
        assert pattern in pool["promoted"]["2"] and board[pattern]["lr"] == 2e-3
        find(text, rf"`{pattern}` {board[pattern]['score']:.4f}")
        agree("0.99896", board[pattern]["recall"], f"{pattern} recall")
        assert round((1 - board[pattern]["recall"]) * board[pattern]["recall_queries"]) == 17
        assert not board[pattern]["meets_min_recall"]
    assert pool["min_recall"]["eligible"] == ["SDDMAS", "DMDMAM"] and pool["vs_known"]["best_new"]["pattern"] == "SDDMAS"
    relaxed = {row["pattern"]: row for row in data["min_recall_099"]["leaderboard"]}
    answer = paired_difference(relaxed["SDDDAM"]["losses"], relaxed["SMSAMS"]["losses"])
    stored = data["min_recall_099"]["vs_known"]
    assert stored["best_new"]["pattern"] == "SDDDAM" and stored["answer"] == "new"
    reproduced(stored["ci"], answer["ci"], "SDDDAM - nemotron-h")
    find(text, rf"{answer['mean']:.3f} \[{answer['ci'][0]:.3f}, {answer['ci'][1]:.3f}\] over seeds 0, 1, 2")
    one = data["one_attention"]
    losses = one["vs_nemotron_h"]["family"]["losses"]
    assert one["vs_nemotron_h"]["family"]["target_pattern"] == "SDDMDSSDDMASSDDMDSSDMDS"
    find(text, ", ".join(f"{losses[seed]:.4f}" for seed in ("0", "1", "2")))
    versus = paired_difference(losses, one["vs_nemotron_h"]["answer"]["losses"])
    find(text, rf"{versus['mean']:.3f} \[{versus['ci'][0]:.3f}, {versus['ci'][1]:.3f}\] over seeds 0, 1, 2, its cache")
    itself = paired_difference(losses, one["vs_sddmas"]["answer"]["losses"])
    assert itself["verdict"] == "within noise"
    find(text, rf"{itself['mean']:.4f} \[{itself['ci'][0]:.4f}, \+{itself['ci'][1]:.4f}\], within noise")
    from composer.accounting import analyze
    from composer.presets import get_preset

    widths = get_preset("demo-4m").arch
    cache = {name: analyze(widths.with_pattern(layout), seq_len=32_768).cache_bytes_per_sequence / 2**20
             for name, layout in (("one", "SDDMDSSDDMASSDDMDSSDMDS"), ("nemotron", "SMSMSMSMASMSMSMS"))}
    find(text, rf"{cache['one']:.2f} MiB against {cache['nemotron']:.2f} MiB")
    probes = data["target_mixer_probes"]
    for mixers in ("SDDDSSDDASSDDDSSDDS", "SDDASSDDASSDDASSDAS", "SSSSASSSS"):  # deep stacks: nothing learned
        probe = probes[mixers]
        find(text, rf"`{mixers}` recall {probe['accuracy_by_length']['1024']:.4f} .{{0,40}}\({probe['seconds'] / 60:.0f} min")
        assert abs(probe["train_loss"] - math.log(128)) < 0.06, (mixers, probe["train_loss"])


def test_search_attention_kept_at_the_target():
    """The report's attention-kept layout of SDDMAS: its layout is what the rule grows today, every score and
    interval is recomputed from the stored losses, and the max-kv counts and costs from the accounting."""
    from composer.accounting import non_embedding_params
    from composer.evidence import paired_difference
    from composer.presets import get_preset
    from scaling.extrapolate import extrapolate
    from search.cost import serving_cost

    data = results("attention_kept-2026-11-28.json")
    text = section(doc("reports/attention-kept-2026-11-28.md"), "Attention kept at the target")
    layout = data["vs_nemotron_h"]["family"]["target_pattern"]
    assert layout == extrapolate("SDDMAS", "demo-4m", attention="keep").pattern == "SDDMSSDDMSASDDMSSDDMS"
    kept = data["vs_nemotron_h"]["family"]["losses"]
    assert data["vs_sddmas"]["family"]["losses"] == kept
    stages = data["vs_nemotron_h"]["family"]["stages"]
    find(text, rf"chose 1e-3 with {stages['rung1']['score']:.4f}, rung 2 scored {kept['0']:.4f}, the confirmation's "
               rf"seeds 1 and 2 {kept['1']:.4f} and {kept['2']:.4f}")
    assert stages["rung1"]["lr"] == 1e-3
    hand = results("amsd_recall_pool-2026-11-27.json")["one_attention"]["vs_nemotron_h"]["family"]["losses"]
    assert data["hand_made"]["losses"] == hand
    against = {"Nemotron-H's own layout": data["vs_nemotron_h"]["answer"]["losses"],
               "Samba": data["samba"]["losses"], "`SDDMAS` stacked": data["vs_sddmas"]["answer"]["losses"],
               "the hand-made layout above": hand}
    for name, losses in against.items():
        versus = paired_difference(kept, losses)
        digits = 3 if versus["verdict"] != "within noise" else 4
        low, high = versus["ci"]
        printed = f"{versus['mean']:+.{digits}f} [{low:+.{digits}f}, {high:+.{digits}f}]"
        find(text, rf"against {re.escape(name)}.{{0,60}}: {re.escape(printed)}")
        assert (versus["verdict"] == "within noise") == (name in ("`SDDMAS` stacked", "the hand-made layout above"))
    demo = get_preset("demo-4m").arch
    costs = data["costs"]
    for name, row in costs.items():
        cost = serving_cost(demo.with_pattern(row["pattern"]))
        assert cost["cache_bytes"]["32768"] == row["cache_bytes_32k"], name
        assert non_embedding_params(demo.with_pattern(row["pattern"])) == row["non_embedding_params"], name
    mib = {name: row["cache_bytes_32k"] / 2**20 for name, row in costs.items()}
    find(text, rf"{mib['kept']:.2f} MiB of cache at 32K against {mib['nemotron_h']:.2f} MiB "
               rf"\({(mib['kept'] / mib['nemotron_h'] - 1) * 100:.1f}%")
    find(text, rf"at {mib['kept']:.2f} MiB against Samba's {mib['samba']:.2f} MiB")
    find(text, rf"32.46 MiB and {costs['stacked']['non_embedding_params'] / 1e6:.2f}M")
    assert f"{mib['stacked']:.2f}" == "32.46"
    limits = data["max_kv_10mib_at_32k"]
    find(text, rf"stacking leaves {limits['repeat']['fit']:,} of the {limits['repeat']['patterns']:,}")
    assert limits["repeat"]["fit_and_keep"] == 0
    find(text, rf"keeping leaves {limits['keep']['fit']:,}, and {limits['keep']['fit_and_keep']:,} of them")
    assert limits["keep"]["fit_and_keep"] == 6 * 3**5  # one attention layer, the other 5 of M, S, D


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
    readme = (ROOT / "README.md").read_text()
    find(readme, rf"it took {minutes} min {seconds} s")


def test_search_amsd_constrained_end_to_end():
    """The constrained AMSD search's report: the finalists' table against the stored rows, the answer's intervals
    against Nemotron-H and Samba recomputed from the per-seed losses, the cache ratios from the accounting, and
    the probe-against-trained Spearman from its stored rows."""
    from composer.evidence import paired_difference
    from composer.presets import get_preset
    from search.cost import serving_cost

    data = results("amsd_constrained_search-2026-11-28.json")
    text = section(doc("reports/amsd-constrained-search-2026-11-28.md"), "The constrained search and its answer")
    board = {row["pattern"]: row for row in data["leaderboard"]}
    rows = table(text, "| pattern | at the target | loss | probe at 1,024")
    assert [plain(cells[0]).split()[0] for cells in rows] == list(board)
    units = {"KiB": 1024, "MiB": 1024**2}
    for cells in rows:
        row = board[plain(cells[0]).split()[0]]
        agree(cells[2], row["score"], f"{cells[0]} loss")
        agree(cells[3], row["recall"], f"{cells[0]} probe")
        assert cells[4] == ("yes" if row["meets_min_recall"] else "no"), cells[0]
        figure = row["trained_recall"]
        agree_interval(cells[5], figure["value"], figure["ci"], f"{cells[0]} trained recall")
        number, unit = cells[6].split()
        agree(number, row["cost"]["cache_bytes"]["32768"] / units[unit], f"{cells[0]} cache")
        agree(cells[7], row["cost"]["decode"]["decode_tokens_per_s"], f"{cells[0]} decode")
    best = data["best"]
    assert best["min_recall"]["eligible"] == ["SADDDD", "SADDSM", "SMSAMS", "DMDMAM"]
    find(text, rf"lower end of the 7:1 linear layout's probe interval, {best['min_recall']['threshold']:.4f}")
    # the answer against Nemotron-H, from the confirmed seeds' losses
    answer, nemotron = (board[p]["evidence"]["scores"] for p in ("SADDDD", "SMSAMS"))
    versus = paired_difference(answer, nemotron)
    stored = best["vs_known"]
    assert stored["answer"] == "new" and stored["best_new"]["pattern"] == "SADDDD" and stored["seeds"] == [0, 1, 2]
    reproduced(stored["ci"], versus["ci"], "SADDDD - nemotron-h")
    find(text, rf"beats Nemotron-H by {versus['mean']:.3f} \[{versus['ci'][0]:.3f}, {versus['ci'][1]:.3f}\]")
    find(text, r"`SADDDD` scored " + ", ".join(f"{answer[s]:.4f}" for s in "012"))
    # against Samba, trained through the search's rungs: its losses pair with the same answer's
    samba = data["samba"]
    assert samba["answer"]["losses"] == answer
    against = paired_difference(answer, samba["family"]["losses"])
    reproduced(samba["answer_minus_family"]["ci"], against["ci"], "SADDDD - samba")
    find(text, rf"Against Samba: {against['mean']:.3f} \[{against['ci'][0]:.3f}, {against['ci'][1]:.3f}\]")
    seed0 = samba["family"]["stages"]["rung2"]["trained_recall"]
    find(doc("reports/amsd-constrained-search-2026-11-28.md"),
         rf"\+0.061 against \+{seed0['value']:.3f} \[\+{seed0['ci'][0]:.3f}, \+{seed0['ci'][1]:.3f}\] \(seed 0\)")
    tie = paired_difference(samba["family"]["losses"], nemotron)
    assert tie["verdict"] == "within noise"
    find(text, rf"Samba against Nemotron-H is -0.000 \[{tie['ci'][0]:.3f}, \+{tie['ci'][1]:.3f}\], within noise")
    # the caches at 32K: the analytic accounting of each model at demo-4m
    demo = get_preset("demo-4m").arch
    cache = {name: serving_cost(demo.with_pattern(layout))["cache_bytes"]["32768"]
             for name, layout in (("answer", board["SADDDD"]["target_pattern"]),
                                  ("nemotron", board["SMSAMS"]["target_pattern"]),
                                  ("samba", samba["family"]["target_pattern"]))}
    assert cache["samba"] == samba["family"]["cost"]["cache_bytes"]["32768"]
    goal = section(doc("reports/amsd-constrained-search-2026-11-28.md"), "The issue's goal, item by item")
    for name, percent in (("nemotron", 2.3), ("samba", 63.6)):
        assert round((cache["answer"] / cache[name] - 1) * 100, 1) == percent, name
        find(goal, rf"{cache['answer'] / 2**20:.2f} MiB against {cache[name] / 2**20:.2f} MiB, \+{percent}%")
    # the probe against the trained models' recall, over the 8 finalists
    spearman = data["probe_vs_trained"]
    assert spearman["n"] == 8 and spearman["ci"][0] < 0 < spearman["ci"][1]
    from composer.evidence import spearman as rank_correlation

    again = rank_correlation([r["probe"] for r in spearman["rows"]], [r["trained"] for r in spearman["rows"]])
    reproduced(spearman["spearman"], again, "probe-trained Spearman")
    page = doc("reports/amsd-constrained-search-2026-11-28.md")
    find(page, rf"Spearman \*\*\+{again:.2f}, 95% bootstrap \[{spearman['ci'][0]:.2f}, \+{spearman['ci'][1]:.2f}\]\*\*")


# ------------------------------------------------------------------------ reports/layout-cost-cpu-2026-11-29.md


def test_layout_cost_on_the_cpu():
    """Issue 58's report: the per-primitive rates (before and after), the decode steps, the answer's batch-1 decode,
    the layouts' measured cost with the model's prediction beside it, and the cost model's errors."""
    from composer.presets import get_preset
    from primitives.registry import REGISTRY

    text = doc("reports/layout-cost-cpu-2026-11-29.md")
    data = results("cpu_cost-2026-11-29.json")
    # the primitive table: means of two rounds, per FLOP against M with composer info's counts at seq 128
    widths = get_preset("demo-4m").arch.with_pattern("AMSDW").replace(options={"W": {"window": 64}})  # the bench's
    configs = widths.primitive_configs()
    train_flops = {s: REGISTRY.get(s).flops_per_token(configs[s], 128) for s in "AMSDW"}
    decode_flops = {s: REGISTRY.get(s).decode_flops_per_token(configs[s], 1_024) for s in "AMSDW"}
    runs = data["primitive_throughput"]["runs"]
    for symbol in "AMSDW":
        cells = []
        for phase in ("before", "after"):
            rows = [{r["primitive"]: r for r in run["primitives"]} for run in runs[phase]]
            ms = np.mean([r[symbol]["median_ms"] for r in rows])
            rate = np.mean([(train_flops[symbol] / r[symbol]["median_ms"]) / (train_flops["M"] / r["M"]["median_ms"])
                            for r in rows])
            cells.append(f"{ms:.1f} \\| {rate:.2f}")
        find(text, rf"\| `{symbol}` \| {train_flops[symbol] / 1e6:.2f}M \| {cells[0]} \| {cells[1]} \|")
        steps = [np.mean([next(r["step_ms"] for r in run["decode"] if r["primitive"] == symbol and r["batch"] == batch)
                          for run in runs[phase]]) for batch in (1, 64) for phase in ("before", "after")]
        find(text, rf"\| `{symbol}` \| {decode_flops[symbol] / 1e3:.0f}K \| " + r" \| ".join(f"{s:.3f}" for s in steps))
    # the answer's decode at batch 1, before / eager / compiled
    decode = data["decode_batch1"]["runs"]
    means = {(pattern, tree): np.mean([decode[f"b1_{tree}_{pattern}_{i}"]["ms_per_token"] for i in (1, 2)])
             for pattern in ("SDDDDS", "SMSMSM") for tree in ("base", "main", "mainc")}
    assert all(decode[f"b1_mainc_{p}_{i}"]["decode_path"] == "compiled (inductor, cpu)"
               for p in ("SDDDDS", "SMSMSM") for i in (1, 2))
    for label, tree in (("before \\(18903ae, eager\\)", "base"), ("after, eager", "main"),
                        ("after, compiled \\(`--compile`\\)", "mainc")):
        answer, nemotron = means["SDDDDS", tree], means["SMSMSM", tree]
        find(text, rf"\| {label} \| {answer:.2f} \| {1e3 / answer:.1f} \| {nemotron:.2f} \| {1e3 / nemotron:.1f} \| "
                   rf"{nemotron / answer:.2f}x \|")
    speedup = means["SDDDDS", "base"] / means["SDDDDS", "mainc"]
    find(text, rf"met by the compiled step: {speedup:.1f}x")
    find(text, rf"The eager path alone gives {means['SDDDDS', 'base'] / means['SDDDDS', 'main']:.2f}x")
    # the layouts at demo-4m: measured medians, ratios to the answer, the CPU model's prediction
    costs = data["finalist_costs"]["result"]
    first = costs["rows"][0]["measured"]
    for row in costs["rows"]:
        measured, predicted = row["measured"], row["predicted_here"]
        train = measured["train_tokens_per_s"]["median"]
        b1, b64 = (measured["decode_ms_per_token"][b]["1024"]["median"] for b in ("1", "64"))
        find(text, rf"`{row['at_target']}` \| {row['n_layers']} \| [^|]+ \| {train:,.0f} "
                   rf"\({train / first['train_tokens_per_s']['median']:.2f}x\) "
                   rf"\[{predicted['train_tokens_per_s']:,.0f}\] "
                   rf"\| {b1:.2f} \({b1 / first['decode_ms_per_token']['1']['1024']['median']:.2f}x\) "
                   rf"\[{predicted['decode_ms_per_token']['1']['1024']:.2f}\] \| {b64:.2f}")
    # the H200 predictions at 350M and 1B
    for key in ("h200@llama-350m", "h200@llama-3.2-1b"):
        answer = costs["predicted"][key][0]
        assert answer["pattern"] == "SADDDD" and answer["at_target"].count("A") == 1
        find(text, rf"{answer['train_tokens_per_s']:,.0f} \(1.00x\) \| "
                   rf"{answer['decode_ms_per_token']['1']:.2f} \(1.00x\)")
    # the cost model's CPU validation and the GPU leave-one-out
    validation = results("cost_model_validation-2026-11-29.json")
    for row in validation["rows"]:
        error = row["train_tokens_per_s_predicted"] / row["train_tokens_per_s"] - 1
        find(text, rf"{row['train_tokens_per_s']:,.0f} \| {row['train_tokens_per_s_predicted']:,.0f} \| "
                   + re.escape(f"{error * 100:+.0f}%"))
    errors = validation["errors"]
    find(text, rf"Training: median error {errors['train_tokens_per_s']['median_abs'] * 100:.1f}%, worst "
               rf"{errors['train_tokens_per_s']['worst_abs'] * 100:.1f}%")
    find(text, rf"Decode at batch 1: median error {errors['decode_ms_per_token']['median_abs'] * 100:.1f}%, worst "
               rf"{errors['decode_ms_per_token']['worst_abs'] * 100:.1f}%")
    first_fit = data["cost_model_first_fit"]
    find(text, rf"in-sample {first_fit['fit_error']['train']['median_abs'] * 100:.1f}%, validation "
               rf"{first_fit['validation_errors']['train_tokens_per_s']['median_abs'] * 100:.1f}%")
    fit = results("cost_model_fit-2026-11-29.json")
    find(text, rf"in-sample error to {fit['fit_error']['train']['median_abs'] * 100:.1f}%")
    loo = results("cost_model_gpu_loo-2026-11-29.json")["groupings"]
    assert loo["grouped"]["errors"]["n"] == 20 and loo["grouped"]["constants_fitted"] == 4
    find(text, rf"Median error {loo['grouped']['errors']['median_abs'] * 100:.1f}%, worst "
               rf"{loo['grouped']['errors']['worst_abs'] * 100:.1f}%")
    one = loo["one"]["errors"]
    find(text, rf"{one['median_abs'] * 100:.1f}% median, {one['worst_abs'] * 100:.1f}% worst")
    seconds = data["search_measurement_seconds"]["min_repeat_seconds_0.01"]
    assert math.isclose(sum(v for k, v in seconds.items() if k != "total"), seconds["total"], abs_tol=0.15)
    find(text, rf"took {seconds['total']:.1f} s in all \(2.2-4.1 s each\)")
    # the default search re-timed: its wall time, its rungs and its answer, the same as the stored 2026-11-28 run
    retimed = data["default_search_retimed"]
    minutes, rest = divmod(round(retimed["wall_seconds"]), 60)
    find(text, rf"It took {minutes} min {rest} s\*\* \(rungs 4.6 \+ 11.8 \+ 6.2 min\)")
    assert retimed["rungs_line"].endswith("1: 9 at rung-cpu-1 (11.8 min); 2: 4 at rung-cpu-2 (6.2 min)")
    before = results("default_search_timed-2026-11-28.json")["best"]["vs_known"]
    assert (retimed["answer"], retimed["best_new"], retimed["difference"], retimed["ci"]) == (
        before["answer"], before["best_new"]["pattern"], before["difference"], before["ci"])
    find(text, rf"took {sum(retimed['measurement_seconds']):.1f} s \(2.8-3.3 s each\)")
    find(text, rf"`AMAMMM` against Llama's `AMAMAM` \+{retimed['difference']:.4f} \[{retimed['ci'][0]:.4f}, "
               rf"\+{retimed['ci'][1]:.4f}\]")


def test_the_answer_at_equal_cost():
    """The depth control's report: every arm's losses and size, the paired differences recomputed from them, the
    rate past the grid's edge, each arm's cost (medians over the measured rounds, the H200 model at 1B), the ratios
    the prose quotes, and the equal-cost space's counts."""
    import statistics

    from composer.evidence import paired_difference

    text = doc("reports/equal-cost-2026-11-29.md")
    data = results("depth_control-2026-11-29.json")
    arms = data["arms"]
    searched = {row["pattern"]: row for row in results("amsd_constrained_search-2026-11-28.json")["leaderboard"]}
    assert arms["answer@34"]["losses"] == searched["SADDDD"]["evidence"]["scores"]  # the search's own runs
    assert arms["nemotron-h@16-d192"]["losses"] == searched["SMSAMS"]["evidence"]["scores"]
    for cells in table(text, "| arm | layout at `demo-4m`"):
        arm = arms[plain(cells[0])]
        assert (int(cells[2]), int(cells[3])) == (arm["layers"], arm["d_model"])
        agree(cells[4].rstrip("M"), arm["non_embedding_params"] / 1e6, f"{cells[0]} size")
        assert float(cells[5]) == arm["lr"]
        losses = [arm["losses"][seed] for seed in ("0", "1", "2")]
        agree_all(numbers(cells[6]), losses, f"{cells[0]} losses")
        agree(cells[7], statistics.mean(losses), f"{cells[0]} mean")
    find(text, rf"It scored {arms['answer@34-rerun']['losses']['0']:.4f} against the search's "
               rf"{arms['answer@34']['losses']['0']:.4f}")
    for name, edge in ((name, arms[name]["edge"]) for name in ("answer@16", "answer-mlp@16", "nemotron-h@16",
                                                               "nemotron-h@34")):
        find(text, rf"`{name}`: {edge['loss']:.4f} at {edge['lr']:.0e} against {edge['chosen_loss']:.4f} at "
                   rf"{edge['chosen_lr']:.0e}".replace("e-0", "e-"))
    # the differences: recomputed from the arms' losses, as printed
    for cells in table(text, "| what | difference | loss"):
        mine, theirs = re.findall(r"`([^`]+)`", cells[1])
        paired = paired_difference(arms[mine]["losses"], arms[theirs]["losses"])
        assert paired["seeds"] == ["0", "1", "2"]
        agree(cells[2], paired["mean"], cells[0])
        agree_all(numbers(cells[3]), list(paired["ci"]), f"{cells[0]} interval")
        assert plain(cells[4]) == paired["verdict"]
    # the cost: medians over the rounds, the model at 1B
    def measured(name: str, figure) -> float:
        return statistics.median(figure(r) for r in arms[name]["cost"]["measured_rounds"])

    train = lambda r: r["train_tokens_per_s"]["median"]  # noqa: E731
    decode = lambda r: r["decode_ms_per_token"]["1"]["1024"]["median"]  # noqa: E731
    decode64 = lambda r: r["decode_ms_per_token"]["64"]["1024"]["median"]  # noqa: E731
    for cells in table(text, "| arm | train tok/s"):
        name = plain(cells[0])
        cost, at_1b = arms[name]["cost"], arms[name]["cost"]["h200_at_1b"]
        agree(cells[1], measured(name, train), f"{name} train")
        agree(cells[2], measured(name, decode), f"{name} decode")
        agree(cells[3], measured(name, decode64), f"{name} decode b64")
        agree(numbers(cells[4])[0], cost["serving_at_target"]["cache_bytes"]["32768"] / 2**20, f"{name} cache")
        assert [int(n.replace(",", "")) for n in numbers(cells[5])] == [at_1b["layout_layers"], at_1b["d_model"]]
        agree(cells[6], at_1b["decode_ms_b1_4k"], f"{name} H200 decode")
        agree(cells[7], at_1b["train_tokens_per_s"], f"{name} H200 train")
        agree(numbers(cells[8])[0], at_1b["serving"]["cache_bytes"]["32768"] / 2**20, f"{name} H200 cache")

    def ratio(mine: str, theirs: str, figure) -> float:
        return measured(mine, figure) / measured(theirs, figure)

    def cache(name: str, at_1b: bool = False) -> int:
        cost = arms[name]["cost"]
        return (cost["h200_at_1b"]["serving"] if at_1b else cost["serving_at_target"])["cache_bytes"]["32768"]

    h200 = {name: arms[name]["cost"]["h200_at_1b"] for name in arms}
    find(text, rf"against 13.98 at 34: {ratio('answer@16', 'answer@34', decode):.2f}x")
    find(text, rf"on this CPU: {ratio('answer@16', 'nemotron-h@16', decode):.2f}x the decode latency, "
               rf"{ratio('answer@16', 'nemotron-h@16', train):.2f}x the training throughput, "
               rf"{cache('answer@16') / cache('nemotron-h@16'):.2f}x the cache")
    find(text, rf"on the H200 model at 1B: "
               rf"{h200['answer@16']['decode_ms_b1_4k'] / h200['nemotron-h@16']['decode_ms_b1_4k']:.2f}x the decode "
               rf"latency and {h200['answer@16']['train_tokens_per_s'] / h200['nemotron-h@16']['train_tokens_per_s']:.2f}x")
    find(text, rf"That is {ratio('answer-mlp@16', 'nemotron-h@16', decode):.2f}x")
    rounds = {name: sorted(decode(r) for r in arms[name]["cost"]["measured_rounds"])
              for name in ("answer-mlp@16", "nemotron-h@16")}
    find(text, rf"\({rounds['answer-mlp@16'][0]:.2f}-{rounds['answer-mlp@16'][-1]:.2f} against "
               rf"{rounds['nemotron-h@16'][0]:.2f}-{rounds['nemotron-h@16'][-1]:.2f}\)")
    find(text, rf"Training {ratio('answer-mlp@16', 'nemotron-h@16', train):.2f}x, cache "
               rf"{cache('answer-mlp@16') / cache('nemotron-h@16'):.2f}x")
    find(text, rf"decode {h200['answer-mlp@16']['decode_ms_b1_4k'] / h200['nemotron-h@16']['decode_ms_b1_4k']:.2f}x, "
               rf"training {h200['answer-mlp@16']['train_tokens_per_s'] / h200['nemotron-h@16']['train_tokens_per_s']:.2f}x, "
               rf"cache {cache('answer-mlp@16', True) / cache('nemotron-h@16', True):.2f}x")
    # the equal-cost space
    space = results("equal_cost_space-2026-11-29.json")
    for cells, key in zip(table(text, "| growth | patterns"), ("by_size", "at_nemotron_h_depth"), strict=True):
        found = space[key]
        counts = found["counts"]
        assert [int(n.replace(",", "")) for n in numbers(cells[1]) + numbers(cells[2])] == [
            found["patterns"], found["within_max_kv_and_recall"]]
        assert [int(n.replace(",", "")) for n in numbers(cells[3])] == [
            counts["cpu"]["decode"], counts["cpu"]["throughput"], counts["cpu"]["decode_and_throughput"]]
        assert int(cells[4].replace(",", "")) == counts["h200"]["decode_and_throughput"]


def test_the_equal_cost_search():
    """The equal-cost search's section: each finalist's seeds, loss, measured cost and probe recall as the search
    wrote them; the verdict its record gives; the pairings against Nemotron-H's and the control's runs recomputed
    from the per-seed losses."""
    import statistics

    from composer.evidence import paired_difference

    text = doc("reports/equal-cost-2026-11-29.md")
    data = results("equal_cost_search-2026-11-29.json")
    rows = {row["pattern"]: row for row in data["leaderboard"]}
    arms = results("depth_control-2026-11-29.json")["arms"]
    for cells in table(text, "| finalist | model at `demo-4m`"):
        row = rows[re.findall(r"`([^`]+)`", cells[0])[0]]
        assert plain(cells[1]) == row["target_pattern"]
        agree(cells[2].rstrip("M"), row["cost"]["params"] / 1e6, f"{cells[0]} params")
        scores = list(row["evidence"]["scores"].values())
        assert int(cells[3]) == len(scores)
        agree(cells[4], statistics.mean(scores), f"{cells[0]} loss")
        measured = row["cost"]["measured"]
        agree(cells[5], measured["train_tokens_per_s"]["median"], f"{cells[0]} train")
        agree(cells[6], measured["decode_ms_per_token"]["1"]["1024"]["median"], f"{cells[0]} decode")
        agree(cells[8], row["recall"], f"{cells[0]} recall")
        assert plain(cells[9]).startswith("yes") == (row["pattern"] in data["best"]["min_recall"]["eligible"])
    said = data["best"]["vs_known"]
    assert said["answer"] == "tie" and said["recommended"] == "DMDMAM" and said["best_new"]["pattern"] == "SMMMAD"
    find(text, re.escape(f"is **{said['difference']:+.4f} [{said['ci'][0]:+.4f}, {said['ci'][1]:+.4f}]**: a tie"))
    # the same run, again: equal to the sixth digit
    assert abs(rows["SMSAMS"]["evidence"]["scores"]["0"] - arms["nemotron-h@16-d192"]["losses"]["0"]) < 1e-5
    names = {"Nemotron-H (the search's": "nemotron-h@16-d192", "Nemotron-H at the target's size": "nemotron-h@16",
             "`answer-mlp@16`": "answer-mlp@16"}
    for cells in table(text, "| what | difference | 95% CI | verdict"):
        mine = re.findall(r"`([^`]+)`", cells[0])[0].split()[-1]
        theirs = next(arm for words, arm in names.items() if words in cells[0].split(" - ", 1)[1])
        paired = paired_difference(rows[mine]["evidence"]["scores"], arms[theirs]["losses"])
        assert paired["seeds"] == ["0", "1", "2"]
        agree(cells[1], paired["mean"], cells[0])
        agree_all(numbers(cells[2]), list(paired["ci"]), f"{cells[0]} interval")
        assert plain(cells[3]) == paired["verdict"]
        recorded = data["vs_control"][f"{mine} - {theirs}"]["difference"]
        assert recorded["mean"] == pytest.approx(paired["mean"])
    # the same search under the corrected --min-recall known: its bar, the eligible finalists and its verdict as
    # its record holds them, and the verdict recomputed from the per-seed losses
    rerun = results("equal_cost_search_rerun-2026-11-29.json")
    bar = rerun["min_recall"]
    assert bar["why"].startswith("--min-recall known: nemotron-h SMSAMS (the best loss")
    find(text, re.escape(f"at least **{bar['threshold']:.4f}**"))
    eligible = [row["pattern"] for row in rerun["leaderboard"] if row["meets_min_recall"]]
    assert eligible == bar["eligible"] == ["SMMMAD", "SMSAMD", "SMSAMS", "SMMAMM", "DMDMAM"]
    said = rerun["vs_known"]
    assert (said["answer"], said["recommended"]) == ("tie", "SMSAMS")
    by_pattern = {row["pattern"]: row["evidence"]["scores"] for row in rerun["leaderboard"]}
    paired = paired_difference(by_pattern["SMMMAD"], by_pattern["SMSAMS"])
    assert paired["seeds"] == ["0", "1", "2"] and paired["verdict"] == "within noise"
    find(text, re.escape(f"**{paired['mean']:+.4f} [{paired['ci'][0]:+.4f}, {paired['ci'][1]:+.4f}]**, a tie"))
    assert said["difference"] == pytest.approx(paired["mean"])


# ------------------------------------------------------------------ reports/seed-spread-and-target-cache-2026-11-29.md


def test_the_seed_spread_and_the_cache_at_the_target():
    """The report's seed spread recomputed from the 3-seed runs it cites, equal to the one rung-cpu-2 carries, and
    the cache figures the accounting gives."""
    import statistics

    from scipy import stats

    from composer import analyze, get_preset
    from search.growth import grow
    from search.lm import get_lm_budget

    text = doc("reports/seed-spread-and-target-cache-2026-11-29.md")
    data = results("search_guide_figures-2026-11-29.json")
    runs = results("curve_out_of_sample-2026-11-27.json")["wsd_cosine_seeds"]["patterns"]
    wsd = {p: [runs[p]["wsd"][s] for s in ("0", "1", "2")] for p in ("AMAMAM", "MMAMMM")}
    assert wsd == data["rung_cpu_2_seed_noise"]["wsd_losses"]
    for cells in table(text, "| pattern | seed 0 |"):
        agree_all(numbers(" ".join(cells[1:])), wsd[plain(cells[0])], f"{cells[0]} losses")
    pooled = math.sqrt(statistics.mean(statistics.variance(v) for v in wsd.values()))
    reproduced(data["rung_cpu_2_seed_noise"]["pooled_sd"], pooled, "pooled sd")
    agree(find(text, rf"the sd of one run's score is \*\*{NUM}\*\* with 4 degrees")[1], pooled, "pooled sd")
    assert get_lm_budget("rung-cpu-2").seed_noise.sd == round(pooled, 4), "rung-cpu-2's seed_noise"
    agree(find(text, rf"interval of \*\*\+-{NUM}\*\*")[1], stats.t.ppf(0.975, 4) * pooled * math.sqrt(2), "+-")
    differences = [b - a for a, b in zip(wsd["AMAMAM"], wsd["MMAMMM"], strict=True)]
    agree_all(numbers(find(text, r"paired by seed \(([^)]+)\)")[1]), differences, "paired differences")
    paired = statistics.stdev(differences)
    agree(find(text, rf"has sd \*\*{NUM}\*\*")[1], paired, "paired sd")
    agree(find(text, rf"which would give \+-{NUM}")[1], stats.t.ppf(0.975, 2) * paired, "paired +-")
    layout, arch = grow("AMAMAM", "demo-4m").layout, get_preset(grow("AMAMAM", "demo-4m").widths).arch
    grown, fit = (analyze(arch.with_pattern(p)).kv_cache_bytes_per_token for p in (layout, "AMAMAM"))
    assert len(layout) == 18 and grown == data["kv_cache_AMAMAM_at_demo_4m"]["model_at_target_bytes_per_token"]
    find(text, rf"\*\*{grown:,}\*\* bytes per token \(bf16\), against \*\*{fit:,}\*\* for the 6-layer pattern")


COST_MEASURES = {"training": "train_tokens_per_s", "prefill": "prefill_tokens_per_s",
                 "decode, batch 1": "decode_ms_per_token"}


def test_cost_model_out_of_sample():
    """Issue 68's cost model report: the validation is of the fit as written (same constants digest, no refit in
    between) on widths and patterns the fit never ran; every model's figures, the errors by layout class (before
    and after), the goals, and the GPU leave-one-pattern-out, against their JSON."""
    from composer.costmodel import error_summary
    from composer.costmodel.classes import LAYOUT_CLASSES, layout_class
    from composer.presets import get_preset

    text = doc("reports/cost-model-out-of-sample-2026-12-07.md")
    fit = results("cost_model_fit-2026-12-07.json")
    val = results("cost_model_validation-2026-12-07.json")
    before = results("cost_model_validation_before-2026-12-07.json")
    loo = results("cost_model_gpu_loo-2026-12-07.json")
    for name in ("cost_model_fit", "cost_model_validation", "cost_model_validation_before", "cost_model_gpu_loo"):
        assert f"benchmarks/results/{name}-2026-12-07.json" in text, f"the report does not cite {name}"
    # frozen before validation, out of sample by construction
    assert val["out_of_sample"] and val["cpu_constants_digest"] == fit["cpu_constants_digest"]
    assert val["fit_source"]["id"] == f"fit-cpu-{fit['date']}" and val["fit_source"]["command"] == fit["command"]
    find(text, rf"digest `{fit['cpu_constants_digest']}`")
    assert not set(fit["fit_widths"].values()) & {r["d_model"] for r in val["rows"]}
    assert not set(fit["fit_patterns"]) & {r["compact"] for r in val["rows"]}
    assert val["train_precision"] == fit["train_precision"] == ("bf16" if fit["native_bf16"] else "fp32")
    for run in (val, before):
        for r in run["rows"]:
            assert layout_class(get_preset(r["preset"]).arch.with_pattern(r["pattern"])) == r["layout_class"]
    # every model
    rows = {(r["preset"], r["compact"]): r for r in val["rows"]}
    cells_seen = table(text, "| class | widths | pattern |")
    assert len(cells_seen) == len(rows)
    for cells in cells_seen:
        r = rows[cells[1], plain(cells[2])]
        assert cells[0] == r["layout_class"] and int(cells[3]) == r["n_layers"]
        for measure, start in (("train_tokens_per_s", 4), ("prefill_tokens_per_s", 7)):
            agree_all(cells[start:start + 2], [r[measure], r[f"{measure}_predicted"]], f"{cells[2]} {measure}")
            agree(cells[start + 2].rstrip("%"), 100 * r["error"][measure], f"{cells[2]} {measure} error")
        agree_all(cells[10:12], [r["decode_ms_per_token"], r["decode_ms_per_token_predicted"]], f"{cells[2]} decode")
        agree(cells[12].rstrip("%"), 100 * r["error"]["decode_ms_per_token"], f"{cells[2]} decode error")
    # errors by class, after and before, each recomputed from the rows

    def summary(run: dict, group: str, measure: str) -> dict:
        members = [r for r in run["rows"] if group in ("pooled", r["layout_class"])]
        stored = run["errors"][measure] if group == "pooled" else run["errors_by_class"][group][measure]
        recomputed = error_summary([r["error"][measure] for r in members])
        reproduced([stored["median_abs"], stored["worst_abs"]], [recomputed["median_abs"], recomputed["worst_abs"]],
                   f"{group} {measure}")
        return stored

    by_class = table(text, "| phase | class | models | median error |")
    assert len(by_class) == len(COST_MEASURES) * (len(LAYOUT_CLASSES) + 1)
    for cells in by_class:
        measure = COST_MEASURES[cells[0]]
        after, old = summary(val, cells[1], measure), summary(before, cells[1], measure)
        assert int(cells[2]) == after["n"] == old["n"]
        agree_all([c.rstrip("%") for c in cells[3:7]],
                  [100 * s[k] for s in (after, old) for k in ("median_abs", "worst_abs")],
                  f"{cells[0]} {cells[1]}")
    # the goals: training median <= 15% and worst <= 30% in every class, decode at batch 1 median <= 15%
    goals = table(text, "| goal | class | figure | met |")
    checked = 0
    for cells in goals:
        measure, statistic, limit = {"training median <= 15%": ("train_tokens_per_s", "median_abs", 0.15),
                                     "training worst <= 30%": ("train_tokens_per_s", "worst_abs", 0.30),
                                     "decode batch 1 median <= 15%": ("decode_ms_per_token", "median_abs", 0.15)}[
            plain(cells[0])]
        value = summary(val, cells[1], measure)[statistic]
        agree(cells[2].rstrip("%"), 100 * value, f"goal {cells[0]} {cells[1]}")
        assert cells[3] == ("yes" if value <= limit else "no"), f"goal {cells[0]} {cells[1]}"
        checked += 1
    assert checked == 2 * len(LAYOUT_CLASSES) + len(LAYOUT_CLASSES) + 1  # decode: each class and pooled
    # the GPUs, leave one pattern out
    grouped = loo["groupings"]["grouped"]
    assert grouped["errors"]["n"] == len(loo["cases"]) and grouped["not_predicted"] == 0
    s = grouped["errors"]
    match = find(text, rf"median error \*\*{NUM}%\*\*, worst \*\*{NUM}%\*\* over {len(loo['cases'])} configurations")
    agree_all([match[1], match[2]], [100 * s["median_abs"], 100 * s["worst_abs"]], "GPU grouped")
    for cells in table(text, "| held-out pattern |"):
        group = plain(cells[0])
        cases = [c for c in loo["cases"] if c["group"] == group]
        assert cells[1] == f"{len(cases)} ({sum(len(c['repeats']) for c in cases)})" and cells[2] == cases[0][
            "layout_class"]
        g = grouped["errors_by_held_out_group"][group]
        agree_all([c.rstrip("%") for c in cells[3:5]], [100 * g["median_abs"], 100 * g["worst_abs"]], group)
    for cls, v in grouped["errors_by_class"].items():
        match = find(text, rf"{re.escape(cls)} median {NUM}%, worst {NUM}% over {v['n']}")
        agree_all([match[1], match[2]], [100 * v["median_abs"], 100 * v["worst_abs"]], f"GPU {cls}")
    # the prose: the machine, the run times, the per-slice counts, decode's noise, bf16 against fp32
    agree(find(text, rf"load average of {NUM} when the fit began")[1],
          fit["machine"]["before"]["load_average_1_5_15"][0], "load at the fit's start")
    agree(find(text, rf"and {NUM} when the last run ended")[1], before["machine"]["after"]["load_average_1_5_15"][0],
          "load at the end")
    agree(find(text, rf"# {NUM} s; writes composer/costmodel/constants.json")[1], fit["seconds"], "fit seconds")
    agree(find(text, rf"validate --device cpu +# {NUM} s")[1], val["seconds"], "validate seconds")
    per_slice = fit["counts"]["S"]["train"]["per_slice"]
    match = find(text, rf"adds {NUM}-{NUM} ops to an `S` training step for the convolution and {NUM}-{NUM} for "
                       "the scan")
    agree_all(list(match.groups()), [min(per_slice["short_conv"]["ops"]), max(per_slice["short_conv"]["ops"]),
                                     min(per_slice["ssd_scan"]["ops"]), max(per_slice["ssd_scan"]["ops"])], "per slice")
    pairs = list(zip(val["rows"], before["rows"], strict=True))
    assert all(a["compact"] == b["compact"] and a["preset"] == b["preset"] for a, b in pairs)
    assert before["train_precision"] == "fp32" and val["train_precision"] == "bf16"
    drift = [abs(a["decode_ms_per_token"] / b["decode_ms_per_token"] - 1) for a, b in pairs]
    match = find(text, rf"differed by a median {NUM}% and up to {NUM}% between the validation run")
    agree_all(list(match.groups()), [100 * float(np.median(drift)), 100 * max(drift)], "decode run to run")
    agree(find(text, rf"differed by a median {NUM}% between the two validation runs")[1], 100 * float(np.median(drift)),
          "decode run to run (setting)")
    speedup = [a["train_tokens_per_s"] / b["train_tokens_per_s"] for a, b in pairs]
    match = find(text, rf"a median {NUM}x faster in bf16 autocast than in fp32 \({NUM}x-{NUM}x")
    agree_all(list(match.groups()), [float(np.median(speedup)), min(speedup), max(speedup)], "bf16 speed-up")
    decode_fit = fit["fit_error"]["decode"]
    match = find(text, rf"in-sample decode error {NUM}% median, {NUM}% worst")
    agree_all(list(match.groups()), [100 * decode_fit["median_abs"], 100 * decode_fit["worst_abs"]], "fit decode")
    too_fast = sum(r["error"]["decode_ms_per_token"] < 0 for r in val["rows"])
    assert too_fast == sum(r["error"]["decode_ms_per_token"] < 0 for r in before["rows"])
    find(text, rf"{too_fast} of {len(val['rows'])} predictions are too fast, before as after")
    agree(find(text, rf"fitted op cost \({NUM} us an op in training\)")[1],
          1e6 * fit["constants"]["op_cost_s"]["train"], "train op cost")
    errors = [r["error"]["train_tokens_per_s"] for r in val["rows"]]
    assert max(errors) < 0, "the report says every training error is negative"
    match = find(text, rf"predicts {NUM}-{NUM}% slower than measured")
    agree_all(list(match.groups()), [-100 * max(errors), -100 * min(errors)], "training error range")
    assert all(r["error"]["train_tokens_per_s"] > 0 for r in before["rows"] if r["layout_class"] == "S/D-heavy")


def test_the_families_at_equal_cost():
    """Each arm's model, its cost ratios at the deployed size and its losses as benchmarks/equal_cost_families.py
    wrote them; the pairings against Nemotron-H recomputed from the per-seed losses."""
    import statistics

    from composer.evidence import paired_difference

    text = doc("reports/equal-cost-families-2026-12-07.md")
    data = results("equal_cost_families-2026-12-07.json")
    arms = data["arms"]
    assert data["rule"]["reference"] == "nemotron-h" and data["rule"]["deployed"] == "llama-3.2-1b"
    for cells in table(text, "| arm | model at `demo-4m`"):
        arm = arms[plain(cells[0])]
        assert plain(cells[1]) == arm["layout"]
        assert int(cells[2]) == arm["d_model"]
        agree(cells[3].rstrip("M"), arm["non_embedding_params"] / 1e6, f"{cells[0]} size")
        assert [int(n) for n in numbers(cells[4])] == [arm["deployed"]["layers"], arm["deployed"]["d_model"]]
        agree_all(numbers(cells[5]), [arm["deployed"]["ratio"]["decode"], arm["deployed"]["ratio"]["train"]],
                  f"{cells[0]} cpu ratios")
        agree_all(numbers(cells[6]), [arm["h200"]["ratio"]["decode"], arm["h200"]["ratio"]["train"]],
                  f"{cells[0]} h200 ratios")
        assert plain(cells[7]) == (f"{arm['lr']:g}" if arm["lr"] else "-")
    reference = arms["nemotron-h"]["losses"]
    for cells in table(text, "| arm | seeds | mean loss"):
        arm = arms[plain(cells[0])]
        losses = arm["losses"] or {}
        assert int(cells[1]) == len(losses)
        agree(cells[2], statistics.mean(losses.values()), f"{cells[0]} loss")
        if plain(cells[0]) == "nemotron-h" or len(losses) < 2:
            continue
        paired = paired_difference(losses, reference)
        agree(cells[3], paired["mean"], f"{cells[0]} difference")
        agree_all(numbers(cells[4]), list(paired["ci"]), f"{cells[0]} interval")
        assert plain(cells[5]) == paired["verdict"]
    said = find(text, r"Nemotron-H (NUM), Nemotron-Flash (NUM), the 3:1 (NUM), `SMMMAD` (NUM), `answer-mlp@16` (NUM)\."
                .replace("NUM", r"[0-9]+\.[0-9]+"))
    for printed, name in zip(said.groups(), ("nemotron-h", "nemotron-flash", "linear-3to1", "smmmad", "answer-mlp")):
        agree(printed, arms[name]["trained_recall"]["confirmation"]["value"], f"{name} copy gain")
    for name, arm in arms.items():  # the rate past the grid's edge was worse for every arm
        assert arm["edge"]["loss"] > arm["edge"]["chosen_loss"], name
