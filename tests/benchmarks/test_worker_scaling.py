"""benchmarks/worker_scaling.py: one worker on every core against one worker a core, at a rung's own shape."""

from __future__ import annotations

import json


def test_both_layouts_train_every_candidate_and_report_the_ratio(tmp_path, load_benchmark):
    bench = load_benchmark("worker_scaling")
    out = tmp_path / "scaling.json"
    assert bench.main(["--rungs", "rung-smoke-0", "--patterns", "AMAM,MMAM", "--precision", "fp32",
                       "--json", str(out)]) == 0
    (row,) = json.loads(out.read_text())["rows"]
    assert row["rung"] == "rung-smoke-0" and row["widths"] == "tiny" and row["candidates"] == 2
    assert set(row["scores"]) == {"AMAM", "MMAM"}
    # each candidate trained under both layouts, deterministically where the thread count is the same
    for scores in row["scores"].values():
        assert scores["one_worker"] == scores["one_worker_again"] and scores["one_thread"] > 0
    threads = {trial["threads"] for trial in row["trials"]["side_by_side"]}
    assert threads == {1} and {trial["threads"] for trial in row["trials"]["one_worker"]} == {2}
    assert row["speedup_vs_one_worker"] == (sum(row["one_worker_s"]) / 2) / row["workers_side_by_side_s"]
    assert row["trial_speedup_vs_one_worker"] > 0
