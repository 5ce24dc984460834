"""benchmarks/probe_vs_trained.py: the probe's ranking against the trained models' recall, with both noises in
the interval, and the layouts one side lacks named with the command that measures them."""

from __future__ import annotations

import json

STACKS = {"llama": "AAA", "nemotron-h": "SSAS", "SDDMAS:keep": "SDDAS", "SDDMDM:repeat": "SDDD"}


def recall_scale_report(gains: dict[str, float], half_width: float) -> dict:
    """recall_scale.json's shape: part a's models, each with its recall report's copy rows."""
    def recall(gain):
        return {"copy": [{"kind": "random", "distance": 64, "gain": gain / 2, "ci": [0, 1], "n": 64},
                         {"kind": "random", "distance": 256, "gain": gain, "n": 64,
                          "ci": [gain - half_width, gain + half_width]},
                         {"kind": "text", "distance": 256, "gain": 9.0, "ci": [8.0, 10.0], "n": 64}]}
    return {"models": [{"part": "a", "layout": layout, "result": {"recall": recall(gain)}}
                       for layout, gain in gains.items()]
                      + [{"part": "b", "layout": "samba", "result": {"recall": recall(5.0)}}]}


def probe_report(accuracies: dict[str, list[float]]) -> dict:
    return {"runs": [{"pattern": stack, "seed": seed, "accuracy_by_length": {"64": 1.0, "1024": value}}
                     for stack, values in accuracies.items() for seed, value in enumerate(values)]}


def test_layouts_map_to_the_stacks_the_probe_trains(load_benchmark):
    bench = load_benchmark("probe_vs_trained")
    assert {layout: bench.probe_stack(layout) for layout in STACKS} == STACKS


def test_agreeing_rankings_with_tight_figures_predict_and_reversed_ones_do_not(load_benchmark, tmp_path):
    bench = load_benchmark("probe_vs_trained")
    gains = {"llama": 2.0, "nemotron-h": 1.0, "SDDMAS:keep": 0.5, "SDDMDM:repeat": 0.0}
    probe = {"AAA": [0.9, 0.92], "SSAS": [0.5, 0.52], "SDDAS": [0.3, 0.31], "SDDD": [0.01, 0.02]}
    agree = bench.compare(bench.trained_figures([write(tmp_path / "a.json", recall_scale_report(gains, 0.01))]),
                          bench.probe_accuracies([write(tmp_path / "p.json", probe_report(probe))]))
    assert agree["n"] == 4 and agree["spearman"] == 1.0 and agree["ci"][0] > 0 and "predicts" in agree["verdict"]
    assert [row["trained"] for row in agree["rows"] if row["layout"] == "llama"] == [2.0]  # the longest distance
    assert "samba" not in {row["layout"] for row in agree["rows"]}  # part b is not the recall comparison

    noisy = bench.compare(bench.trained_figures([write(tmp_path / "n.json", recall_scale_report(gains, 3.0))]),
                          bench.probe_accuracies([tmp_path / "p.json"]))
    assert noisy["spearman"] == 1.0 and noisy["ci"][0] <= 0 and "not shown" in noisy["verdict"]

    reversed_gains = dict(zip(gains, reversed(list(gains.values()))))
    against = bench.compare(bench.trained_figures([write(tmp_path / "r.json",
                                                         recall_scale_report(reversed_gains, 0.01))]),
                            bench.probe_accuracies([tmp_path / "p.json"]))
    assert against["spearman"] == -1.0 and against["ci"][1] < 0


def test_a_stack_without_a_probe_is_named_with_its_command(load_benchmark, tmp_path):
    bench = load_benchmark("probe_vs_trained")
    gains = {"llama": 2.0, "nemotron-h": 1.0, "SDDMAS:keep": 0.5}
    out = tmp_path / "out"
    assert bench.main(["--trained", str(write(tmp_path / "a.json", recall_scale_report(gains, 0.1))),
                       "--probe", str(write(tmp_path / "p.json", probe_report({"AAA": [0.9], "SSAS": [0.4]}))),
                       "--out", str(out)]) == 0
    result = json.loads((out / "probe_vs_trained.json").read_text())
    assert result["n"] == 2 and result["spearman"] is None and "at least 3" in result["verdict"]
    assert result["missing_probe"] == [{"layout": "SDDMAS:keep", "stack": "SDDAS"}]
    assert "--patterns SDDAS" in (out / "probe_vs_trained.md").read_text()


def write(path, report):
    path.write_text(json.dumps(report))
    return path


def test_a_finished_search_gives_both_measures_of_its_finalists(load_benchmark, tmp_path, capsys):
    # leaderboard.json rows: the probe's accuracy at its longest length (recall) and the trained models' seed-averaged
    # copy gain (trained_recall); a finalist the probe did not train stays off the probe's side
    bench = load_benchmark("probe_vs_trained")
    rows = [{"pattern": "SADDDD", "recall": 0.9, "trained_recall": {"value": 0.3, "ci": [0.29, 0.31], "sequences": 32,
                                                                      "distance": 64, "seeds": [0, 1, 2]}},
            {"pattern": "SMSAMS", "recall": 0.5, "trained_recall": {"value": 0.2, "ci": [0.19, 0.21], "sequences": 32,
                                                                      "distance": 64}},
            {"pattern": "SDDMSM", "recall": 0.1, "trained_recall": {"value": 0.1, "ci": [0.09, 0.11], "sequences": 32,
                                                                      "distance": 64}},
            {"pattern": "DMDMAM", "trained_recall": {"value": 0.0, "ci": [-0.01, 0.01], "sequences": 32,
                                                     "distance": 64}}]
    search = tmp_path / "search"
    search.mkdir()
    (search / "leaderboard.json").write_text(json.dumps(rows))
    trained, probe = bench.search_figures(search)
    assert probe == {"SADDDD": [0.9], "SSAS": [0.5], "SDDS": [0.1]} and set(trained) == {r["pattern"] for r in rows}
    assert trained["SADDDD"][0]["value"] == 0.3 and 0 < trained["SADDDD"][0]["se"] < 0.01
    out = tmp_path / "out"
    assert bench.main(["--from-search", str(search), "--out", str(out)]) == 0
    result = json.loads((out / "probe_vs_trained.json").read_text())
    assert result["n"] == 3 and result["spearman"] == 1.0 and result["ci"][0] > 0
    assert [row["trained_seeds"] for row in result["rows"]] == [3, 1, 1]  # SADDDD's figure averages its 3 seeds
    assert result["missing_probe"] == [{"layout": "DMDMAM", "stack": "DDA"}]
    try:
        bench.main(["--from-search", str(tmp_path)])
    except SystemExit as stop:
        assert stop.code == 2
    assert "no leaderboard.json" in capsys.readouterr().err
