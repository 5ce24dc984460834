"""docs/reports/hybridize-evidence-2026-11-25.md: the four models' table, the paired differences and the
supernet's ranking, recomputed from hybridize_evidence's JSON.
"""

from __future__ import annotations

import re

from composer.statistics import bootstrap_rank_correlation, paired_difference, seed_summary
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
    table,
)

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
