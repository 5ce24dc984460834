"""benchmarks/trained_recall.py: each layout trained alike, its rate chosen on the first seed, scored by its own
recall; a rerun trains nothing, and another setting in the same --out is refused."""

from __future__ import annotations

import json

TINY = ["--preset", "tiny", "--seq-len", "128", "--tokens", "8192", "--batch-size", "8", "--warmup", "2",
        "--sequences", "2", "--val-tokens", "2048", "--layouts", "llama"]


def test_each_seed_after_the_first_trains_at_the_chosen_rate_and_a_rerun_trains_nothing(tmp_path, load_benchmark):
    bench = load_benchmark("trained_recall")
    trained = []
    real = bench.train_run

    def counted(pattern, args, lr, seed, out):
        trained.append((pattern, lr, seed))
        return real(pattern, args, lr, seed, out)

    bench.train_run = counted
    out = tmp_path / "out"
    assert bench.main([*TINY, "--out", str(out)]) == 0
    record = json.loads((out / "runs.json").read_text())["layouts"]["llama"]
    chosen = record["lr"]
    assert record["pattern"] == "AMAMAM" and sorted(trained) == sorted(
        [("AMAMAM", 1e-3, 0), ("AMAMAM", 2e-3, 0), ("AMAMAM", chosen, 1)])
    for seed in ("0", "1"):
        run = record["seeds"][seed]
        assert run["lr"] == chosen and run["val_loss"] > 0
        kinds = {row["kind"] for row in run["recall"]["copy"]}
        assert kinds == {"text", "random"} and run["recall"]["seq_len"] == 128
        assert all(row["gain_ci"] is None or row["gain_ci"][0] <= row["gain"] <= row["gain_ci"][1]
                   for row in run["recall"]["copy"])
    assert set(record["seeds"]["0"]["lr_sweep"]) == {"0.001", "0.002"} and "model_dir" not in record["seeds"]["0"]
    table = (out / "trained_recall.md").read_text()
    assert table.count("| llama | `AMAMAM` |") == 2
    assert bench.main([*TINY, "--out", str(out)]) == 0 and len(trained) == 3  # everything was there
    assert bench.main([*TINY, "--tokens", "16384", "--out", str(out)]) == 2 and len(trained) == 3
