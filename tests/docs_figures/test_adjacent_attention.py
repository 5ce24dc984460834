"""docs/reports/adjacent-attention-2026-12-07.md: the controlled test and the warmup table against their JSON
(benchmarks/layout_grid_summary.py's summary of the runs), each interval recomputed from the per-seed losses."""

from __future__ import annotations

from composer.statistics import paired_difference
from tests.docs_figures.reading import (
    agree,
    agree_interval,
    doc,
    numbers,
    plain,
    reproduced,
    results,
    section,
    table,
)

REPORT = "reports/adjacent-attention-2026-12-07.md"
RESULTS = "adjacent_attention-2026-12-07.json"
BASELINE = "AMAMAMAMAMAMAM"
WARMUPS = {"6 (before)": "bf16 rung-cpu-1-grid", "20 (now)": "bf16 rung-cpu-1-grid-warmup20",
           "40": "bf16 rung-cpu-1-grid-warmup40"}


def setting(name: str) -> dict:
    return results(RESULTS)["settings"][name]


def against_baseline(layout: str, name: str) -> dict:
    """The paired difference at each one's best rate, recomputed from the per-seed best losses, and checked
    against the one the JSON stores."""
    layouts = setting(name)["layouts"]
    mine = {s: v["loss"] for s, v in layouts[layout]["seeds"].items()}
    theirs = {s: v["loss"] for s, v in layouts[BASELINE]["seeds"].items()}
    pair = paired_difference(mine, theirs)
    stored = next(row for row in setting(name)["against_baseline"] if row["layout"] == layout)["at_best_rates"]
    reproduced([stored["mean"], *stored["ci"]], [pair["mean"], *pair["ci"]], f"{layout} at {name}")
    return pair


def seed_cell(cell: str, seed: dict, what: str) -> None:
    """``5e-4* 2.4003``: the seed's best rate, whether it is at the grid's edge, its loss."""
    rate, loss = plain(cell).split()
    assert rate.endswith("*") == seed["at_edge"], f"{what}: edge mark"
    assert float(rate.rstrip("*")) == seed["lr"], f"{what}: rate"
    agree(loss, seed["loss"], what)


def test_the_controlled_test_at_the_searchs_warmup():
    text = section(doc(REPORT), "The controlled test")
    layouts = setting(WARMUPS["6 (before)"])["layouts"]
    rows = table(text, "| layout |")
    assert len(rows) == 4
    for cells in rows:
        layout = plain(cells[0]).split()[0]
        entry = layouts[layout]
        assert plain(cells[1]) == entry["widths"], layout
        agree(cells[2], entry["non_embedding_params"], f"{layout} parameters")
        for seed, cell in zip(("0", "1", "2"), cells[3:6], strict=True):
            seed_cell(cell, entry["seeds"][seed], f"{layout} seed {seed}")
        if layout == BASELINE:
            assert not cells[6]
        else:
            pair = against_baseline(layout, WARMUPS["6 (before)"])
            agree_interval(cells[6], pair["mean"], pair["ci"], f"{layout} against Llama")


def test_the_warmup_table():
    rows = table(section(doc(REPORT), "The fix"), "| warmup (steps) |")
    assert [plain(r[0]) for r in rows] == list(WARMUPS)
    for cells in rows:
        name = WARMUPS[plain(cells[0])]
        layouts = setting(name)["layouts"]
        for cell, layout in ((cells[1], "AAMMMMAAMMMMAM"), (cells[2], BASELINE)):
            seeds = layouts[layout]["seeds"]
            printed = numbers(cell)
            assert len(printed) == 3, cell
            for seed, value in zip(("0", "1", "2"), printed, strict=True):
                agree(value, seeds[seed]["loss"], f"{layout} seed {seed} at {name}")
            assert cell.count("*") == sum(seeds[s]["at_edge"] for s in ("0", "1", "2")), f"{layout} at {name}"
        pair = against_baseline("AAMMMMAAMMMMAM", name)
        agree_interval(cells[3], pair["mean"], pair["ci"], f"difference at {name}")


def test_the_precision_table():
    rows = table(section(doc(REPORT), "In fp32 too"), "| precision |")
    assert [plain(r[0]) for r in rows] == ["bf16", "fp32"]
    for cells in rows:
        name = f"{plain(cells[0])} rung-cpu-1-grid-warmup20"
        layouts = setting(name)["layouts"]
        for cell, layout in ((cells[1], "AAMMMMAAMMMMAM"), (cells[2], BASELINE)):
            seeds = layouts[layout]["seeds"]
            for seed, value in zip(("0", "1", "2"), numbers(cell), strict=True):
                agree(value, seeds[seed]["loss"], f"{layout} seed {seed} in {name}")
            assert not any(seeds[s]["at_edge"] for s in ("0", "1", "2")), f"{layout} in {name}: a best rate at the edge"
        pair = against_baseline("AAMMMMAAMMMMAM", name)
        agree_interval(cells[3], pair["mean"], pair["ci"], f"difference in {name}")
