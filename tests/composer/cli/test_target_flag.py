"""Issue 49, "one name, one meaning": the preset an answer is grown to is ``--target`` on every command (as on
``composer search``); ``--to`` on extrapolate, transfer and pipeline, the pipeline recipes' ``extrapolate.to`` and the
transfer recipes' ``to`` still work, with a one-line notice naming the new spelling."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from composer.cli import build_parser, main
from composer.cli.parsing import announce_old_spellings
from composer.errors import ConfigError
from composer.experiments.pipeline import PipelineConfig
from composer.experiments.transfer import TransferConfig
from composer.training import config as train_config

ROOT = Path(__file__).resolve().parents[3]
FLAG_NOTICE = "--to is now --target; the old spelling will go"


@pytest.fixture(autouse=True)
def _fresh(monkeypatch):
    monkeypatch.setattr(train_config, "_noticed", set())  # the notice is printed once per process


def test_extrapolate_to_is_target_with_a_notice(capsys):
    assert main(["extrapolate", "AAMMMM", "--target", "demo-4m", "--json"]) == 0
    new = capsys.readouterr()
    assert FLAG_NOTICE not in new.err
    assert main(["extrapolate", "AAMMMM", "--to", "demo-4m", "--json"]) == 0
    old = capsys.readouterr()
    assert json.loads(old.out) == json.loads(new.out) and old.err.strip() == FLAG_NOTICE
    assert main(["extrapolate", "AAMMMM"]) == 2
    err = capsys.readouterr().err
    assert "give --target PRESET" in err and err.strip().count("\n") == 0
    with pytest.raises(SystemExit):
        build_parser().parse_args(["extrapolate", "--help"])
    shown = capsys.readouterr().out
    assert "--target PRESET" in shown and "--to " not in shown, "the old spelling works but is not advertised"


@pytest.mark.parametrize("command", ["pipeline", "transfer"])
def test_the_old_flag_sets_target(command, capsys):
    argv = ["--recipe", "r.yaml"] if command == "pipeline" else []
    args = build_parser().parse_args([command, *argv, "--to", "tiny"])
    announce_old_spellings(args)  # as composer does once the command line is accepted
    assert args.target == "tiny" and capsys.readouterr().err.strip() == FLAG_NOTICE


def test_a_pipeline_recipe_with_extrapolate_to_still_loads(tmp_path, capsys):
    recipe = tmp_path / "old.yaml"
    recipe.write_text(yaml.safe_dump({"extrapolate": {"to": "tiny", "method": "auto"}}))
    assert PipelineConfig.from_recipe(recipe).extrapolate == {"target": "tiny", "method": "auto"}
    assert capsys.readouterr().err.strip() == "extrapolate.to is now extrapolate.target; the old spelling will go"
    assert PipelineConfig.from_recipe(recipe, **{"extrapolate.target": "demo-4m"}).extrapolate["target"] == "demo-4m"


def test_a_transfer_recipe_with_to_still_loads(tmp_path, capsys):
    recipe = tmp_path / "old.yaml"
    recipe.write_text("search: runs/search\nto: tiny\n")
    assert TransferConfig.from_recipe(recipe).target == "tiny"
    assert capsys.readouterr().err.strip() == "to is now target; the old spelling will go"
    assert TransferConfig.from_recipe(recipe, target="demo-4m").target == "demo-4m", "the flag wins"
    assert TransferConfig(search="s", to="tiny").target == "tiny" and TransferConfig(search="s").target == "demo-4m"
    assert "to" not in TransferConfig(search="s").to_dict()
    with pytest.raises(ConfigError, match="to is the old spelling of target"):
        TransferConfig(search="s", to="tiny", target="demo-4m")


def test_the_recipes_say_target():
    pipeline = [yaml.safe_load(p.read_text()) for p in sorted((ROOT / "recipes" / "pipeline").glob("*.yaml"))]
    transfer = [yaml.safe_load(p.read_text()) for p in sorted((ROOT / "recipes" / "transfer").glob("*.yaml"))]
    assert pipeline and all("target" in r["extrapolate"] and "to" not in r["extrapolate"] for r in pipeline)
    assert transfer and all("target" in r and "to" not in r for r in transfer)
