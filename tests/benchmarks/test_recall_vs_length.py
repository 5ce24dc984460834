"""``benchmarks/recall_vs_length.py`` at a tiny budget: each (pattern, seed) trained once at every length, the table,
ratios against attention and plot written, and a second call trains nothing."""

from __future__ import annotations

import json


def test_recall_vs_length_measures_each_length_reports_ratios_and_resumes(tmp_path, capsys, load_benchmark):
    script = load_benchmark("recall_vs_length")
    out = tmp_path / "recall"
    argv = ["--budget", "smoke", "--lengths", "32,64", "--kv-ratio", "8", "--steps", "3", "--widths", "tiny",
            "--patterns", "AA,SS,[AS]S", "--out", str(out)]
    assert script.main(argv) == 0
    table = capsys.readouterr().out
    data = json.loads((out / "recall.json").read_text())
    assert [row["pattern"] for row in data["patterns"]] == ["AA", "SS", "[AS]S"]
    for row in data["patterns"]:
        assert set(row["accuracy_by_length"]) == {"32", "64"} and 0 <= row["mean"] <= 1
        assert set(row["vs_attention"]) == {"32", "64"} and row["interval_kind"] == "test queries"
        low, high = row["interval_by_length"]["64"]
        assert low <= row["accuracy_by_length"]["64"] <= high
    by = {row["pattern"]: row for row in data["patterns"]}
    assert by["SS"]["kv_cache_bytes_per_token"] == 0 < by["SS"]["state_bytes"]
    assert by["AA"]["kv_cache_bytes_per_token"] > 0 == by["AA"]["state_bytes"]
    assert by["[AS]S"]["kv_cache_bytes_per_token"] == by["AA"]["kv_cache_bytes_per_token"] / 2
    assert data["reference"] == "AA" and by["AA"]["vs_attention"]["32"] in (1.0, None)
    assert "| `SS` |" in table and "32 (4 pairs)" in table
    assert (out / "recall.png").stat().st_size > 1000 and (out / "recall.md").is_file()
    finished = {p: p.stat().st_mtime_ns for p in (out / "runs").glob("*.json")}
    assert len(finished) == 3
    assert script.main(argv) == 0
    assert {p: p.stat().st_mtime_ns for p in (out / "runs").glob("*.json")} == finished, "nothing retrained"


def test_an_accuracy_gets_a_seed_interval_with_seeds_and_a_test_sample_interval_without(load_benchmark):
    script = load_benchmark("recall_vs_length")
    ci, kind = script.accuracy_interval([0.5, 0.6, 0.7], queries=1024)
    assert kind == "seeds" and ci[0] < 0.6 < ci[1] and ci[1] - ci[0] > 0.4  # t with 2 degrees of freedom
    ci, kind = script.accuracy_interval([0.5], queries=1024)
    assert kind == "test queries" and 0.46 < ci[0] < 0.5 < ci[1] < 0.54
    assert script.accuracy_interval([0.07, 0.02], queries=1024)[0][0] == 0.0  # t would go below 0: no accuracy does
    assert script.accuracy_interval([0.999, 0.99], queries=1024)[0][1] == 1.0


def test_a_rate_sweep_reports_each_pattern_at_its_lowest_final_training_loss(tmp_path, capsys, load_benchmark):
    script = load_benchmark("recall_vs_length")
    out = tmp_path / "sweep"
    argv = ["--budget", "smoke", "--lengths", "32", "--kv-ratio", "8", "--steps", "3", "--widths", "tiny",
            "--patterns", "AA,SS", "--lrs", "3e-3,1e-3", "--out", str(out)]
    assert script.main(argv) == 0
    table = capsys.readouterr().out
    assert sorted(p.name for p in (out / "runs").glob("*.json")) == [
        "AA-lr0.001-seed0.json", "AA-lr0.003-seed0.json", "SS-lr0.001-seed0.json", "SS-lr0.003-seed0.json"]
    data = json.loads((out / "recall.json").read_text())
    assert data["settings"]["lrs"] == [0.001, 0.003] and data["settings"]["lr"] is None
    for row in data["patterns"]:
        assert set(row["sweep"]) == {"0.001", "0.003"}
        losses = {float(rate): point["train_loss"] for rate, point in row["sweep"].items()}
        assert row["lr"] == min(losses, key=losses.get)
        assert f"| `{row['pattern']}` | {row['lr']:g} (edge) |" in table
    assert "lr chosen per pattern from 0.001, 0.003 by final training loss" in table
    assert all(row["lr_at_edge"] for row in data["patterns"])  # with two rates either one is an edge
    assert "Learning-rate sweep" in table and "| pattern | lr 0.001 | lr 0.003 |" in table


def test_the_chosen_rate_never_is_one_that_diverged(load_benchmark):
    script = load_benchmark("recall_vs_length")
    by_lr = {0.01: {0: {"train_loss": float("nan")}}, 0.003: {0: {"train_loss": 4.8}, 1: {"train_loss": 4.6}},
             0.001: {0: {"train_loss": 4.0}, 1: {"train_loss": 5.0}}}
    assert script.chosen_rate(by_lr) == 0.001
    assert script.chosen_rate({0.01: {0: {"train_loss": float("nan")}}, 0.1: {0: {}}}) in (0.01, 0.1)


def test_bad_rates_are_a_one_line_usage_error_naming_the_flag(tmp_path, capsys, load_benchmark):
    script = load_benchmark("recall_vs_length")
    assert script.main(["--lrs", "1e-3,fast", "--out", str(tmp_path)]) == 2
    assert capsys.readouterr().err.strip() == ("error: --lrs must be comma-separated learning rates such as "
                                               "1e-3,2e-3,3e-3, got '1e-3,fast'")
    assert script.main(["--lrs", "1e-3,1e-3", "--out", str(tmp_path)]) == 2
    assert "--lrs has a repeated rate" in capsys.readouterr().err
