"""docs/reports/default-search-on-amd-2026-12-08.md: the default search on an AMD EPYC beside the Intel run, its
finalists' forecasts and last-rung scores, and its last promotion under tighter rules, against the JSON."""

from __future__ import annotations

from tests.docs_figures.reading import agree, agree_interval, doc, numbers, plain, results, section, table

REPORT = "reports/default-search-on-amd-2026-12-08.md"


def test_the_answer_the_times_and_the_finalists_on_both_processors():
    run = results("default_search_amd-2026-12-08.json")
    intel = results(run["intel_2026_12_07"]["file"].rsplit("/", 1)[1])
    text = section(doc(REPORT), "The same answer on another processor, by different finalists")
    cells = {plain(r[0]): r[1:] for r in table(text, "| | AMD EPYC")}
    for column, seconds in enumerate((run["wall_seconds"], intel["wall_seconds"])):
        minutes, secs = plain(cells["whole search (/usr/bin/time)"][column]).split(":")
        assert int(minutes) * 60 + int(secs) == round(seconds)
    assert [float(n) for n in numbers(cells["rungs (min)"][0])] == run["rung_minutes"]
    for printed, rung in zip(numbers(cells["rungs (min)"][1]), intel["rungs"], strict=True):
        agree(printed, rung["wall_seconds"] / 60, f"Intel rung {rung['rung']}")
    answer = run["answer"]
    assert cells["answer"][0].startswith(f"{answer['answer']}: `{answer['best_new']}`")
    agree_interval(cells["answer"][0].rsplit("`", 1)[1], answer["difference"], answer["ci"], "AMD answer")
    assert plain(cells["recommended"][0]) == answer["recommended"]
    last = {row["pattern"]: row for row in run["rungs"][2]["leaderboard"]}
    rung1 = [row["pattern"] for row in run["rungs"][1]["leaderboard"]]
    intel_last = {row["pattern"]: row for row in intel["rungs"][2]["leaderboard"]}
    intel_rung1 = [row["pattern"] for row in intel["rungs"][1]["leaderboard"]]
    finalists = table(text, "| finalist |")
    assert [plain(c[0]).split()[0] for c in finalists] == list(last)  # best first, as the last rung ranked them
    for c in finalists:
        pattern = plain(c[0]).split()[0]
        assert c[1] == f"{rung1.index(pattern) + 1} of {len(rung1)}"
        forecast = run["promoted_forecasts"].get(pattern)
        if forecast:
            mean, sd = numbers(c[2])
            agree(mean, forecast["mean"], f"{pattern} forecast")
            agree(sd, forecast["sd"], f"{pattern} forecast sd")
        agree(c[3], last[pattern]["score"], f"{pattern} last rung")
        if pattern in intel_last:
            agree(c[4], intel_last[pattern]["score"], f"{pattern} Intel last rung")
        assert (c[5] == f"{intel_rung1.index(pattern) + 1} of {len(intel_rung1)}") if pattern in intel_rung1 \
            else c[5] == "not promoted"


def test_the_last_promotion_under_tighter_rules():
    rules = results("promotion_rules-2026-12-08.json")
    best_new = rules["best_new_at_last_rung"]
    rows = table(section(doc(REPORT), "Dropping the"), "| rule |")
    named = {"as searched (z = 1)": "as searched", "contenders at z = 0.5": "contenders at z=0.5",
             "no contenders (z = 0)": "no contenders (z=0)"}
    assert len(rows) == len(rules["rules"])
    for cells in rows:
        patterns = rules["rules"][named[cells[0]]]
        assert int(cells[1]) == len(patterns)
        assert cells[2].startswith("yes" if best_new in patterns else "no")
    assert best_new == "AMAAAM" and rules["keeps_best_new"] == {"as searched": True, "contenders at z=0.5": False,
                                                                "no contenders (z=0)": False}
