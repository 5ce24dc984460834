"""benchmarks/promotion_rules.py: a finished search's last promotion re-applied under other rules, no training."""

from __future__ import annotations

import json


def test_the_last_promotion_under_each_rule(tmp_path, load_benchmark):
    from composer.cli import main

    out = tmp_path / "search"
    flags = ["--budget", "smoke", "--trials", "3", "--preset", "tiny"]
    assert main(["search", *flags, "--out", str(out)]) == 0
    trials = (out / "leaderboard.json").read_text()
    bench = load_benchmark("promotion_rules")
    rows, args, kwargs, chosen = bench.last_promotion(str(out), flags)
    assert (out / "leaderboard.json").read_text() == trials  # resumed, nothing trained again
    assert [row["pattern"] for row in chosen] and set(row["pattern"] for row in chosen) <= {r["pattern"] for r in rows}
    result_path = tmp_path / "rules.json"
    assert bench.main(["--search", str(out), "--flags", " ".join(flags), "--json", str(result_path)]) == 0
    result = json.loads(result_path.read_text())
    assert result["rules"]["as searched"] == [row["pattern"] for row in chosen]  # the search's own rule, replayed
    known = next(row["pattern"] for row in rows if row.get("known"))
    for patterns in result["rules"].values():
        assert known in patterns  # the floor goes on under every rule
    assert result["best_new_at_last_rung"] in {row["pattern"] for row in rows} | {None}
