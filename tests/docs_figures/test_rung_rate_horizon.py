"""docs/reports/rung-rate-horizon-2026-12-07.md: each finalist's rung-1 sweep and last-rung losses, what the carried
rate cost, and both searches' answers and rung times, against benchmarks/rung_rate_horizon.py's JSON."""

from __future__ import annotations

from tests.docs_figures.reading import agree, agree_interval, doc, numbers, plain, results, section, table

REPORT = "reports/rung-rate-horizon-2026-12-07.md"
RESULTS = "rung_rate_horizon-2026-12-07.json"


def finalists() -> dict[str, dict]:
    return {row["pattern"]: row for row in results(RESULTS)["finalists"]}


def test_the_table_of_rung_ones_choice_at_500k():
    rows = table(section(doc(REPORT), "Rung 1's choice at 500K tokens"), "| finalist |")
    every = finalists()
    assert len(rows) == len(every)
    for cells in rows:
        pattern = plain(cells[0]).split()[0]
        row = every[pattern]
        assert (f"({row['known']})" in cells[0]) == bool(row["known"]), pattern
        agree(cells[1], row["rung1_sweep"]["0.001"], f"{pattern} rung 1 at 1e-3")
        agree(cells[2], row["rung1_sweep"]["0.002"], f"{pattern} rung 1 at 2e-3")
        assert float(cells[3]) == row["rung1_chosen"], pattern
        for cell, rate in ((cells[4], "0.001"), (cells[5], "0.002")):
            if rate in row["last_rung_losses"]:
                agree(cell, row["last_rung_losses"][rate], f"{pattern} at {rate} at 500K")
            else:
                assert cell == "not trained", pattern
        agree(cells[6].lstrip("+"), row["carried_cost"], f"{pattern}: what the carried rate cost")
    moved = [row for row in every.values() if row["carried_cost"]]
    chose_higher = [row for row in every.values() if row["rung1_chosen"] == 2e-3]
    text = " ".join(section(doc(REPORT), "Rung 1's choice at 500K tokens").split())
    assert f"{len(moved)} of the {len(chose_higher)} finalists that chose 2e-3" in text.replace("**", "")


def test_both_answers_and_the_rung_times():
    record = results(RESULTS)
    rows = table(section(doc(REPORT), "The fix"), "| | before")
    cells = {plain(r[0]): r[1:] for r in rows}
    for column, name in enumerate(("before", "after")):
        said = record[name]
        vs = said["vs_known"]
        assert plain(cells["recommended"][column]) == said["recommended"]
        answer = cells["answer"][column]
        assert answer.startswith(said["answer"] + ":"), answer
        figures = answer[answer.rindex("`") + 1:]  # after the best known layout's name: the difference, the interval
        agree_interval(figures, vs["difference"], vs["ci"], f"{name} answer")
        for rung in said["rungs"]:
            label = next(key for key in cells if key.startswith(f"rung {rung['rung']} "))
            agree(numbers(cells[label][column])[0], rung["wall_seconds"] / 60, f"{name} rung {rung['rung']} minutes")
        minutes, seconds = plain(cells["whole search (/usr/bin/time)"][column]).split(":")
        assert int(minutes) * 60 + int(seconds) == round(said["wall_seconds"]), name
