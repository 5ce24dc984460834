"""benchmarks/layout_grid_summary.py: each layout at each seed's own best rate against the baseline, paired by seed,
and the diagnostics read at that rate (issue 71)."""

from __future__ import annotations

import json


def record(layers: str, losses: list[float], entropy: float) -> dict:
    heads = {str(i): [entropy, entropy / 4] for i, s in enumerate(layers) if s == "A"}
    return {"layers": list(layers), "loss": [{"step": i, "loss": x} for i, x in enumerate(losses)],
            "grad_norm": [{"step": i, "norms": [1.0 + j for j in range(len(layers))]} for i in range(3)],
            "entropy": [{"step": 0, "heads": heads}, {"step": 25, "heads": heads}]}


def row(layout: str, seed: int, sweep: dict[str, float], entropy: float) -> dict:
    return {"layout": layout, "seed": seed, "precision": "bf16", "budget": "rung-cpu-1-grid", "widths": "demo-4m",
            "non_embedding_params": 1,
            "lr_sweep": sweep, "diagnostics": {lr: record(layout, [5.0 - 0.1 * i + float(lr) for i in range(11)], entropy)
                                               for lr in sweep}}


def test_each_layout_at_each_seeds_best_rate_with_its_diagnostics(tmp_path, load_benchmark):
    bench = load_benchmark("layout_grid_summary")
    grid = tmp_path / "grid.jsonl"
    rows = [row("AMAM", 0, {"0.0005": 2.40, "0.001": 2.53}, 3.0), row("AMAM", 1, {"0.0005": 2.39, "0.001": 2.32}, 3.0),
            row("AAMM", 0, {"0.001": 2.65}, 0.8), row("AAMM", 1, {"0.0005": 2.38, "0.001": 2.33}, 0.8),
            row("AAMM", 0, {"0.0005": 2.41}, 0.8),  # a later row at a further rate joins seed 0's sweep
            {**row("AAMM", 0, {"0.0005": 1.0}, 0.8), "budget": "rung-cpu-1-grid-warmup20"}]  # another setting
    grid.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "summary.json"
    assert bench.main([str(grid), "--baseline", "AMAM", "--json", str(out), "--plot", str(tmp_path / "f.png")]) == 0
    result = json.loads(out.read_text())["settings"]["bf16 rung-cpu-1-grid"]
    aamm = result["layouts"]["AAMM"]["seeds"]
    # seed 0 chose 5e-4 (the grid's lower edge), seed 1 1e-3 (its upper): both flagged at the edge
    assert (aamm["0"]["lr"], aamm["0"]["at_edge"], aamm["1"]["lr"]) == (5e-4, True, 1e-3)
    # the diagnostics are those of the chosen rate's run (its losses carry the rate): the loss at step 10 is the
    # mean of steps 8-10, the gradient norms each layer's median
    assert abs(aamm["1"]["train_loss"]["10"] - (4.1 + 1e-3)) < 1e-9 and list(aamm["1"]["train_loss"]) == ["10"]
    assert abs(aamm["0"]["train_loss"]["10"] - (4.1 + 5e-4)) < 1e-9 and aamm["0"]["grad_norm"] == [1.0, 2.0, 3.0, 4.0]
    assert aamm["1"]["entropy"]["1"]["adjacent"] and not aamm["1"]["entropy"]["0"]["adjacent"]
    assert aamm["1"]["entropy"]["0"]["collapsed"] == 2 and aamm["1"]["entropy"]["0"]["lowest"] == 0.2
    [pair] = result["against_baseline"]
    assert sorted(json.loads(out.read_text())["settings"]) == ["bf16 rung-cpu-1-grid", "bf16 rung-cpu-1-grid-warmup20"]
    # paired at each one's best: seed 0 2.41 - 2.40, seed 1 2.33 - 2.32
    assert pair["at_best_rates"]["differences"] == [2.41 - 2.40, 2.33 - 2.32]
    assert pair["at_each_rate"]["0.001"]["differences"] == [2.65 - 2.53, 2.33 - 2.32]
    assert (tmp_path / "f.png").stat().st_size > 10_000
    # a figure of chosen settings only; one the grids lack is a usage error
    argv = [str(grid), "--baseline", "AMAM", "--plot", str(tmp_path / "g.png")]
    assert bench.main([*argv, "--plot-settings", "bf16 rung-cpu-1-grid"]) == 0 and (tmp_path / "g.png").is_file()
    assert bench.main([*argv, "--plot-settings", "fp32 nope"]) == 2
