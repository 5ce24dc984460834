"""benchmarks/decode_noise.py: each validation model's decode step timed in several processes, the spread across
them, and the cost model's error against their median (issue 68)."""

from __future__ import annotations

import json
from pathlib import Path


def test_the_spread_across_processes_and_the_error_against_their_median(tmp_path, load_benchmark, monkeypatch):
    bench = load_benchmark("decode_noise")
    calls = []

    def measure(case, core, new_tokens):  # process k of a case: 1, 2, 3 ms (the real one runs a pinned subprocess)
        calls.append((case[1], core))
        k = sum(1 for pattern, _ in calls if pattern == case[1])
        return {"median_s": k * 1e-3, "steps_s": [k * 1e-3, k * 1.1e-3], "core": [core]}

    monkeypatch.setattr(bench, "measure", measure)
    out = tmp_path / "noise.json"
    assert bench.main(["--processes", "3", "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    from composer.costmodel.calibration.cases import VALIDATION

    assert len(result["rows"]) == len(VALIDATION) and len(calls) == 3 * len(VALIDATION)
    assert result["machine"] and result["torch"]  # the table is one CPU's fit: a figure names its machine
    # interleaved: every case once a round, the rounds on the cores in turn
    cores = sorted({core for _, core in calls})
    assert [core for _, core in calls[:: len(VALIDATION)]] == [cores[k % len(cores)] for k in range(3)]
    row = result["rows"][0]
    assert row["process_medians_ms"] == [1.0, 2.0, 3.0] and row["median_ms"] == 2.0
    assert abs(row["across_processes_spread"] - 1.0) < 1e-9  # (3 - 1) / 2
    assert abs(row["error_vs_median"] - (row["predicted_ms"] / 2.0 - 1)) < 1e-9
    assert [round(e, 9) for e in row["errors_vs_each"]] == [round(row["predicted_ms"] / m - 1, 9) for m in (1, 2, 3)]


def test_another_table_is_judged_on_the_same_measurements(tmp_path, load_benchmark, monkeypatch):
    """--compare-table: a second fit's predictions against the same medians; a table whose decode constants are
    slower predicts more and errs accordingly, on the very figures the first was judged on."""
    bench = load_benchmark("decode_noise")
    monkeypatch.setattr(bench, "measure", lambda case, core, new_tokens: {"median_s": 2e-3, "steps_s": [2e-3],
                                                                           "core": [core]})
    raw = json.loads((Path(bench.__file__).parents[1] / "composer/costmodel/constants.json").read_text())
    raw["devices"]["cpu"]["op_cost_s"]["decode"]["value"] *= 2  # every decode op twice as dear
    other = tmp_path / "other.json"
    other.write_text(json.dumps(raw))
    out = tmp_path / "noise.json"
    assert bench.main(["--processes", "2", "--json", str(out), "--compare-table", str(other)]) == 0
    result = json.loads(out.read_text())
    (compared,) = result["compared_tables"]
    assert compared["table"] == str(other) and len(compared["rows"]) == len(result["rows"])
    for mine, theirs in zip(result["rows"], compared["rows"], strict=True):
        assert theirs["predicted_ms"] > mine["predicted_ms"]
        assert abs(theirs["error_vs_median"] - (theirs["predicted_ms"] / mine["median_ms"] - 1)) < 1e-9
