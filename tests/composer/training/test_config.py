from __future__ import annotations

from pathlib import Path

import pytest

from composer.errors import ConfigError
from composer.training.config import TrainConfig
from composer.training.run import plan_run

RECIPES = sorted((Path(__file__).resolve().parents[3] / "recipes" / "train").glob("*.yaml"))


def test_plan_maps_batch_onto_devices_and_steps():
    plan = plan_run(TrainConfig(tokens=100_000, seq_len=128, batch_size=16, micro_batch_size=4), world_size=2)
    assert (plan.micro_batch_size, plan.accumulate, plan.tokens_per_step) == (4, 2, 2048)
    assert plan.steps == 48 and plan.tokens == 48 * 2048
    assert plan.warmup_steps == 2 and plan.val_interval == 48  # short runs validate at the end only
    long = plan_run(TrainConfig(tokens=10_000_000, seq_len=100, batch_size=10), world_size=1)
    assert long.steps == 10_000 and long.val_interval == 1000 and long.checkpoint_interval == 2000


def test_train_help_says_how_often_the_default_run_validates():
    """Issue 61, item 4: --val-interval's help said "default: 10 per run", but the interval is at least 50 steps,
    so composer train's default run (244 steps) validates 4 times, and runs under 500 steps fewer than 10."""
    from composer.cli.train import HELP

    default = plan_run(TrainConfig(), world_size=1)
    assert default.steps == 244 and default.steps // default.val_interval == 4
    assert "10 per run" not in HELP["val_interval"] and "at least 50 steps" in HELP["val_interval"]
    for steps in (500, 5_000):  # the help's 10: from 500 steps
        plan = plan_run(TrainConfig(tokens=steps * 16 * 256), world_size=1)
        assert plan.steps // plan.val_interval == 10


@pytest.mark.parametrize(
    "kwargs, world, message",
    [
        ({"batch_size": 6}, 4, "not divisible by the 4 devices"),
        ({"batch_size": 8, "micro_batch_size": 3}, 2, "multiple of micro_batch_size x devices"),
        ({"tokens": 100}, 1, "less than one step"),
    ],
)
def test_plan_errors(kwargs, world, message):
    with pytest.raises(ConfigError, match=message):
        plan_run(TrainConfig(**kwargs), world_size=world)


def test_invalid_values():
    with pytest.raises(ConfigError, match="parallelism must be one of"):
        TrainConfig(strategy="deepspeed")


@pytest.mark.parametrize("recipe", RECIPES, ids=[r.stem for r in RECIPES])
def test_every_recipe_loads_and_builds_its_architecture(recipe):
    from composer.presets import resolve_architecture

    config = TrainConfig.from_recipe(recipe)
    arch, _ = resolve_architecture(config.arch, config.preset, "tiny")
    assert arch.n_layers > 0
    plan_run(config, world_size=int(config.devices) * config.num_nodes)


def test_recipe_errors(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("tokens: 10\nlearning_rate: 3\n")
    with pytest.raises(ConfigError, match=r"unknown option\(s\) \['learning_rate'\]"):
        TrainConfig.from_recipe(bad)
    with pytest.raises(ConfigError, match="does not exist"):
        TrainConfig.from_recipe(tmp_path / "missing.yaml")


def test_cli_flags_override_the_recipe(tmp_path):
    recipe = tmp_path / "r.yaml"
    recipe.write_text("tokens: 1000\nlr: 0.1\n")
    config = TrainConfig.from_recipe(recipe, lr=0.5, tokens=None)
    assert (config.tokens, config.lr) == (1000, 0.5)


def test_paper_depths_in_the_1b_recipes():
    from composer.presets import resolve_architecture

    for name, layers, attention in (("composite-stacked-1b", 27, 9), ("composite-stretched-1b", 29, 10)):
        config = TrainConfig.from_recipe(next(r for r in RECIPES if r.stem == name))
        arch, _ = resolve_architecture(config.arch, config.preset, "tiny")
        assert (arch.n_layers, arch.counts["A"]) == (layers, attention)


def test_a_recipe_that_says_wandb_off_means_off(tmp_path):
    """YAML 1.1 reads an unquoted `off` as false; the recipe's author meant W&B off, not a type error."""
    recipe = tmp_path / "quiet.yaml"
    recipe.write_text("tokens: 1000\nwandb: off\n")
    assert TrainConfig.from_recipe(recipe).wandb == "off"
    with pytest.raises(ConfigError, match="wandb must be one of"):
        TrainConfig(wandb=True)  # `on` is not a mode: online or offline must be said
