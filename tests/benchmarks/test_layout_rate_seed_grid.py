"""benchmarks/layout_rate_seed_grid.py: each layout at every rate and seed, through the search's lm evaluator (its
training replaced by the bookkeeping tests' deterministic fake), a row per layout and seed, a rerun training none."""

from __future__ import annotations

import json


def test_every_layout_at_every_rate_and_seed_once(tmp_path, fake, load_benchmark):
    bench = load_benchmark("layout_rate_seed_grid")
    out = tmp_path / "grid.jsonl"
    argv = ["--layouts", "AAMM", "AMAM", "--budget", "rung-smoke-0", "--widths", "tiny", "--lrs", "5e-4,1e-3,2e-3",
            "--seeds", "0,1", "--precision", "fp32", "--json", str(out)]
    assert bench.main(argv) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["layout"], r["seed"]) for r in rows] == [("AAMM", 0), ("AMAM", 0), ("AAMM", 1), ("AMAM", 1)]
    assert all(sorted(float(k) for k in r["lr_sweep"]) == [5e-4, 1e-3, 2e-3] for r in rows)
    assert all(r["score"] == r["lr_sweep"][str(r["lr"])] for r in rows)  # the best rate's loss is the score
    assert fake.trained == ["AAMM"] * 3 + ["AMAM"] * 3 + ["AAMM"] * 3 + ["AMAM"] * 3  # as given: not grown
    assert bench.main(argv) == 0
    assert len(fake.trained) == 12 and len(out.read_text().splitlines()) == 4, "a rerun trained rows it had"


def test_one_rate_alone_is_a_sweep_of_one(tmp_path, fake, load_benchmark):
    bench = load_benchmark("layout_rate_seed_grid")
    out = tmp_path / "grid.jsonl"
    argv = ["--layouts", "AAMM", "--budget", "rung-smoke-0", "--widths", "tiny", "--lrs", "2e-3", "--seeds", "1",
            "--precision", "fp32", "--json", str(out)]
    assert bench.main(argv) == 0 and bench.main(argv) == 0
    [row] = [json.loads(line) for line in out.read_text().splitlines()]
    assert row["lr_sweep"] == {"0.002": row["score"]} and row["lr"] == 2e-3 and len(fake.trained) == 1


def test_layouts_matched_to_the_references_parameters_by_width(load_benchmark):
    """Issue 71's controlled test compares at equal non-embedding parameters: Llama's alternation (fewer MLPs than
    AAMMMM's grown layout) trains wider, the 1:2 layout with attention apart (the same counts) at the preset."""
    from composer.accounting import non_embedding_params
    from composer.presets import get_preset

    bench = load_benchmark("layout_rate_seed_grid")
    reference = "AAMMMMAAMMMMAM"
    target = non_embedding_params(get_preset("demo-4m").arch.with_pattern(reference))
    assert bench.matched_widths("AMMAMMAMMAMMAM", reference, "demo-4m") == "demo-4m"
    assert bench.matched_widths(reference, reference, "demo-4m") == "demo-4m"
    for layout in ("AMAMAMAMAMAMAM", "AAMMMMAAMMMM"):
        widths = bench.matched_widths(layout, reference, "demo-4m")
        arch = get_preset(widths).arch
        assert arch.d_model > 192, widths
        assert abs(non_embedding_params(arch.with_pattern(layout)) / target - 1) < 0.05, widths


def test_diagnostics_of_every_run_in_its_row(tmp_path, load_benchmark, monkeypatch):
    """--diagnostics: each rate's run (real training, through the lm evaluator's run_callbacks) records every
    layer's gradient norms and the attention layers' head entropies in the row."""
    monkeypatch.setenv("COMPOSER_CACHE", str(tmp_path / "cache"))  # its own prepared corpus, apart from xdist peers
    bench = load_benchmark("layout_rate_seed_grid")
    out = tmp_path / "grid.jsonl"
    argv = ["--layouts", "AAMM", "--budget", "rung-smoke-0", "--widths", "tiny", "--lrs", "1e-3,3e-3", "--seeds", "0",
            "--precision", "fp32", "--diagnostics", "6", "--json", str(out)]
    assert bench.main(argv) == 0
    [row] = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(row["diagnostics"]) == ["0.001", "0.003"]
    for record in row["diagnostics"].values():
        assert record["layers"] == ["A", "A", "M", "M"]
        assert [r["step"] for r in record["grad_norm"]] == list(range(6))
        assert sorted(record["entropy"][0]["heads"]) == ["0", "1"]


def test_a_longer_warmup_is_its_own_budget_and_its_own_rows(tmp_path, fake, load_benchmark):
    """--warmup: the runs train under that warmup (the budget's name says so) and are rows apart from the
    budget's own, so a file holding both trains each once."""
    bench = load_benchmark("layout_rate_seed_grid")
    out = tmp_path / "grid.jsonl"
    argv = ["--layouts", "AAMM", "--budget", "rung-smoke-0", "--widths", "tiny", "--lrs", "1e-3", "--precision", "fp32",
            "--json", str(out)]
    assert bench.main(argv) == 0
    assert bench.main([*argv, "--warmup", "4"]) == 0 and bench.main([*argv, "--warmup", "4"]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["budget"] for r in rows] == ["rung-smoke-0-grid", "rung-smoke-0-grid-warmup4"]
    assert len(fake.trained) == 2  # the rerun with --warmup 4 trained nothing again
