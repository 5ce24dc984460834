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
    Pipeline(config).train_config("composite", result.pattern)  # TrainConfig accepts the shared train section


@pytest.mark.parametrize(
    "recipe, message",
    [
        ({"serach": {}}, "unknown option(s) ['serach']"),
        ({"search": {"trails": 3}, "extrapolate": {"to": "tiny"}}, "search has unknown option(s) ['trails']"),
        ({"train": {"arch": "AM"}, "extrapolate": {"to": "tiny"}}, "train has unknown option(s) ['arch']"),
        ({"extrapolate": {"method": "stack"}}, "needs 'to'"),
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
def test_cpu_demo_pipeline_runs_end_to_end_at_its_smallest_budget_and_resumes(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("COMPOSER_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "pipeline"
    argv = ["pipeline", "--recipe", str(DEMO), "--out", str(out), "--trials", "2", "--tokens", "4096"]
    assert main(argv) == 0
    printed = capsys.readouterr().out

    aggregate = json.loads((out / "aggregate.json").read_text())
    extrapolation = json.loads((out / "extrapolate.json").read_text())
    assert extrapolation["source_pattern"] == aggregate["pattern"]
    assert extrapolation["method"] == "stack" and extrapolation["target"] == "demo-4m"
    rows = json.loads((out / "comparison.json").read_text())
    assert rows[0]["model"] == "composite" and rows[0]["pattern"] == extrapolation["compact"]
    names = [row["model"] for row in rows]
    for row in rows:
        assert row["val_loss"] > 0 and row["tokens_per_s"] > 0 and row["params"] > 0
        assert row["tokens"] == rows[0]["tokens"], "every model trains on the same number of tokens"
        assert f"| {row['model']} |" in printed
    assert set(names) - {"composite"} <= set(extrapolation["baselines"])
    assert (out / "comparison.md").read_text().startswith("| model |")
    assert (out / "loss_curves.png").stat().st_size > 1000
    assert read_loss_curve(out / "train" / "composite"), "the validation curve is read from the CSV logs"
    for name in names:  # one W&B run per model, not one run reused by all
        assert list((out / "train" / name / "wandb").glob("offline-run-*")), name

    # Re-running resumes: the search study is complete, and no model is trained again.
    before = {name: os.stat(out / "train" / name / "summary.json").st_mtime_ns for name in names}
    assert main(argv) == 0
    assert "done (val_loss" in capsys.readouterr().err
    after = {name: os.stat(out / "train" / name / "summary.json").st_mtime_ns for name in names}
    assert before == after
