"""benchmarks/rung_rate_horizon.py: rung 1's rate choice read against the last rung's losses at every rate."""

from __future__ import annotations

import json
from pathlib import Path


def _row(pattern: str, known: str | None, sweep: dict[str, float], lr: float, score: float | None = None) -> dict:
    details = {"lr": lr, "lr_sweep": sweep} if len(sweep) > 1 else {"lr": lr}
    return {"pattern": pattern, "known": known, "score": score if score is not None else sweep[f"{lr:g}"],
            "lr": lr, "grown": {"layout": pattern * 2}, "details": details}


def _search(tmp_path, last_rows) -> str:
    out = tmp_path / "search"
    out.mkdir()
    rung1 = [_row("AMAMAM", "llama", {"0.001": 2.314, "0.002": 2.308}, 2e-3),
             _row("AMAAAM", None, {"0.001": 2.353, "0.002": 2.467}, 1e-3),
             _row("MAMMAA", None, {"0.001": 2.327, "0.002": 2.296}, 2e-3)]
    (out / "best.json").write_text(json.dumps({"answer": "tie", "recommended": "AMAMAM", "vs_known": {}}))
    (out / "rungs.json").write_text(json.dumps([{"rung": 0, "leaderboard": []}, {"rung": 1, "leaderboard": rung1},
                                                {"rung": 2, "leaderboard": last_rows}]))
    return str(out)


def test_the_carried_rate_its_cost_and_both_answers(tmp_path, load_benchmark, capsys):
    bench = load_benchmark("rung_rate_horizon")
    search = _search(tmp_path, [_row("AMAAAM", None, {"0.001": 1.6097}, 1e-3),
                                _row("AMAMAM", "llama", {"0.002": 1.6654}, 2e-3),
                                _row("MAMMAA", None, {"0.002": 1.7254}, 2e-3)])
    grid = tmp_path / "grid.jsonl"
    grid.write_text("\n".join(json.dumps({"layout": layout * 2, "seed": 0, "score": loss, "lr_sweep": {"0.001": loss}})
                              for layout, loss in (("AMAMAM", 1.6249), ("MAMMAA", 1.6812))) + "\n")
    out = tmp_path / "horizon.json"
    assert bench.main(["--search", search, "--grid", str(grid), "--json", str(out),
                       "--plot", str(tmp_path / "horizon.png")]) == 0
    record = json.loads(out.read_text())
    rows = {row["pattern"]: row for row in record["finalists"]}
    assert rows["AMAMAM"]["rung1_chosen"] == 2e-3 and rows["AMAMAM"]["last_rung_better_rate"] == 1e-3
    assert abs(rows["AMAMAM"]["carried_cost"] - 0.0405) < 1e-9 and abs(rows["AMAMAM"]["rung1_margin"] - 0.006) < 1e-9
    assert rows["AMAAAM"]["carried_cost"] == 0.0 and rows["AMAMAM"]["last_rung_trained_by_search"] == ["0.002"]
    assert record["answer_at_rung1_rate"]["best_known_loss"] == 1.6654
    assert record["answer_at_better_rate"]["best_known_loss"] == 1.6249
    assert (tmp_path / "horizon.png").stat().st_size > 0
    assert record["before"]["answer"] == "tie" and [r["rung"] for r in record["before"]["rungs"]] == [0, 1, 2]
    assert "2 of 3 finalists were better at another rate" in capsys.readouterr().out


def test_a_search_that_continued_both_rates_is_read_from_its_own_sweep(tmp_path, load_benchmark):
    bench = load_benchmark("rung_rate_horizon")
    search = _search(tmp_path, [_row("AMAAAM", None, {"0.001": 1.6097}, 1e-3),
                                _row("AMAMAM", "llama", {"0.001": 1.6249, "0.002": 1.6654}, 1e-3),
                                _row("MAMMAA", None, {"0.001": 1.6812, "0.002": 1.7254}, 1e-3)])
    rows = {row["pattern"]: row for row in bench.finalists(Path(search), [])}
    assert rows["AMAMAM"]["last_rung_trained_by_search"] == ["0.001", "0.002"]
    assert rows["AMAMAM"]["at_better"] == 1.6249 and abs(rows["MAMMAA"]["carried_cost"] - 0.0442) < 1e-9
