"""The recall reports: recall-vs-length-2026-11-25.md, recall-probe-2026-11-27.md and
trained-recall-2026-11-28.md, each accuracy and interval against its results JSON.
"""

from __future__ import annotations

from composer.statistics import proportion_interval
from tests.docs_figures.reading import (
    NUM,
    agree,
    agree_all,
    agree_interval,
    doc,
    find,
    numbers,
    plain,
    reproduced,
    results,
    section,
    table,
)

RECALL = "recall_vs_length_lr_sweep-2026-11-25.json"


RECALL_SHARED_RATE = "recall_vs_length-2026-11-25.json"


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
