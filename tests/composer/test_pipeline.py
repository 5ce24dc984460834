"""The end-to-end pipeline (composer/pipeline.py): recipe validation, the CPU demo at its smallest budget, resume."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from composer.cli import main
from composer.errors import ConfigError
from composer.pipeline import Pipeline, PipelineConfig, read_loss_curve

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "recipes" / "pipeline" / "cpu-demo.yaml"
RECIPES = sorted((ROOT / "recipes" / "pipeline").glob("*.yaml"))


@pytest.mark.parametrize("recipe", RECIPES, ids=lambda p: p.stem)
def test_every_pipeline_recipe_loads_and_its_target_extrapolates(recipe):
    from scaling.baselines import matched_baselines
    from scaling.extrapolate import extrapolate

    config = PipelineConfig.from_recipe(recipe)
    result = extrapolate("AAMMMM", config.extrapolate["to"], method=config.extrapolate.get("method", "auto"))
    assert set(matched_baselines(result.arch, tuple(config.baselines))) == set(config.baselines)
    plan = Pipeline(config).plan({"composite": result.pattern})  # TrainConfig accepts the shared train section
    assert [r.seed for r in plan] == config.seeds and len(set(config.seeds)) >= 3, "comparisons need seeds"


@pytest.mark.parametrize(
    "recipe, message",
    [
        ({"serach": {}}, "unknown option(s) ['serach']"),
        ({"search": {"trails": 3}, "extrapolate": {"to": "tiny"}}, "search has unknown option(s) ['trails']"),
        ({"train": {"arch": "AM"}, "extrapolate": {"to": "tiny"}}, "train has unknown option(s) ['arch']"),
        ({"extrapolate": {"method": "stack"}}, "needs 'to'"),
        ({"extrapolate": {"to": "tiny"}, "seeds": [0, 0]}, "seeds must be distinct"),
        ({"extrapolate": {"to": "tiny"}, "seeds": "0,x"}, "comma-separated seeds such as 0,1,2"),
        ({"extrapolate": {"to": "tiny"}, "seeds": []}, "seeds must be a non-empty list"),
        ({"extrapolate": {"to": "tiny"}, "train": {"seed": 3}}, "train has unknown option(s) ['seed']"),
    ],
)
def test_bad_recipes_name_the_problem(tmp_path, recipe, message):
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(recipe))
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("(", r"\(").replace(")", r"\)")):
        PipelineConfig.from_recipe(path)


def test_cli_usage_errors_exit_2(tmp_path, capsys):
    assert main(["pipeline", "--recipe", str(tmp_path / "missing.yaml")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["pipeline", "--recipe", str(DEMO), "--out", str(tmp_path), "--stages", "serch"]) == 2
    assert "unknown stage" in capsys.readouterr().err
    assert main(["pipeline", "--recipe", str(DEMO), "--out", str(tmp_path / "empty"), "--stages", "train"]) == 2
    assert "aggregate.json does not exist" in capsys.readouterr().err


@pytest.mark.slow
def test_cpu_demo_pipeline_runs_end_to_end_with_seeds_and_resumes(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("COMPOSER_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "pipeline"
    recipe = yaml.safe_load(DEMO.read_text())
    recipe["train"]["val_tokens"] = 8 * 128  # the test's budget; the recipe scores the whole held-out split
    small = tmp_path / "cpu-demo.yaml"
    small.write_text(yaml.safe_dump(recipe))
    argv = ["pipeline", "--recipe", str(small), "--out", str(out), "--trials", "2", "--tokens", "4096",
            "--seeds", "0,1"]
    assert main(argv) == 0
    printed = capsys.readouterr().out

    aggregate = json.loads((out / "aggregate.json").read_text())
    extrapolation = json.loads((out / "extrapolate.json").read_text())
    assert extrapolation["source_pattern"] == aggregate["pattern"]
    assert extrapolation["method"] == "stack" and extrapolation["target"] == "demo-4m"
    comparison = json.loads((out / "comparison.json").read_text())
    rows = comparison["models"]
    assert comparison["seeds"] == [0, 1] and comparison["reference"] == "llama"
    assert comparison["validation"]["same"], "every run is scored on the same held-out text"
    assert rows[0]["model"] == "composite" and rows[0]["pattern"] == extrapolation["compact"]
    names = [row["model"] for row in rows]
    for row in rows:
        losses = [row["val_losses"][str(seed)] for seed in (0, 1)]
        assert row["val_loss"] == pytest.approx(sum(losses) / 2) and row["tokens_per_s"] > 0 and row["params"] > 0
        assert row["val_loss_ci"][0] < row["val_loss"] < row["val_loss_ci"][1]
        assert row["tokens"] == rows[0]["tokens"], "every model trains on the same number of tokens"
        assert set(row["spiked_seeds"]) <= {0, 1}  # seeds whose training spiked (issue 16), marked in the table
        assert f"| {row['model']} |" in printed
        if row["model"] == "llama":
            assert row["verdict"] == "reference" and row["diff_vs_reference"] == 0
        else:
            reference = next(r for r in rows if r["model"] == "llama")["val_losses"]
            for seed in ("0", "1"):
                assert row["diff_per_seed"][seed] == pytest.approx(row["val_losses"][seed] - reference[seed])
            assert row["verdict"] in ("lower", "higher", "within noise")
        for seed in (0, 1):
            summary = json.loads((out / "train" / row["model"] / f"seed-{seed}" / "summary.json").read_text())
            assert summary["seed"] == seed and summary["val_fingerprint"] == comparison["validation"]["val_fingerprint"]
    assert set(names) - {"composite"} <= set(extrapolation["baselines"])
    markdown = (out / "comparison.md").read_text()
    assert markdown.startswith("| model |") and "Seeds 0, 1" in markdown
    with open(out / "comparison.csv") as f:
        assert len(f.read().splitlines()) == len(rows) + 1
    assert (out / "loss_curves.png").stat().st_size > 1000
    assert read_loss_curve(out / "train" / "composite" / "seed-0"), "the validation curve is read from the CSV logs"
    for name in names:  # one W&B run per (model, seed), not one run reused by all
        assert list((out / "train" / name / "seed-1" / "wandb").glob("offline-run-*")), name

    # Re-running resumes: the search study is complete, and no (model, seed) is trained again.
    summaries = sorted((out / "train").glob("*/seed-*/summary.json"))
    assert len(summaries) == 2 * len(names)
    before = {path: os.stat(path).st_mtime_ns for path in summaries}
    assert main(argv) == 0
    assert f"{len(summaries)} of {len(summaries)} runs already finished" in capsys.readouterr().err
    assert before == {path: os.stat(path).st_mtime_ns for path in summaries}
    # Changed settings are refused instead of being mixed into the table.
    assert main([*argv[:-3], "8192", "--seeds", "1"]) == 2
    assert "was trained with other settings: tokens=4096 (now 8192)" in capsys.readouterr().err


def test_a_spiked_seed_is_marked_in_the_table():
    from composer.pipeline import format_comparison

    row = {"model": "hybrid", "pattern": "AM", "layers": 2, "val_loss": 2.0, "val_loss_std": 0.1,
           "val_loss_ci": [1.9, 2.1], "diff_vs_reference": None, "diff_ci": None, "verdict": "reference",
           "tokens_per_s": 100.0, "tokens_per_s_ratio": 1.0, "params": 10, "kv_cache_bytes_per_token": 4,
           "spiked_seeds": [1]}
    comparison = {"models": [row], "reference": "hybrid", "confidence": 0.95, "seeds": [0, 1],
                  "validation": {"same": False}, "notes": []}
    assert "reference (spiked: seed 1)" in format_comparison(comparison)
