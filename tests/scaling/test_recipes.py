"""The train recipes hold what scaling.rules and scaling.extrapolate give for their preset."""

from __future__ import annotations

from pathlib import Path

import pytest

from composer.accounting import analyze
from composer.presets import get_preset, resolve_architecture
from composer.training.config import TrainConfig
from scaling.extrapolate import extrapolate
from scaling.rules import hyperparameters, token_budget

RECIPES = Path(__file__).resolve().parents[2] / "recipes" / "train"
SCALED = sorted(p for p in RECIPES.glob("*.yaml") if p.stem.startswith(("llama-", "composite-")))
SEARCHED = {"composite-stacked": ("AAMMMM", "stack"), "composite-stretched": ("AAMMMMMAAMMMAMMM", "stretch")}


def test_the_scaled_recipes_exist():
    assert len(SCALED) == 9


@pytest.mark.parametrize("recipe", SCALED, ids=[p.stem for p in SCALED])
def test_recipe_matches_the_rules_of_its_scale(recipe):
    config = TrainConfig.from_recipe(recipe)
    reference = analyze(get_preset(config.preset).arch)  # the scale's Llama: same budget for every model there
    assert config.tokens == token_budget(reference.params, "paper")
    expected = hyperparameters(reference.non_embedding_params)
    for key, value in expected.items():
        if key not in ("global_batch_tokens", "sources"):
            assert getattr(config, key) == value, key


@pytest.mark.parametrize("recipe", [p for p in SCALED if p.stem.startswith("composite-")], ids=lambda p: p.stem)
def test_composite_recipe_pattern_is_the_extrapolators_output(recipe):
    config = TrainConfig.from_recipe(recipe)
    arch, _ = resolve_architecture(config.arch, config.preset, "tiny")
    source, method = SEARCHED[recipe.stem.rsplit("-", 1)[0]]
    result = extrapolate(source, config.preset, method=method)
    assert arch.pattern == result.pattern
    stats = analyze(arch)
    header = recipe.read_text()
    assert f"{stats.params:,} parameters" in header and f"{stats.non_embedding_params:,} non-embedding" in header
    assert f"{stats.n_layers} layers ({stats.counts['A']} attention, {stats.counts['M']} MLP)" in header


@pytest.mark.parametrize("recipe", [p for p in SCALED if p.stem.startswith("llama-")], ids=lambda p: p.stem)
def test_llama_recipe_is_the_presets_own_pattern(recipe):
    config = TrainConfig.from_recipe(recipe)
    arch, _ = resolve_architecture(config.arch, config.preset, "tiny")
    assert arch.pattern == get_preset(config.preset).arch.pattern
