"""``benchmarks/noise_ceiling.py`` at a tiny budget: every (pattern, seed, budget) trained once, the ceiling and
separation computed from the runs, the table and plot written, and a second call trains nothing."""

from __future__ import annotations

import json

import pytest


@pytest.mark.slow
def test_noise_ceiling_trains_every_budget_once_and_reports_the_ceiling(tmp_path, monkeypatch, capsys,
                                                                       load_benchmark):
    monkeypatch.setenv("COMPOSER_CACHE", str(tmp_path / "cache"))
    script = load_benchmark("noise_ceiling")
    argv = ["--tokens", "1024", "--patterns", "AAMMMM,AMAMAM,MMMMMM", "--seeds", "2", "--to", "tiny",
            "--seq-len", "64", "--batch-size", "8", "--max-documents", "200", "--val-tokens", "512", "--out", str(tmp_path / "nc")]
    assert script.main(argv) == 0
    table = capsys.readouterr().out
    report = json.loads((tmp_path / "nc" / "noise_ceiling.json").read_text())
    row = report["budgets"][0]
    assert row["tokens"] == 1024 and set(row["losses"]) == {"AAMMMM", "AMAMAM", "MMMMMM"}
    from composer.statistics import noise_ceiling

    by_seed = {s: [row["losses"][p][str(s)] for p in report["patterns"]] for s in (0, 1)}
    assert row["noise_ceiling"] == pytest.approx(noise_ceiling(by_seed)["mean"])
    assert row["reaches_threshold"] == (row["noise_ceiling"] >= report["threshold"])
    assert row["validation"]["same"] and "| 1,024 |" in table
    assert (tmp_path / "nc" / "noise_ceiling.png").stat().st_size > 1000

    summaries = sorted((tmp_path / "nc").glob("tokens-1024/train/*/seed-*/summary.json"))
    before = {path: path.stat().st_mtime_ns for path in summaries}
    assert len(summaries) == 6 and script.main(argv) == 0
    assert before == {path: path.stat().st_mtime_ns for path in summaries}, "finished runs are not trained again"

    # --report-only reads what finished: with one run gone, that pattern drops out of the budget's row
    next((tmp_path / "nc").glob("tokens-1024/train/MMMMMM/seed-1/summary.json")).unlink()
    capsys.readouterr()
    assert script.main([*argv, "--report-only"]) == 0
    assert "skipped (3 needed)" in capsys.readouterr().err
    assert json.loads((tmp_path / "nc" / "noise_ceiling.json").read_text())["budgets"] == []
