from __future__ import annotations

from pathlib import Path

import pytest

from composer.errors import ConfigError
from search.config import SearchConfig

RECIPES = sorted((Path(__file__).resolve().parents[2] / "recipes" / "search").glob("*.yaml"))


@pytest.mark.parametrize("recipe", RECIPES, ids=[r.stem for r in RECIPES])
def test_every_search_recipe_loads_with_an_existing_budget(recipe):
    from search.evaluators import make_evaluator

    config = SearchConfig.from_recipe(recipe)
    evaluator = make_evaluator(config.evaluator, config.budget, config.widths, config.data, config.tokenizer)
    assert evaluator.direction in ("maximize", "minimize")


def test_defaults_are_the_paper_setting():
    config = SearchConfig()
    assert (config.layers, config.primitives, config.sampler_name, config.evaluator) == (6, "AM", "gp", "lm")
    assert SearchConfig(objectives="score,kv").sampler_name == "nsga2"


@pytest.mark.parametrize("kwargs, strategy", [
    ({}, "successive-halving"),  # the lm evaluator on a budget that names a ladder: rank the finalists at the target
    ({"budget": "gpu"}, "successive-halving"),
    ({"evaluator": "mad"}, "one-shot"),  # halving trains its rungs with the lm evaluator only
    ({"objectives": "score,kv"}, "one-shot"),  # NSGA-II explores the trade-off over every candidate
    ({"objectives": "score,recall,kv"}, "successive-halving"),  # recall: only halving's finalists are probed
    ({"budget": "rung-cpu-0"}, "one-shot"),  # an lm budget that is no ladder
    ({"strategy": "one-shot"}, "one-shot"),  # asked for by name
])
def test_the_default_strategy_is_halving_where_it_applies(kwargs, strategy):
    config = SearchConfig(**kwargs)
    assert config.strategy == strategy
    assert strategy in config.study_name, "a resumed search finds the study of the strategy that ran"


def test_study_name_is_stable_so_reruns_resume():
    assert SearchConfig(seed=1).study_name == SearchConfig(seed=1).study_name != SearchConfig(seed=2).study_name
    assert SearchConfig(study="mine").study_name == "mine"


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"objectives": "kv"}, "objectives must start with 'score'"),
        ({"strategy": "end-incremental", "layers": 6, "depth": 6}, "must exceed --layers"),
        ({"trials": 0}, "trials must be at least 1"),
    ],
)
def test_invalid(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        SearchConfig(**kwargs)


def test_precision_is_checked_and_bf16_studies_do_not_mix_with_fp32_ones():
    with pytest.raises(ConfigError, match="precision must be auto .*; got 'fp16'"):
        SearchConfig(precision="fp16")
    fp32, bf16 = SearchConfig(precision="fp32"), SearchConfig(precision="bf16")
    assert fp32.resolved_precision == "fp32" and bf16.resolved_precision == "bf16"
    assert bf16.study_name == fp32.study_name + "-bf16"
    assert SearchConfig().resolved_precision in ("fp32", "bf16")


def test_a_search_recipe_that_says_wandb_off_means_off(tmp_path):
    recipe = tmp_path / "quiet.yaml"
    recipe.write_text("trials: 2\nwandb: off\n")
    assert SearchConfig.from_recipe(recipe).wandb == "off"


def test_attention_at_target_is_checked_and_a_kept_attention_study_does_not_mix_with_a_stacked_one():
    with pytest.raises(ConfigError, match="--attention-at-target must be one of repeat, keep, got 'drop'"):
        SearchConfig(attention_at_target="drop")
    assert SearchConfig(attention_at_target="repeat").study_name == SearchConfig().study_name  # old studies resume
    assert SearchConfig(attention_at_target="keep").study_name != SearchConfig().study_name


@pytest.mark.parametrize("kwargs, message", [
    ({"wandb": "nope"}, "--wandb must be one of auto, online, offline, off, got 'nope'"),
    ({"widths": "nope"}, "--preset: unknown preset 'nope'"),
    ({"target": "nope", "strategy": "one-shot"}, "--target: unknown preset 'nope'"),
    ({"layers": 0}, "layers must be a positive integer, got 0"),
    ({"min_share": {"A": 2.0}}, "min_share of A must be between 0 and 1, got 2.0"),
    ({"max_params": -5}, "--max-params is the most non-embedding parameters .* a positive whole number; got -5"),
    ({"max_params": 0}, "a positive whole number; got 0"),
    ({"text_field": "body"}, "--text-field names the column of --data's records that holds the text: give --data"),
    ({"text_field": "", "data": "notes.jsonl"}, "--text-field names the column that holds the text, got ''"),
])
def test_bad_input_is_refused_when_the_search_is_configured(kwargs, message):
    """Issue 47: these failed only after the search printed its header or wrote config.json (--widths, --layers,
    --min-share), failed a W&B call in the first trial (--wandb nope), or skipped every candidate (--max-params
    -5). SearchConfig refuses them, recipes included, before anything runs."""
    with pytest.raises(ConfigError, match=message):
        SearchConfig(**kwargs)


def test_a_text_field_changes_the_study_and_the_default_keeps_the_old_names():
    assert SearchConfig(text_field="text").study_name == SearchConfig().study_name  # old studies resume
    assert SearchConfig(data="notes.jsonl", text_field="body").study_name != SearchConfig(data="notes.jsonl").study_name
    assert SearchConfig(data="notes.jsonl", text_field="body").score_settings()["text_field"] == "body"
