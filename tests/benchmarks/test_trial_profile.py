"""benchmarks/trial_profile.py: one search trial's wall time split by job, the rows adding up to the trial."""

from __future__ import annotations

import json

import pytest


def test_the_rows_add_up_to_the_trial_and_name_each_primitive(tmp_path, load_benchmark, monkeypatch):
    bench = load_benchmark("trial_profile")
    monkeypatch.setattr(bench, "process_start", lambda modules: 1.0)  # a fresh interpreter: timed apart, not here
    out = tmp_path / "profile.json"
    assert bench.main(["--budget", "rung-smoke-0", "--widths", "tiny", "--pattern", "AMSM", "--precision", "fp32",
                       "--json", str(out)]) == 0
    record = json.loads(out.read_text())
    rows = record["seconds"]
    assert {"forward: attention", "forward: mlp", "forward: mamba2"} <= set(rows)  # A, M and S by module
    assert rows["backward (whole model)"] > 0 and rows["optimizer update (AdamW)"] > 0
    # every second of the trial is in exactly one row (cProfile's own time included in the trial's)
    assert sum(rows.values()) == pytest.approx(record["trial_wall_s"], rel=0.05)
    assert record["overlapping"]["forward, training and validation"] == pytest.approx(
        sum(v for k, v in rows.items() if k.startswith("forward:")), rel=1e-6)
    assert record["score"] > 0 and record["process_start_s"] == 1.0
