"""docs/reports/answer-trust-2026-11-27.md: the verdict on three cases, recomputed with search.verdict, and
the finalists' cost table.
"""

from __future__ import annotations

from tests.docs_figures.reading import (
    agree,
    agree_all,
    doc,
    numbers,
    plain,
    reproduced,
    results,
    section,
    table,
)

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
