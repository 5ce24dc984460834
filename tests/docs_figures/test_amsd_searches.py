"""The AMSD searches: amsd-min-recall-search-2026-11-27.md, amsd-recall-pool-2026-11-27.md,
attention-kept-2026-11-28.md and amsd-constrained-search-2026-11-28.md, every interval recomputed from
the stored losses and every cache from the accounting.
"""

from __future__ import annotations

import math
import re

from composer.statistics import paired_difference
from tests.docs_figures.reading import (
    agree,
    agree_interval,
    doc,
    find,
    plain,
    reproduced,
    results,
    section,
    table,
)

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


def test_search_amsd_constrained_end_to_end():
    """The constrained AMSD search's report: the finalists' table against the stored rows, the answer's intervals
    against Nemotron-H and Samba recomputed from the per-seed losses, the cache ratios from the accounting, and
    the probe-against-trained Spearman from its stored rows."""
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
    from composer.statistics import spearman as rank_correlation

    again = rank_correlation([r["probe"] for r in spearman["rows"]], [r["trained"] for r in spearman["rows"]])
    reproduced(spearman["spearman"], again, "probe-trained Spearman")
    page = doc("reports/amsd-constrained-search-2026-11-28.md")
    find(page, rf"Spearman \*\*\+{again:.2f}, 95% bootstrap \[{spearman['ci'][0]:.2f}, \+{spearman['ci'][1]:.2f}\]\*\*")
